// Every key, channel and value shape of every flavor (key_layout.h).

#include "turnstile/key_layout.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>

#include "core/check.h"
#include "locks/handles/identity_writer.h"

namespace turnstile {
namespace {

// Redisson's prefixes, and turnstile's own where Redisson has no such key.
constexpr std::string_view kLockChannelPrefix = "redisson_lock__channel";
constexpr std::string_view kLockTokenPrefix = "redisson_lock_token";
constexpr std::string_view kUnlockLatchPrefix = "redisson_unlock_latch";
constexpr std::string_view kFairLockQueuePrefix = "redisson_lock_queue";
constexpr std::string_view kFairLockTimeoutPrefix = "redisson_lock_timeout";
constexpr std::string_view kFairLockWaitersPrefix = "turnstile_lock_waiters";       // turnstile's own
constexpr std::string_view kFairLockGrantsPrefix = "turnstile_lock_grants";         // turnstile's own
constexpr std::string_view kTokenLockChannelPrefix = "turnstile_lock__channel";     // turnstile's own
constexpr std::string_view kFencePrefix = "turnstile_fence";                        // turnstile's own
constexpr std::string_view kHolderIdentityPrefix = "turnstile_holder";              // turnstile's own
constexpr std::string_view kPresencePrefix = "turnstile_presence";                  // turnstile's own
constexpr std::string_view kLeaderRecordPrefix = "turnstile_leader";                // turnstile's own
constexpr std::string_view kLeaderChannelPrefix = "turnstile_leader__channel";      // turnstile's own
constexpr std::string_view kRevocationChannelPrefix = "turnstile_revoke__channel";  // turnstile's own
constexpr std::string_view kHolderIdentityHeader = "turnstile-holder 1";
constexpr std::string_view kWakeRegistryPrefix = "turnstile_lock_wake";  // turnstile's own
constexpr std::string_view kSemaphoreChannelPrefix = "redisson_sc";
constexpr std::string_view kPermitTimeoutSuffix = "timeout";
constexpr std::string_view kReadWriteLockChannelPrefix = "redisson_rwlock";
constexpr std::string_view kReadTimeoutSuffix = "rwlock_timeout";
constexpr std::string_view kWriteFieldSuffix = ":write";
constexpr std::string_view kModeField = "mode";

bool has_own_hash_tag(std::string_view name) { return name.find('{') != std::string_view::npos; }

void add_reentrant_keys(KeyLayout& layout) {
  layout.channel = side_key(kLockChannelPrefix, layout.name);
  layout.fencing_counter = side_key(kLockTokenPrefix, layout.name);
  layout.unlock_latch_prefix = side_key(kUnlockLatchPrefix, layout.name);
  layout.holder_identity = side_key(kHolderIdentityPrefix, layout.name);
  layout.wake_registry = side_key(kWakeRegistryPrefix, layout.name);
  layout.fair_grants = side_key(kFairLockGrantsPrefix, layout.name);  // direct handoff
}

constexpr std::size_t kUuidLength = 36;
constexpr std::size_t kTokenHexDigits = 32;

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// 8-4-4-4-12 hex digits, dashes between.
bool is_uuid(std::string_view text) {
  if (text.size() != kUuidLength) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? text[i] != '-' : !is_hex(text[i])) return false;
  }
  return true;
}

// Whether `text` is "<uuid>:" and more; `rest` is the more.
bool split_uuid(std::string_view text, std::string_view& rest) {
  if (text.size() <= kUuidLength + 1 || text[kUuidLength] != ':' || !is_uuid(text.substr(0, kUuidLength))) {
    return false;
  }
  rest = text.substr(kUuidLength + 1);
  return true;
}

// How many bytes at the end of `rest` (a holder identity key after its
// prefix) name a permit (":<32 hex digits>") or a fair waiter
// (":<uuid>:<digits>"); 0 for neither.
std::size_t identity_suffix_bytes(std::string_view rest) {
  const std::size_t permit = kTokenHexDigits + 1;
  if (rest.size() > permit && rest[rest.size() - permit] == ':' &&
      std::all_of(rest.end() - kTokenHexDigits, rest.end(), is_hex)) {
    return permit;
  }
  const std::size_t last = rest.rfind(':');
  if (last == std::string_view::npos || last + 1 == rest.size() || last < kUuidLength + 1) return 0;
  if (!std::all_of(rest.begin() + last + 1, rest.end(), is_digit)) return 0;
  const std::size_t uuid = last - kUuidLength;
  if (rest[uuid - 1] != ':' || !is_uuid(rest.substr(uuid, kUuidLength)) || uuid - 1 == 0) return 0;
  return rest.size() - (uuid - 1);
}

}  // namespace

std::string side_key(std::string_view prefix, std::string_view name) {
  std::string key(prefix);
  key += ':';
  if (has_own_hash_tag(name)) {
    key += name;
  } else {
    key += '{';
    key += name;
    key += '}';
  }
  return key;
}

std::string suffixed_key(std::string_view name, std::string_view suffix) {
  std::string key;
  if (has_own_hash_tag(name)) {
    key = name;
  } else {
    key = "{";
    key += name;
    key += '}';
  }
  key += ':';
  key += suffix;
  return key;
}

std::string KeyLayout::unlock_latch(std::string_view nonce) const {
  TURNSTILE_CHECK(!unlock_latch_prefix.empty());
  return unlock_latch_prefix + ":" + std::string(nonce);
}

std::string KeyLayout::read_timeouts(std::string_view owner) const {
  TURNSTILE_CHECK(has_shared_holds(flavor));
  return hash_tag + ":" + std::string(owner) + ":" + std::string(kReadTimeoutSuffix);
}

std::string KeyLayout::write_field(std::string_view owner) const {
  TURNSTILE_CHECK(has_shared_holds(flavor));
  return std::string(owner) + std::string(kWriteFieldSuffix);
}

KeyLayout::Field KeyLayout::parse_field(std::string_view field) const {
  if (!has_shared_holds(flavor)) return Field{.owner = field};
  if (field == kModeField) return Field{.mode = true};
  if (field.ends_with(kWriteFieldSuffix)) {
    return Field{.owner = field.substr(0, field.size() - kWriteFieldSuffix.size()), .writes = true};
  }
  return Field{.owner = field};
}

std::string KeyLayout::wake_channel(std::string_view client_id) const {
  TURNSTILE_CHECK(!wake_registry.empty());
  return wake_registry + ":" + std::string(client_id);
}

std::string KeyLayout::waiter_channel(std::string_view owner) const {
  TURNSTILE_CHECK(queues_waiters(flavor));
  return channel + ":" + std::string(owner);
}

std::vector<std::string> KeyLayout::side_keys() const {
  std::vector<std::string> keys;
  for (const std::string* key :
       {&fencing_counter, &wake_registry, &fair_queue, &fair_timeouts, &fair_waiters, &fair_grants, &permit_timeouts}) {
    if (!key->empty()) keys.push_back(*key);
  }
  return keys;
}

KeyLayout key_layout(Flavor flavor, std::string_view key) {
  KeyLayout layout;
  layout.flavor = flavor;
  layout.name = key;
  switch (flavor) {
    case Flavor::reentrant:
    case Flavor::redlock:
    case Flavor::multilock:
      add_reentrant_keys(layout);
      break;
    case Flavor::fair:
      add_reentrant_keys(layout);
      layout.fair_queue = side_key(kFairLockQueuePrefix, key);
      layout.fair_timeouts = side_key(kFairLockTimeoutPrefix, key);
      layout.fair_waiters = side_key(kFairLockWaitersPrefix, key);
      layout.fair_grants = side_key(kFairLockGrantsPrefix, key);
      layout.wake_registry.clear();  // its waiters have channels of their own
      break;
    case Flavor::token:
      layout.channel = side_key(kTokenLockChannelPrefix, key);
      layout.holder_identity = side_key(kHolderIdentityPrefix, key);
      layout.wake_registry = side_key(kWakeRegistryPrefix, key);
      break;
    case Flavor::semaphore:
      layout.channel = side_key(kSemaphoreChannelPrefix, key);
      layout.permit_timeouts = suffixed_key(key, kPermitTimeoutSuffix);
      layout.wake_registry = side_key(kWakeRegistryPrefix, key);
      layout.fair_grants = side_key(kFairLockGrantsPrefix, key);  // direct handoff
      break;
    case Flavor::counting_semaphore:
      layout.channel = side_key(kSemaphoreChannelPrefix, key);
      layout.wake_registry = side_key(kWakeRegistryPrefix, key);
      break;
    case Flavor::read_write:
      layout.channel = side_key(kReadWriteLockChannelPrefix, key);
      layout.unlock_latch_prefix = side_key(kUnlockLatchPrefix, key);
      layout.holder_identity = side_key(kHolderIdentityPrefix, key);
      layout.hash_tag = suffixed_key(key, "");
      layout.hash_tag.pop_back();  // "{N}:" -> "{N}", "N:" -> "N"
      layout.wake_registry = side_key(kWakeRegistryPrefix, key);
      break;
  }
  return layout;
}

std::string fence_key(std::string_view resource) { return side_key(kFencePrefix, resource); }

std::string leader_record_key(std::string_view key) { return side_key(kLeaderRecordPrefix, key); }

std::string leader_channel(std::string_view key) { return side_key(kLeaderChannelPrefix, key); }

std::string revocation_channel(std::string_view key) { return side_key(kRevocationChannelPrefix, key); }

std::string presence_key(std::string_view tag, std::string_view client_id) {
  TURNSTILE_CHECK(!tag.empty() && !has_own_hash_tag(tag) && tag.find('}') == std::string_view::npos);
  TURNSTILE_CHECK(!client_id.empty() && client_id.find(':') == std::string_view::npos);
  return side_key(kPresencePrefix, tag) + ":" + std::string(client_id);
}

std::string permit_identity_key(std::string_view name, std::string_view id_hex) {
  return side_key(kHolderIdentityPrefix, name) + ":" + std::string(id_hex);
}

std::string fair_waiter_identity_key(std::string_view name, std::string_view owner) {
  return side_key(kHolderIdentityPrefix, name) + ":" + std::string(owner);
}

std::optional<std::string> side_key_owner(std::string_view key) {
  // "<prefix>:{N}" (or "<prefix>:N" for a name with its own '{'); a
  // latch adds ":<nonce>", a presence key ":<client uuid>".
  for (const std::string_view prefix :
       {kLockTokenPrefix, kFairLockQueuePrefix, kFairLockTimeoutPrefix, kFairLockWaitersPrefix, kFairLockGrantsPrefix,
        kFencePrefix, kWakeRegistryPrefix, kUnlockLatchPrefix, kHolderIdentityPrefix, kPresencePrefix,
        kLeaderRecordPrefix}) {
    if (key.size() <= prefix.size() + 1 || !key.starts_with(prefix) || key[prefix.size()] != ':') continue;
    std::string_view rest = key.substr(prefix.size() + 1);
    if (prefix == kUnlockLatchPrefix || prefix == kPresencePrefix) {
      const std::size_t nonce = rest.rfind(':');
      if (nonce == std::string_view::npos || nonce == 0) return std::nullopt;
      rest = rest.substr(0, nonce);
    } else if (prefix == kHolderIdentityPrefix) {
      // A permit's identity adds ":<32 hex digits>", a fair waiter's
      // ":<owner id>" (a name with its own '{' that ends so itself is taken
      // for one).
      if (rest.starts_with('{') && rest.find("}:") != std::string_view::npos) {
        rest = rest.substr(0, rest.find("}:") + 1);
      } else {
        rest = rest.substr(0, rest.size() - identity_suffix_bytes(rest));
      }
    }
    if (rest.size() >= 2 && rest.front() == '{' && rest.back() == '}' && rest.find('{', 1) == std::string_view::npos) {
      return std::string(rest.substr(1, rest.size() - 2));
    }
    return has_own_hash_tag(rest) ? std::optional<std::string>(rest) : std::nullopt;
  }
  // "{N}:timeout", "{N}:<owner>:rwlock_timeout:<k>" (or "N:..." for a
  // name with its own '{').
  const std::string timeout_suffix = ":" + std::string(kPermitTimeoutSuffix);
  std::string_view tagged;
  if (key.ends_with(timeout_suffix)) {
    tagged = key.substr(0, key.size() - timeout_suffix.size());
  } else {
    const std::size_t read = key.rfind(":" + std::string(kReadTimeoutSuffix) + ":");
    if (read == std::string_view::npos) return std::nullopt;
    const std::string_view count = key.substr(read + kReadTimeoutSuffix.size() + 2);
    if (count.empty() || count.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
    // Before it: "<tag>:<owner>", the owner a client-owned id (it has
    // colons of its own: split at the tag's end).
    const std::string_view before = key.substr(0, read);
    const std::size_t tag_end = before.starts_with('{') ? before.find("}:") : std::string_view::npos;
    if (tag_end == std::string_view::npos) return std::nullopt;
    tagged = before.substr(0, tag_end + 1);
  }
  if (tagged.size() >= 2 && tagged.front() == '{' && tagged.back() == '}' &&
      tagged.find('{', 1) == std::string_view::npos) {
    return std::string(tagged.substr(1, tagged.size() - 2));
  }
  return has_own_hash_tag(tagged) && key.ends_with(timeout_suffix) ? std::optional<std::string>(tagged) : std::nullopt;
}

namespace {

// Appends `text` to `out`, cleaned and cut as holder_text() says.
void append_holder_text(std::string& out, std::string_view text, std::size_t max_bytes) {
  constexpr std::string_view kCut = "...";
  TURNSTILE_CHECK(max_bytes > kCut.size());
  const bool cut = text.size() > max_bytes;
  const std::size_t start = out.size();
  out += cut ? text.substr(0, max_bytes - kCut.size()) : text;
  for (std::size_t i = start; i < out.size(); ++i) {
    const auto byte = static_cast<unsigned char>(out[i]);
    if (byte < 0x20 || byte >= 0x7f) out[i] = '?';
  }
  if (cut) out += kCut;
}

}  // namespace

std::string holder_text(std::string_view text, std::size_t max_bytes) {
  std::string out;
  append_holder_text(out, text, max_bytes);
  return out;
}

namespace {

// Appends "\n<field>=<text>", `text` cleaned and cut as holder_text() does.
void append_line(std::string& value, std::string_view field, std::string_view text, std::size_t max_bytes) {
  value += '\n';
  value += field;
  value += '=';
  append_holder_text(value, text, max_bytes);
}

// Appends "\n<field>=<number>".
void append_number(std::string& value, std::string_view field, std::int64_t number) {
  std::array<char, 24> digits{};
  const std::to_chars_result written = std::to_chars(digits.data(), digits.data() + digits.size(), number);
  TURNSTILE_CHECK(written.ec == std::errc());
  value += '\n';
  value += field;
  value += '=';
  value.append(digits.data(), written.ptr);
}

}  // namespace

namespace detail {

IdentityWriter::IdentityWriter(const HolderIdentity& process) {
  append_line(host_and_pid_, "host", process.host, kMaxHolderHostBytes);
  append_number(host_and_pid_, "pid", process.pid);
  append_line(command_and_label_, "command", process.command, kMaxHolderCommandBytes);
  append_line(command_and_label_, "label", process.label, kMaxHolderLabelBytes);
}

std::string IdentityWriter::value(std::string_view owner, std::int64_t started_at_epoch_ms,
                                  std::int64_t lock_delay_ms) const {
  constexpr std::size_t kNumbersBytes = 64;  // the fields' names, separators and numbers, roughly
  std::string value;
  value.reserve(kHolderIdentityHeader.size() + kNumbersBytes + owner.size() + host_and_pid_.size() +
                command_and_label_.size());
  value += kHolderIdentityHeader;
  append_line(value, "owner", owner, kMaxHolderHostBytes);
  value += host_and_pid_;
  append_number(value, "started_at_ms", started_at_epoch_ms);
  value += command_and_label_;
  if (lock_delay_ms != 0) append_number(value, "lock_delay_ms", lock_delay_ms);
  return value;
}

}  // namespace detail

std::string holder_identity_value(const HolderIdentity& identity) {
  return detail::IdentityWriter(identity).value(identity.owner, identity.started_at_epoch_ms, identity.lock_delay_ms);
}

std::optional<HolderIdentity> parse_holder_identity(std::string_view value) {
  if (!value.starts_with(kHolderIdentityHeader)) return std::nullopt;
  std::string_view rest = value.substr(kHolderIdentityHeader.size());
  HolderIdentity identity;
  const auto integer = [](std::string_view text, std::int64_t& out) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
    return error == std::errc() && end == text.data() + text.size() && !text.empty();
  };
  // Bounded: one pass over the value, a line per step.
  while (!rest.empty()) {
    if (rest.front() != '\n') return std::nullopt;
    rest.remove_prefix(1);
    const std::size_t end = std::min(rest.find('\n'), rest.size());
    const std::string_view line = rest.substr(0, end);
    rest.remove_prefix(end);
    const std::size_t equals = line.find('=');
    if (equals == std::string_view::npos) return std::nullopt;
    const std::string_view field = line.substr(0, equals);
    const std::string_view text = line.substr(equals + 1);
    if (field == "owner") {
      identity.owner = text;
    } else if (field == "host") {
      identity.host = text;
    } else if (field == "pid") {
      if (!integer(text, identity.pid)) return std::nullopt;
    } else if (field == "started_at_ms") {
      if (!integer(text, identity.started_at_epoch_ms)) return std::nullopt;
    } else if (field == "command") {
      identity.command = text;
    } else if (field == "label") {
      identity.label = text;
    } else if (field == "lock_delay_ms") {
      if (!integer(text, identity.lock_delay_ms) || identity.lock_delay_ms < 0) return std::nullopt;
    }  // a field of a later version: skipped
  }
  if (identity.owner.empty()) return std::nullopt;
  return identity;
}

bool is_owner_id(std::string_view text) {
  std::string_view rest;
  if (!split_uuid(text, rest)) return false;
  for (char c : rest) {
    if (!is_digit(c)) return false;
  }
  return true;
}

bool is_client_owned(std::string_view text) {
  std::string_view rest;
  return split_uuid(text, rest);
}

bool is_hold_count(std::string_view text) {
  if (text.empty() || text.front() == '0') return false;
  for (char c : text) {
    if (!is_digit(c)) return false;
  }
  return true;
}

std::string_view token_of(std::string_view value) {
  if (value.ends_with(kTokenWaitersMark)) value.remove_suffix(kTokenWaitersMark.size());
  return value;
}

bool is_lock_token(std::string_view text) {
  std::string_view rest;
  if (!split_uuid(token_of(text), rest) || rest.size() != kTokenHexDigits) return false;
  for (char c : rest) {
    if (!is_hex(c)) return false;
  }
  return true;
}

namespace {

// Every value a hold count and, with `client_owned`, every owner
// client-owned; a read-write lock's 'mode' read or write.
bool is_lock_hash_shape(const KeyLayout& layout, const std::vector<std::string>& flat, bool client_owned) {
  if (flat.empty() || flat.size() % 2 != 0) return false;
  bool has_mode = false;
  for (std::size_t i = 0; i + 1 < flat.size(); i += 2) {
    const KeyLayout::Field field = layout.parse_field(flat[i]);
    if (field.mode) {
      if (flat[i + 1] != "read" && flat[i + 1] != "write") return false;
      has_mode = true;
      continue;
    }
    if (!is_hold_count(flat[i + 1]) || (client_owned && !is_client_owned(field.owner))) return false;
  }
  return has_mode == has_shared_holds(layout.flavor);
}

}  // namespace

bool is_held_lock_hash(const KeyLayout& layout, const std::vector<std::string>& flat) {
  return is_lock_hash_shape(layout, flat, false);
}

bool is_lock_hash(const KeyLayout& layout, const std::vector<std::string>& flat) {
  return is_lock_hash_shape(layout, flat, true);
}

}  // namespace turnstile
