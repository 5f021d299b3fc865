// What is at a name, read with plain commands (turnstile/inspection.h).

#include "turnstile/inspection.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "core/check.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/key_layout.h"
#include "turnstile/read_write_lock.h"

namespace turnstile {
namespace {

// Redisson's expiry score for a permit taken without a lease: never.
constexpr std::int64_t kPermitNeverExpiresMs = 922337203685477;
// PTTL's reply for a key without an expiry (-2: no key).
constexpr std::int64_t kPttlNoExpiry = -1;
// The longest string a lock or semaphore keeps at its name: a token
// ("<uuid>:" and 32 hex digits, 69 bytes) or a permit count (at most 20).
// A longer one is someone's data, told by STRLEN without reading it (a
// listing beside large values must not fetch them).
constexpr std::int64_t kMaxOwnStringBytes = 128;

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

[[noreturn]] void not_told(const std::string& name, std::string_view what, Flavor told) {
  throw WrongTypeError("WRONGTYPE " + in_quotes(name) + " holds " + std::string(what) + ", not a " +
                       std::string(flavor_name(told)));
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
  // A string side key of the lock; one of another type is ignored and
  // noted in `result` (Inspection::notes), never fatal.
  std::optional<std::string> side_get(const std::string& key, Inspection& result) {
    try {
      const Reply reply = backend_.command({"GET", key});
      if (reply.is_error()) throw_server_error(reply.as_string());
      if (reply.is_nil()) return std::nullopt;
      return reply.as_string();
    } catch (const WrongTypeError&) {
      result.notes.push_back("side key " + in_quotes(key) + " holds another type than a string: ignored");
      return std::nullopt;
    }
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

// Every flavor whose main key `kind` describes, in the table's order.
std::vector<Flavor> flavors_of(StatusKind kind) {
  std::vector<Flavor> flavors;
  for (const FlavorTraits& traits : kFlavorTable) {
    if (traits.status_kind == kind) flavors.push_back(traits.flavor);
  }
  return flavors;
}

// The holders of a lock hash, of `layout`'s flavor (key_layout.h: any
// owner, every value a hold count; a read-write lock's 'mode'); a hash of
// any other shape is not ours. A lock hash has one field per holder,
// never kMaxListed.
void read_lock_hash(Reader& reader, const KeyLayout& layout, Inspection& result) {
  const std::string& name = result.name;
  if (reader.integer({"HLEN", name}) > kMaxListed) not_ours(name, "a hash of more fields than a lock has");
  const std::vector<std::string> flat = reader.strings({"HGETALL", name});
  if (flat.empty()) return;  // released meanwhile
  if (!is_held_lock_hash(layout, flat)) {
    not_ours(name, has_shared_holds(layout.flavor) ? "a hash of other fields than a read-write lock's"
                                                   : "a hash whose values are not all hold counts");
  }
  for (std::size_t i = 0; i + 1 < flat.size(); i += 2) {
    const KeyLayout::Field field = layout.parse_field(flat[i]);
    if (field.mode) {
      result.mode = flat[i + 1];
      continue;
    }
    std::int64_t count = 0;
    std::from_chars(flat[i + 1].data(), flat[i + 1].data() + flat[i + 1].size(), count);
    result.holders.push_back(LockHolder{.owner = printable(field.owner),
                                        .hold_count = count,
                                        .writes = field.writes,
                                        .foreign = !is_owner_id(field.owner)});
  }
  result.holder_count = static_cast<std::int64_t>(result.holders.size());
}

// Each reader's identity: the value of its first hold's timeout key
// (lua/read_write_lock_read_acquire.lua), where Redisson writes 1.
void read_reader_identities(Reader& reader, const KeyLayout& layout, Inspection& result) {
  for (LockHolder& holder : result.holders) {
    if (holder.writes || holder.foreign) continue;
    const std::optional<std::string> value = reader.side_get(layout.read_timeouts(holder.owner) + ":1", result);
    if (!value) continue;
    std::optional<HolderIdentity> identity = parse_holder_identity(*value);
    if (identity && identity->owner == holder.owner) holder.identity = std::move(identity);
  }
}

// The identity beside a lock with one holder, given to the holder it
// names (a read-write lock's: its writer; its readers' are their own).
void read_identity(Reader& reader, const KeyLayout& layout, Inspection& result) {
  if (layout.holder_identity.empty() || result.holders.empty()) return;
  if (has_shared_holds(layout.flavor)) read_reader_identities(reader, layout, result);
  const std::optional<std::string> value = reader.side_get(layout.holder_identity, result);
  if (!value) return;
  std::optional<HolderIdentity> identity = parse_holder_identity(*value);
  if (!identity) return;
  for (LockHolder& holder : result.holders) {
    if (holder.owner == identity->owner && (!has_shared_holds(layout.flavor) || holder.writes)) {
      holder.identity = std::move(identity);
      return;
    }
  }
}

// A lock always has an expiry: one without is not ours. Nullopt when the
// key vanished since it was read (a lock that expired or was released).
std::optional<std::chrono::milliseconds> remaining_lease_of(Reader& reader, const std::string& name,
                                                            std::string_view type) {
  const std::int64_t pttl = reader.integer({"PTTL", name});
  if (pttl == kPttlNoExpiry) not_ours(name, "a " + std::string(type) + " without an expiry");
  if (pttl < 0) return std::nullopt;
  return std::chrono::milliseconds(pttl);
}

// A fair lock's queue; whether any of its keys exists.
bool read_queue(Reader& reader, Inspection& result) {
  const KeyLayout layout = key_layout(Flavor::fair, result.name);
  const bool timeouts = reader.type(layout.fair_timeouts) == "zset";
  const bool waiters = reader.type(layout.fair_waiters) == "zset";
  if (reader.type(layout.fair_queue) != "list") return timeouts || waiters;
  result.queue_length = reader.integer({"LLEN", layout.fair_queue});
  std::map<std::string, std::int64_t, std::less<>> deadlines;
  for (const auto& [owner, score] : reader.zset(layout.fair_timeouts)) {
    if (std::optional<std::int64_t> deadline = parse_score(score)) deadlines[owner] = *deadline;
  }
  std::int64_t position = 0;
  for (std::string& owner : reader.strings({"LRANGE", layout.fair_queue, "0", std::to_string(kMaxListed - 1)})) {
    QueuedWaiter waiter{
        .position = ++position, .owner = printable(owner), .deadline_epoch_ms = std::nullopt, .identity = std::nullopt};
    if (auto it = deadlines.find(owner); it != deadlines.end()) waiter.deadline_epoch_ms = it->second;
    if (is_owner_id(owner)) {  // a turnstile waiter's (lua/fair_lock_acquire.lua)
      if (const std::optional<std::string> value =
              reader.side_get(fair_waiter_identity_key(result.name, owner), result)) {
        std::optional<HolderIdentity> identity = parse_holder_identity(*value);
        if (identity && identity->owner == owner) waiter.identity = std::move(identity);
      }
    }
    result.queue.push_back(std::move(waiter));
  }
  return true;
}

void read_fencing_counter(Reader& reader, const KeyLayout& layout, Inspection& result) {
  if (layout.fencing_counter.empty()) return;
  if (std::optional<std::string> counter = reader.side_get(layout.fencing_counter, result)) {
    result.last_fencing_token = parse_integer(*counter);
  }
}

// A permit id as stored: 16 raw bytes (turnstile's and Redisson's).
constexpr std::size_t kPermitIdBytes = 16;

// A crash-safe semaphore's held permits, with their identities; whether it
// has any.
bool read_permits(Reader& reader, Inspection& result) {
  const std::string timeout_key = key_layout(Flavor::semaphore, result.name).permit_timeouts;
  if (reader.type(timeout_key) != "zset") return false;
  result.permits_held = reader.integer({"ZCARD", timeout_key});
  for (const auto& [id, score] : reader.zset(timeout_key)) {
    std::optional<std::int64_t> expiry = parse_score(score);
    if (expiry && *expiry >= kPermitNeverExpiresMs) expiry.reset();
    PermitSeen permit{.id = permit_id_text(id), .expiry_epoch_ms = expiry, .identity = std::nullopt};
    if (id.size() == kPermitIdBytes) {  // stored raw, as turnstile and Redisson store it
      if (const std::optional<std::string> value =
              reader.side_get(permit_identity_key(result.name, permit.id), result)) {
        permit.identity = parse_holder_identity(*value);
      }
    }
    result.permits.push_back(std::move(permit));
  }
  return true;
}

// The flavors a lock hash (not read-write) at the name may be: fair alone
// while its queue keys exist. `told`: only that one is read.
std::vector<Flavor> read_lock(Reader& reader, Inspection& result, std::optional<Flavor> told) {
  const Flavor flavor = told.value_or(Flavor::reentrant);
  const KeyLayout layout = key_layout(flavor, result.name);
  read_lock_hash(reader, layout, result);
  if (result.holder_count > 0) {
    result.remaining_lease = remaining_lease_of(reader, result.name, "hash");
    if (!result.remaining_lease) {  // released meanwhile
      result.holders.clear();
      result.holder_count = 0;
    }
  }
  read_identity(reader, layout, result);
  read_fencing_counter(reader, layout, result);
  if (told && layout.fair_queue.empty()) return {*told};
  const bool queued = read_queue(reader, result);
  if (told) return {*told};
  if (queued) return {Flavor::fair};
  return flavors_of(StatusKind::lock_hash);
}

// The flavors a permit count at the name may be.
std::vector<Flavor> read_permit_count(Reader& reader, Inspection& result, std::int64_t available,
                                      std::optional<Flavor> told) {
  result.permits_available = available;
  if (told && !key_layout(*told, result.name).permit_timeouts.empty()) {
    read_permits(reader, result);
    return {*told};
  }
  if (told) return {*told};
  if (read_permits(reader, result)) return {Flavor::semaphore};
  return flavors_of(StatusKind::permit_count);
}

// What the main key's Redis type and value show, as the StatusKind of the
// flavor it must be; nullopt: no key.
std::optional<StatusKind> kind_at(Reader& reader, const std::string& name, std::string& type,
                                  std::optional<std::string>& value) {
  type = reader.type(name);
  if (type == "none") return std::nullopt;
  if (type == "hash") {
    return reader.integer({"HEXISTS", name, "mode"}) == 1 ? StatusKind::read_write_hash : StatusKind::lock_hash;
  }
  if (type != "string") not_ours(name, "a " + type);
  const std::int64_t length = reader.integer({"STRLEN", name});
  if (length > kMaxOwnStringBytes) {
    not_ours(name, "a string of " + std::to_string(length) + " bytes (a lock token or a permit count is at most " +
                       std::to_string(kMaxOwnStringBytes) + ")");
  }
  value = reader.get(name);
  if (!value) return std::nullopt;  // expired between TYPE and GET
  if (parse_integer(*value)) return StatusKind::permit_count;
  if (!is_lock_token(*value)) not_ours(name, "a plain string (neither a lock token nor a permit count)");
  return StatusKind::token;
}

std::string_view kind_text(StatusKind kind) {
  switch (kind) {
    case StatusKind::lock_hash:
      return "a lock hash";
    case StatusKind::read_write_hash:
      return "a read-write lock";
    case StatusKind::token:
      return "a token lock";
    case StatusKind::permit_count:
      return "a semaphore";
  }
  return "something else";
}

}  // namespace

Inspection inspect(Backend& backend, const std::string& key, const InspectOptions& options) {
  Reader reader(backend);
  Inspection result;
  result.name = key;
  const std::optional<Flavor> told = options.flavor;
  std::string type;
  std::optional<std::string> value;
  const std::optional<StatusKind> found = kind_at(reader, key, type, value);
  const StatusKind kind = found.value_or(told ? flavor_traits(*told).status_kind : StatusKind::lock_hash);
  if (found && told && flavor_traits(*told).status_kind != kind) not_told(key, kind_text(kind), *told);
  switch (kind) {
    case StatusKind::lock_hash:
      if (found || told) {
        result.could_be = read_lock(reader, result, told);
      } else if (read_queue(reader, result) && result.queue_length > 0) {
        result.could_be = {Flavor::fair};  // free, its queue left
      }
      break;
    case StatusKind::read_write_hash: {
      const KeyLayout layout = key_layout(Flavor::read_write, key);
      read_lock_hash(reader, layout, result);
      if (result.holder_count > 0) result.remaining_lease = remaining_lease_of(reader, key, type);
      read_identity(reader, layout, result);
      result.could_be = {Flavor::read_write};
      break;
    }
    case StatusKind::token:
      result.could_be = {Flavor::token};
      if (!value) break;
      result.remaining_lease = remaining_lease_of(reader, key, type);
      if (!result.remaining_lease) break;  // released meanwhile
      result.holder_count = 1;
      result.holders.push_back(LockHolder{.owner = std::string(token_of(*value)), .hold_count = 1});
      read_identity(reader, key_layout(Flavor::token, key), result);
      break;
    case StatusKind::permit_count:
      if (value) {
        result.could_be = read_permit_count(reader, result, *parse_integer(*value), told);
      } else {
        result.could_be = {*told};
      }
      break;
  }
  if (told) result.could_be = {*told};
  if (!result.could_be.empty()) result.flavor = result.could_be.front();
  return result;
}

LockListing list_locks(Backend& backend, const ListOptions& options) {
  if (options.max_names < 1 || options.max_names > kMaxListedNames) {
    throw InvalidArgumentError("list_locks: max_names must be within [1, " + std::to_string(kMaxListedNames) +
                               "], got " + std::to_string(options.max_names));
  }
  // The scan reads every matching key (up to kMaxScanKeys), so that on a
  // shared Redis the locks are not cut off by other keys: max_names
  // counts locks listed, not keys scanned.
  LockListing listing;
  std::set<std::string> names;
  const ScanResult direct = backend.scan_each_master(
      {.match = options.pattern, .count_per_call = options.count_per_call, .max_keys = kMaxScanKeys});
  for (const std::string& key : direct.keys) {
    if (!side_key_owner(key)) names.insert(key);
  }
  // A fair queue outlives its lock between holders: its name from the queue.
  const ScanResult queues = backend.scan_each_master({.match = key_layout(Flavor::fair, options.pattern).fair_queue,
                                                      .count_per_call = options.count_per_call,
                                                      .max_keys = kMaxScanKeys});
  for (const std::string& key : queues.keys) {
    if (std::optional<std::string> name = side_key_owner(key)) names.insert(std::move(*name));
  }
  listing.complete = direct.complete && queues.complete;
  for (const std::string& name : names) {
    try {
      Inspection seen = inspect(backend, name);
      if (!seen.flavor && seen.queue_length == 0) continue;
      if (listing.locks.size() == options.max_names) {
        listing.complete = false;  // one lock more than it lists
        break;
      }
      listing.locks.push_back(std::move(seen));
    } catch (const WrongTypeError&) {
      // Someone's data at a matching name: not ours to list.
    }
  }
  TURNSTILE_CHECK(listing.locks.size() <= options.max_names);
  return listing;
}

bool force_unlock(Client& client, std::string_view name, const InspectOptions& options) {
  const std::string key = client.options().key_prefix + std::string(name);
  const Inspection inspection = inspect(client.backend(), key, options);
  if (!inspection.flavor) return false;
  const FlavorTraits& traits = flavor_traits(*inspection.flavor);
  for (const LockHolder& holder : inspection.holders) {
    if (traits.key_type == KeyType::hash && !is_client_owned(holder.owner)) {
      throw WrongTypeError("WRONGTYPE " + in_quotes(key) + " holds a hash of counts whose field " +
                           in_quotes(holder.owner) +
                           " is no owner \"<uuid>:...\": maybe someone's data, not a turnstile lock to delete");
    }
  }
  switch (traits.status_kind) {
    case StatusKind::lock_hash:
      // A composite lock's node is a reentrant lock; a fair lock also
      // wakes its queue's head.
      if (queues_waiters(*inspection.flavor)) return client.fair_lock(name).force_unlock();
      return client.lock(name).force_unlock();
    case StatusKind::read_write_hash:
      return client.read_write_lock(name).force_unlock();
    case StatusKind::token:
      return client.token_lock(name).force_unlock();
    case StatusKind::permit_count:
      if (!inspection.permits_available) return false;  // nothing there
      break;
  }
  throw WrongTypeError("WRONGTYPE " + in_quotes(key) + " is a " + std::string(traits.name) +
                       ": its permits have no single holder to unlock");
}

}  // namespace turnstile
