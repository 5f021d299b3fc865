// core/key_scan.h
//
// One server's SCAN cursor loop, for Backend::scan_each_master(): the
// default implementation (through command()) and the cluster's (each
// master in turn) share it. Bounded: at most kMaxScanCallsPerServer calls
// per server, and ScanOptions::max_keys keys in all.

#ifndef TURNSTILE_CORE_KEY_SCAN_H_
#define TURNSTILE_CORE_KEY_SCAN_H_

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "turnstile/backend.h"
#include "turnstile/reply.h"

namespace turnstile::detail {

// A server whose cursor has not come back to 0 after this many calls is
// answering something other than SCAN's promise (10^9 keys at COUNT 1,000).
inline constexpr std::int64_t kMaxScanCallsPerServer = 1'000'000;

// Sends one command to the server being scanned and returns its reply
// (an error reply raised, as Backend::command() does).
using SendCommand = std::function<Reply(const std::vector<std::string>& argv)>;

// Throws InvalidArgumentError for options out of range.
void check_scan_options(const ScanOptions& options);

// Scans one server through `send`, adding to `result` the keys not in
// `seen` (and to `seen`), until its cursor comes back to 0 or result.keys
// holds options.max_keys (result.complete is then false). `where` names
// the server in errors. Throws ProtocolError for a reply SCAN cannot give.
void scan_server(const SendCommand& send, const ScanOptions& options, const std::string& where, ScanResult& result,
                 std::unordered_set<std::string>& seen);

}  // namespace turnstile::detail

#endif  // TURNSTILE_CORE_KEY_SCAN_H_
