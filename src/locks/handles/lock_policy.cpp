// LockPolicy: key globs → flavor and options, from TOML (toml++).

#include "turnstile/lock_policy.h"

#include <fnmatch.h>

#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include <toml++/toml.h>

#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/fair_lock.h"

namespace turnstile {
namespace {

constexpr std::string_view kDefaultTable = "default";
constexpr std::string_view kRuleArray = "rule";
constexpr std::string_view kMatchKey = "match";
constexpr std::string_view kFlavorKey = "flavor";
constexpr std::string_view kPermitsKey = "permits";
constexpr std::string_view kLeaseKey = "lease_ms";
// The old name of lease_ms, still read (deprecated; lock_policy.h).
constexpr std::string_view kDeprecatedLeaseKey = "ttl_ms";
constexpr std::string_view kWaitKey = "wait_ms";
constexpr std::string_view kAllowEvictingKey = "allow_evicting";
constexpr std::string_view kLockDelayKey = "lock_delay_ms";

// Reads one table of the file; every error names source:line:column.
class TableReader {
 public:
  TableReader(std::string_view source_name, const toml::table& table) : source_name_(source_name), table_(table) {}

  [[noreturn]] void fail(const toml::source_region& where, const std::string& what) const {
    throw InvalidArgumentError(std::string(source_name_) + ":" + std::to_string(where.begin.line) + ":" +
                               std::to_string(where.begin.column) + ": " + what);
  }

  void refuse_unknown_keys(std::initializer_list<std::string_view> known) const {
    for (const auto& [key, node] : table_) {
      bool is_known = false;
      for (std::string_view name : known) is_known = is_known || key.str() == name;
      if (!is_known) fail(key.source(), "unknown key '" + std::string(key.str()) + "'");
    }
  }

  std::optional<std::string> string(std::string_view key) const {
    const toml::node* node = table_.get(key);
    if (node == nullptr) return std::nullopt;
    if (!node->is_string()) fail(node->source(), in_quotes(key) + " must be a string");
    return node->value<std::string>();
  }

  std::optional<std::int64_t> integer(std::string_view key) const {
    const toml::node* node = table_.get(key);
    if (node == nullptr) return std::nullopt;
    if (!node->is_integer()) fail(node->source(), in_quotes(key) + " must be an integer");
    return node->value<std::int64_t>();
  }

  std::optional<bool> boolean(std::string_view key) const {
    const toml::node* node = table_.get(key);
    if (node == nullptr) return std::nullopt;
    if (!node->is_boolean()) fail(node->source(), in_quotes(key) + " must be true or false");
    return node->value<bool>();
  }

  // The same limits as the library's calls and the command line's flags.
  void check_range(std::string_view key, std::int64_t value, std::int64_t min, std::int64_t max) const {
    if (value < min || value > max) {
      fail(where(key), in_quotes(key) + " must be within [" + std::to_string(min) + ", " + std::to_string(max) +
                           "], got " + std::to_string(value));
    }
  }

  const toml::source_region& where(std::string_view key) const {
    const toml::node* node = table_.get(key);
    return node != nullptr ? node->source() : table_.source();
  }

  // flavor, permits, lease_ms (or ttl_ms), wait_ms, allow_evicting into
  // `rule`.
  void read_options(LockRule& rule) const {
    if (std::optional<std::string> flavor = string(kFlavorKey)) {
      std::optional<Flavor> parsed = parse_flavor(*flavor);
      if (!parsed) {
        fail(where(kFlavorKey),
             "unknown flavor '" + *flavor + "' (expected reentrant, fair, token, semaphore or read-write)");
      }
      if (!is_policy_flavor(*parsed)) {
        fail(where(kFlavorKey),
             "flavor '" + *flavor +
                 "' is not for a lock policy (expected reentrant, fair, token, semaphore or read-write)");
      }
      rule.flavor = *parsed;
    }
    if (std::optional<std::int64_t> permits = integer(kPermitsKey)) {
      if (!is_semaphore(rule.flavor)) fail(where(kPermitsKey), "'permits' is only for flavor = \"semaphore\"");
      check_range(kPermitsKey, *permits, 1, kMaxPermits);
      rule.permits = *permits;
    } else if (is_semaphore(rule.flavor)) {
      fail(where(kFlavorKey), "a semaphore needs 'permits'");
    }
    if (table_.contains(kLeaseKey) && table_.contains(kDeprecatedLeaseKey)) {
      fail(where(kDeprecatedLeaseKey), "'ttl_ms' is the old name of 'lease_ms': give one of them");
    }
    const std::string_view lease_key = table_.contains(kDeprecatedLeaseKey) ? kDeprecatedLeaseKey : kLeaseKey;
    if (std::optional<std::int64_t> lease_ms = integer(lease_key)) {
      check_range(lease_key, *lease_ms, 1, kMaxLease.count());
      rule.lease = std::chrono::milliseconds(*lease_ms);
    }
    if (std::optional<std::int64_t> wait_ms = integer(kWaitKey)) {
      check_range(kWaitKey, *wait_ms, 0, kMaxLease.count());
      rule.wait = std::chrono::milliseconds(*wait_ms);
    }
    if (std::optional<bool> allow_evicting = boolean(kAllowEvictingKey)) rule.allow_evicting = *allow_evicting;
    if (std::optional<std::int64_t> lock_delay_ms = integer(kLockDelayKey)) {
      check_range(kLockDelayKey, *lock_delay_ms, 0, kMaxLockDelay.count());
      rule.lock_delay = std::chrono::milliseconds(*lock_delay_ms);
    }
  }

 private:
  std::string_view source_name_;
  const toml::table& table_;
};

[[noreturn]] void fail_at(std::string_view source_name, const toml::source_region& where, const std::string& what) {
  static const toml::table empty;
  TableReader(source_name, empty).fail(where, what);
}

}  // namespace

LockPolicy LockPolicy::parse(std::string_view toml_text, std::string_view source_name) {
  toml::table document;
  try {
    document = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& error) {
    fail_at(source_name, error.source(), std::string(error.description()));
  }

  LockPolicy policy;
  TableReader top(source_name, document);
  top.refuse_unknown_keys({kDefaultTable, kRuleArray});

  if (const toml::node* node = document.get(kDefaultTable)) {
    const toml::table* table = node->as_table();
    if (table == nullptr) fail_at(source_name, node->source(), "'default' must be a table ([default])");
    TableReader reader(source_name, *table);
    reader.refuse_unknown_keys(
        {kFlavorKey, kPermitsKey, kLeaseKey, kDeprecatedLeaseKey, kWaitKey, kAllowEvictingKey, kLockDelayKey});
    reader.read_options(policy.default_rule_);
    policy.default_rule_.line = static_cast<int>(table->source().begin.line);
  }

  if (const toml::node* node = document.get(kRuleArray)) {
    const toml::array* array = node->as_array();
    if (array == nullptr) fail_at(source_name, node->source(), "'rule' must be an array of tables ([[rule]])");
    if (array->size() > kMaxRules) {
      fail_at(source_name, node->source(), "more than " + std::to_string(kMaxRules) + " rules");
    }
    for (const toml::node& element : *array) {
      const toml::table* table = element.as_table();
      if (table == nullptr) fail_at(source_name, element.source(), "each rule must be a table ([[rule]])");
      TableReader reader(source_name, *table);
      reader.refuse_unknown_keys({kMatchKey, kFlavorKey, kPermitsKey, kLeaseKey, kDeprecatedLeaseKey, kWaitKey,
                                  kAllowEvictingKey, kLockDelayKey});
      LockRule rule;
      std::optional<std::string> pattern = reader.string(kMatchKey);
      if (!pattern || pattern->empty()) fail_at(source_name, table->source(), "a rule needs a non-empty 'match'");
      rule.pattern = std::move(*pattern);
      reader.read_options(rule);
      rule.line = static_cast<int>(table->source().begin.line);
      policy.rules_.push_back(std::move(rule));
    }
  }
  return policy;
}

LockPolicy LockPolicy::load(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw InvalidArgumentError("cannot read lock policy file '" + path + "'");
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) throw InvalidArgumentError("cannot read lock policy file '" + path + "'");
  return parse(text.str(), path);
}

const LockRule& LockPolicy::rule_for(std::string_view key) const {
  const std::string key_text(key);  // fnmatch wants NUL-terminated strings
  for (const LockRule& rule : rules_) {
    if (fnmatch(rule.pattern.c_str(), key_text.c_str(), 0) == 0) return rule;
  }
  return default_rule_;
}

std::unique_ptr<Lock> LockPolicy::lock_for(Client& client, std::string_view key) const {
  const LockRule& rule = rule_for(key);
  if (is_semaphore(rule.flavor)) {
    throw InvalidArgumentError("key " + in_quotes(key) + " is configured as a " +
                               std::string(flavor_name(rule.flavor)) + ", which is not a lock: use semaphore_for()");
  }
  // Every lock flavor a policy names is made as a Lock (a read-write rule:
  // its write half).
  std::unique_ptr<Holdable> held = client.holdable(rule.flavor, key, {.lock_delay = rule.lock_delay});
  auto* lock = dynamic_cast<Lock*>(held.get());
  if (lock == nullptr) {
    throw InvalidArgumentError("key " + in_quotes(key) + " is configured as a " +
                               std::string(flavor_name(rule.flavor)) + ", which is not a Lock");
  }
  held.release();
  return std::unique_ptr<Lock>(lock);
}

PermitSemaphore LockPolicy::semaphore_for(Client& client, std::string_view key) const {
  const LockRule& rule = rule_for(key);
  if (!is_semaphore(rule.flavor)) {
    throw InvalidArgumentError("key " + in_quotes(std::string(key)) + " is configured as a " +
                               std::string(flavor_name(rule.flavor)) + " lock, not a semaphore: use lock_for()");
  }
  return client.permit_semaphore(key, {.lock_delay = rule.lock_delay});
}

}  // namespace turnstile
