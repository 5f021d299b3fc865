// Reading a lock's or semaphore's state with plain commands.

#include "cli/lock_inspection.h"

#include <cassert>
#include <charconv>
#include <map>

#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/key_layout.h"

namespace turnstile::cli {
namespace {

// Redisson's expiry score for a permit taken without a lease: never.
constexpr std::int64_t kPermitNeverExpiresMs = 922337203685477;
// PTTL's reply for a key without an expiry (-2: no key).
constexpr std::int64_t kPttlNoExpiry = -1;

std::optional<std::int64_t> parse_integer(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// Scores come back as strings; deadlines and expiries are whole ms, but a
// foreign writer may have stored "1.7e12" or "inf".
std::optional<std::int64_t> parse_score(std::string_view text) {
  if (std::optional<std::int64_t> integer = parse_integer(text)) return integer;
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !(value < 9.2e18 && value > -9.2e18)) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(value);
}

// A member as printable ASCII: bytes outside 0x20..0x7e (and the
// backslash) as \xNN, so text and JSON output never carry raw bytes.
std::string printable(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && byte != '\\') {
      out += c;
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  return out;
}

// A permit id as users see it: 32 hex digits, whether stored as 16 raw
// bytes (Redisson since 3.17.0, turnstile) or as the hex digits (older
// versions); a member of another shape, escaped.
std::string permit_id_text(std::string_view member) {
  try {
    return PermitId(member).hex();
  } catch (const InvalidArgumentError&) {
    return printable(member);
  }
}

[[noreturn]] void not_ours(const std::string& name, std::string_view what) {
  throw WrongTypeError("WRONGTYPE " + in_quotes(name) + " holds " + std::string(what) +
                       ", not a turnstile lock or semaphore");
}

class Reader {
 public:
  explicit Reader(Backend& backend) : backend_(backend) {}

  std::string type(const std::string& key) { return backend_.command({"TYPE", key}).as_string(); }
  std::int64_t integer(const std::vector<std::string>& argv) { return backend_.command(argv).as_integer(); }
  std::vector<std::string> strings(const std::vector<std::string>& argv) {
    const Reply reply = backend_.command(argv);
    std::vector<std::string> result;
    if (reply.is_nil()) return result;
    for (const Reply& element : reply.as_array()) result.push_back(element.as_string());
    return result;
  }
  std::optional<std::string> get(const std::string& key) {
    const Reply reply = backend_.command({"GET", key});
    if (reply.is_nil()) return std::nullopt;
    return reply.as_string();
  }
  // A zset's first kMaxListed members with their scores.
  std::vector<std::pair<std::string, std::string>> zset(const std::string& key) {
    const std::vector<std::string> flat = strings({"ZRANGE", key, "0", std::to_string(kMaxListed - 1), "WITHSCORES"});
    std::vector<std::pair<std::string, std::string>> pairs;
    for (std::size_t i = 0; i + 1 < flat.size(); i += 2) pairs.emplace_back(flat[i], flat[i + 1]);
    return pairs;
  }

 private:
  Backend& backend_;
};

// The holders of a lock hash (lock_shape.h); a hash of any other shape is
// not ours. A lock hash has one field per holder, never kMaxListed.
void read_reentrant(Reader& reader, Inspection& result) {
  const std::string& name = result.name;
  result.holder_count = reader.integer({"HLEN", name});
  if (result.holder_count > kMaxListed) not_ours(name, "a hash of more fields than a lock has");
  const std::vector<std::string> flat = reader.strings({"HGETALL", name});
  for (std::size_t i = 0; i + 1 < flat.size(); i += 2) {
    if (!is_owner_id(flat[i]) || !is_hold_count(flat[i + 1])) {
      not_ours(name, "a hash of other fields than owner ids with hold counts");
    }
    result.holders.push_back(Holder{.owner = flat[i], .hold_count = *parse_integer(flat[i + 1])});
  }
}

// The holders of a read-write lock hash: 'mode' read or write, every other
// field an owner id (a writer's with ":write" after it) with a hold count;
// any other hash is not ours.
void read_read_write(Reader& reader, Inspection& result) {
  const std::string& name = result.name;
  constexpr std::string_view kWrite = ":write";
  const std::int64_t fields = reader.integer({"HLEN", name});
  if (fields > kMaxListed) not_ours(name, "a hash of more fields than a lock has");
  const std::vector<std::string> flat = reader.strings({"HGETALL", name});
  for (std::size_t i = 0; i + 1 < flat.size(); i += 2) {
    if (flat[i] == "mode") {
      if (flat[i + 1] != "read" && flat[i + 1] != "write")
        not_ours(name, "a hash whose 'mode' is neither read nor write");
      result.mode = flat[i + 1];
      continue;
    }
    std::string owner = flat[i];
    const bool writes = owner.ends_with(kWrite);
    if (writes) owner.resize(owner.size() - kWrite.size());
    if (!is_owner_id(owner) || !is_hold_count(flat[i + 1])) {
      not_ours(name, "a hash of other fields than a read-write lock's");
    }
    result.holders.push_back(Holder{.owner = owner, .hold_count = *parse_integer(flat[i + 1]), .writes = writes});
  }
  result.holder_count = static_cast<std::int64_t>(result.holders.size());
}

Inspection free_inspection(const std::string& name) {
  Inspection result;
  result.name = name;
  return result;
}

// A lock always has an expiry: one without is not ours. Nullopt when the
// key vanished since it was read (a lock that expired or was released).
std::optional<std::int64_t> lock_pttl(Reader& reader, const std::string& name, std::string_view type) {
  const std::int64_t pttl = reader.integer({"PTTL", name});
  if (pttl == kPttlNoExpiry) not_ours(name, "a " + std::string(type) + " without an expiry");
  if (pttl < 0) return std::nullopt;
  return pttl;
}

void read_queue(Reader& reader, Inspection& result) {
  const KeyLayout layout = key_layout(Flavor::fair, result.name);
  const std::string& queue_key = layout.fair_queue;
  if (reader.type(queue_key) != "list") return;
  result.queue_length = reader.integer({"LLEN", queue_key});
  std::map<std::string, std::int64_t, std::less<>> deadlines;
  for (const auto& [owner, score] : reader.zset(layout.fair_timeouts)) {
    if (std::optional<std::int64_t> deadline = parse_score(score)) deadlines[owner] = *deadline;
  }
  std::int64_t position = 0;
  for (std::string& owner : reader.strings({"LRANGE", queue_key, "0", std::to_string(kMaxListed - 1)})) {
    Waiter waiter{.position = ++position, .owner = printable(owner), .deadline_epoch_ms = std::nullopt};
    if (auto it = deadlines.find(owner); it != deadlines.end()) waiter.deadline_epoch_ms = it->second;
    result.queue.push_back(std::move(waiter));
  }
}

void read_fencing_counter(Reader& reader, Inspection& result) {
  if (std::optional<std::string> counter = reader.get(key_layout(Flavor::reentrant, result.name).fencing_counter)) {
    result.last_fencing_token = parse_integer(*counter);
  }
}

void read_permits(Reader& reader, Inspection& result) {
  const std::string timeout_key = key_layout(Flavor::semaphore, result.name).permit_timeouts;
  const std::string timeout_type = reader.type(timeout_key);
  if (timeout_type != "zset") return;
  result.flavor = Flavor::semaphore;
  result.permits_held = reader.integer({"ZCARD", timeout_key});
  for (const auto& [id, score] : reader.zset(timeout_key)) {
    std::optional<std::int64_t> expiry = parse_score(score);
    if (expiry && *expiry >= kPermitNeverExpiresMs) expiry.reset();
    result.permits.push_back(Permit{.id = permit_id_text(id), .expiry_epoch_ms = expiry});
  }
}

}  // namespace

std::string_view status_kind_name(std::optional<Flavor> flavor) {
  if (!flavor) return "free";
  switch (*flavor) {
    case Flavor::reentrant:
      return "reentrant_lock";
    case Flavor::fair:
      return "fair_lock";
    case Flavor::token:
      return "token_lock";
    case Flavor::counting_semaphore:
      return "semaphore";
    case Flavor::semaphore:
      return "crash_safe_semaphore";
    case Flavor::read_write:
      return "read_write_lock";
    case Flavor::redlock:
    case Flavor::multilock:
      break;
  }
  assert(false && "inspect() finds no composite lock: its nodes are reentrant locks");
  return "unknown";
}

Inspection inspect(Backend& backend, const std::string& name) {
  Reader reader(backend);
  Inspection result;
  result.name = name;
  const std::string type = reader.type(name);
  if (type == "none") {
    read_queue(reader, result);
    if (result.queue_length > 0) result.flavor = Flavor::fair;
    return result;
  }
  if (type == "hash" && reader.integer({"HEXISTS", name, "mode"}) == 1) {
    result.flavor = Flavor::read_write;
    read_read_write(reader, result);
    result.pttl_ms = lock_pttl(reader, name, type);
    if (!result.pttl_ms) return free_inspection(name);  // released meanwhile
    return result;
  }
  if (type == "hash") {
    result.flavor = Flavor::reentrant;
    read_reentrant(reader, result);
    result.pttl_ms = lock_pttl(reader, name, type);
    if (!result.pttl_ms) return free_inspection(name);  // released meanwhile
    read_queue(reader, result);
    if (result.queue_length > 0) result.flavor = Flavor::fair;
    read_fencing_counter(reader, result);
    return result;
  }
  if (type == "string") {
    const std::optional<std::string> value = reader.get(name);
    if (!value) return result;  // expired between TYPE and GET
    if (std::optional<std::int64_t> available = parse_integer(*value)) {
      result.flavor = Flavor::counting_semaphore;
      result.permits_available = available;
      read_permits(reader, result);
      return result;
    }
    if (!is_lock_token(*value)) not_ours(name, "a plain string (neither a lock token nor a permit count)");
    result.pttl_ms = lock_pttl(reader, name, type);
    if (!result.pttl_ms) return free_inspection(name);  // released meanwhile
    result.flavor = Flavor::token;
    result.holder_count = 1;
    result.holders.push_back(Holder{.owner = *value, .hold_count = 1});
    return result;
  }
  not_ours(name, "a " + type);
}

}  // namespace turnstile::cli
