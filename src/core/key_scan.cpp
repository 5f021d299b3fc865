// SCAN, one server at a time (core/key_scan.h).

#include "core/key_scan.h"

#include "core/check.h"
#include "turnstile/errors.h"

namespace turnstile::detail {

void check_scan_options(const ScanOptions& options) {
  if (options.count_per_call < 1 || options.count_per_call > kMaxScanCountPerCall) {
    throw InvalidArgumentError("scan: count_per_call must be within [1, " + std::to_string(kMaxScanCountPerCall) +
                               "], got " + std::to_string(options.count_per_call));
  }
  if (options.max_keys < 1 || options.max_keys > kMaxScanKeys) {
    throw InvalidArgumentError("scan: max_keys must be within [1, " + std::to_string(kMaxScanKeys) + "], got " +
                               std::to_string(options.max_keys));
  }
  if (options.match.empty()) throw InvalidArgumentError("scan: the match pattern is empty");
}

void scan_server(const SendCommand& send, const ScanOptions& options, const std::string& where, ScanResult& result,
                 std::unordered_set<std::string>& seen) {
  TURNSTILE_CHECK(result.keys.size() == seen.size());
  std::string cursor = "0";
  for (std::int64_t call = 0;; ++call) {
    if (call >= kMaxScanCallsPerServer) {
      throw ProtocolError(where + ": SCAN did not finish within " + std::to_string(kMaxScanCallsPerServer) + " calls");
    }
    if (result.keys.size() >= options.max_keys) {
      result.complete = false;
      return;
    }
    const Reply reply = send({"SCAN", cursor, "MATCH", options.match, "COUNT", std::to_string(options.count_per_call)});
    if (!reply.is_array() || reply.as_array().size() != 2 || !reply.as_array()[0].is_bulk() ||
        !reply.as_array()[1].is_array()) {
      throw ProtocolError(where + ": SCAN answered " + reply.to_string() + ", expected [cursor, [keys]]");
    }
    for (const Reply& key : reply.as_array()[1].as_array()) {
      if (!key.is_bulk()) throw ProtocolError(where + ": SCAN answered a key that is not a string: " + key.to_string());
      if (result.keys.size() >= options.max_keys) {
        result.complete = false;
        return;
      }
      if (seen.insert(key.as_string()).second) result.keys.push_back(key.as_string());
    }
    cursor = reply.as_array()[0].as_string();
    if (cursor == "0") return;
  }
}

}  // namespace turnstile::detail

namespace turnstile {

ScanResult Backend::scan_each_master(const ScanOptions& options) {
  detail::check_scan_options(options);
  ScanResult result;
  std::unordered_set<std::string> seen;
  detail::scan_server([this](const std::vector<std::string>& argv) { return command(argv); }, options, describe(),
                      result, seen);
  return result;
}

}  // namespace turnstile
