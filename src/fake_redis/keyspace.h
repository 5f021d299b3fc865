// fake_redis/keyspace.h
//
// The fake Redis's one database: keys mapped to typed values (string, hash,
// list, sorted set), each with an optional absolute expiry deadline in
// milliseconds on the VirtualClock.
//
// Expiry follows Redis exactly: a key whose deadline is D is still there at
// D ms and gone from D+1 ms on (Redis's keyIsExpired is `now > when`), for
// every command, because every lookup expires lazily first. Time is read in
// whole milliseconds, as Redis's mstime().
//
// Nothing is bounded: keys and values are arbitrary byte strings of any size.

#ifndef TURNSTILE_FAKE_REDIS_KEYSPACE_H_
#define TURNSTILE_FAKE_REDIS_KEYSPACE_H_

#include <boost/container/deque.hpp>
#include <boost/container/flat_map.hpp>
#include <boost/container/flat_set.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "core/check.h"
#include "fake_redis/virtual_clock.h"

namespace turnstile::sim {

// Redis keeps small hashes and sorted sets in a compact encoding (listpack)
// and converts them past these sizes (hash-max-listpack-entries/-value,
// zset-max-listpack-entries/-value). The encoding shows through in replies:
// listpack hashes list fields in insertion order, listpack sorted sets store
// -0 as 0.
inline constexpr std::size_t kListpackMaxEntries = 128;
inline constexpr std::size_t kListpackMaxValueBytes = 64;

// A hash that lists its fields in insertion order, like Redis's listpack
// hashes (the ones every realistic test uses), so HGETALL and HKEYS match a
// real server's order. Updating a field keeps its place; a deleted field's
// place is gone.
//
// The index views into the entries, so a copy builds its own (a member-wise
// copy would index the original's entries: the AOF's and replication's key
// snapshots copy hashes); a move keeps the nodes, and with them the index.
class Hash {
 public:
  using Entry = std::pair<std::string, std::string>;

  Hash() = default;
  Hash(const Hash& other);
  Hash& operator=(const Hash& other);
  Hash(Hash&& other) noexcept = default;
  Hash& operator=(Hash&& other) noexcept = default;
  ~Hash() = default;

  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::string* find(std::string_view field) const;
  // Returns true if the field is new.
  bool set(std::string_view field, std::string value);
  bool erase(std::string_view field);
  const std::list<Entry>& entries() const { return entries_; }

 private:
  std::list<Entry> entries_;
  // Keys view the field strings inside entries_, which std::list never moves.
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index_;
};

// Boost 1.74 (Debian 12) has no devector yet; deque gives the same O(1) ends.
using List = boost::container::deque<std::string>;

// A sorted set ordered by (score, member), with member -> score lookup.
class SortedSet {
 public:
  using Element = std::pair<double, std::string>;  // (score, member)
  using Ordered = boost::container::flat_set<Element>;

  std::size_t size() const { return by_score_.size(); }
  bool empty() const { return by_score_.empty(); }
  std::optional<double> score(std::string_view member) const;
  // Adds or moves `member`; returns true if it is new. A -0 score is
  // stored as 0 while the set is small (7.0's listpack) unless
  // `compact_keeps_negative_zero` (6.2's ziplist).
  bool set(std::string_view member, double score, bool compact_keeps_negative_zero = false);
  bool erase(std::string_view member);
  // 0-based position in score order.
  std::size_t rank(std::string_view member) const;
  const Ordered& by_score() const { return by_score_; }

 private:
  // The by_score_ entry of a member that has `score` (it must be there).
  Ordered::const_iterator position_of(double score, std::string_view member) const;

  // Redis converts a listpack sorted set to a skiplist once it grows past the
  // listpack limits and never converts back.
  bool skiplist_encoded_ = false;
  Ordered by_score_;
  boost::container::flat_map<std::string, double, std::less<>> by_member_;
};

enum class ValueType { string, hash, list, sorted_set };

// TYPE's name for it: "string", "hash", "list", "zset".
std::string_view type_name(ValueType type);

using Value = std::variant<std::string, Hash, List, SortedSet>;

template <class T>
constexpr ValueType value_type_of();
template <>
constexpr ValueType value_type_of<std::string>() {
  return ValueType::string;
}
template <>
constexpr ValueType value_type_of<Hash>() {
  return ValueType::hash;
}
template <>
constexpr ValueType value_type_of<List>() {
  return ValueType::list;
}
template <>
constexpr ValueType value_type_of<SortedSet>() {
  return ValueType::sorted_set;
}

// A typed lookup: `value` is null when the key is absent (or expired);
// `wrong_type` says the key holds another type, and then value is null too.
template <class T>
struct Typed {
  T* value = nullptr;
  bool wrong_type = false;
};

class Keyspace {
 public:
  explicit Keyspace(const VirtualClock& clock) : clock_(clock) {}
  explicit Keyspace(const ServerClock& clock) : clock_(clock) {}
  // The server's clock changed its skew (Server::set_clock_skew).
  void set_clock(const ServerClock& clock) { clock_ = clock; }

  // The clock in whole milliseconds, as Redis's mstime().
  std::int64_t now_ms() const;

  // nullptr if absent or expired (an expired key is removed on the way).
  Value* find(std::string_view key);
  std::optional<ValueType> type(std::string_view key);

  template <class T>
  Typed<T> find_as(std::string_view key) {
    Value* value = find(key);
    if (value == nullptr) return {};
    if (T* typed = std::get_if<T>(value)) {
      if constexpr (!std::is_same_v<T, std::string>) {
        TURNSTILE_CHECK_MSG(!typed->empty(), "no command leaves an empty hash, list or sorted set behind");
      }
      return {typed, false};
    }
    return {nullptr, true};
  }

  // Like find_as, but creates an empty T (no expiry) if the key is absent.
  // The caller must leave something in it (or call erase_if_empty): Redis
  // never keeps empty aggregates.
  template <class T>
  Typed<T> find_or_create(std::string_view key) {
    Typed<T> found = find_as<T>(key);
    if (found.value != nullptr || found.wrong_type) return found;
    Entry& entry = create(key);
    entry.value = T{};
    return {&std::get<T>(entry.value), false};
  }

  // Stores `value` under `key`, replacing any value of any type and clearing
  // its expiry (SET's semantics).
  void set(std::string_view key, Value value);
  // Replaces the value but keeps the key's deadline (SET KEEPTTL, INCR).
  void replace_keep_deadline(std::string_view key, Value value);

  bool erase(std::string_view key);
  // Removes the key if it holds an empty hash, list or sorted set.
  void erase_if_empty(std::string_view key);

  // The key's absolute deadline in the server's ms (ServerClock::now_ms: the
  // world's ms unless the server's clock drifts), if it has one (and exists).
  std::optional<std::int64_t> deadline_ms(std::string_view key);
  // Sets or clears the deadline of an existing key; returns false if absent.
  bool set_deadline_ms(std::string_view key, std::optional<std::int64_t> deadline_ms);

  // Live keys, in no particular order.
  std::vector<std::string> keys();
  std::size_t size();
  void clear() {
    recent_.forget();
    entries_.clear();
  }

  // Drops every expired key now (lookups expire lazily anyway; this frees
  // memory). Returns how many were dropped.
  std::size_t erase_expired();

 private:
  struct Entry {
    Value value;
    std::optional<std::int64_t> deadline_ms;
  };
  struct TransparentHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key); }
  };
  using Map = std::unordered_map<std::string, Entry, TransparentHash, std::equal_to<>>;

  // The entries of the last keys looked up: a script reads the same few
  // keys again and again, and finding one here compares its bytes instead
  // of hashing them. Forgotten at every insertion (a rehash invalidates
  // iterators) and every erasure; a copy starts empty (its iterators would
  // be another map's).
  class RecentKeys {
   public:
    static constexpr std::size_t kSlots = 8;
    RecentKeys() = default;
    RecentKeys(const RecentKeys&) {}
    RecentKeys& operator=(const RecentKeys&) {
      forget();
      return *this;
    }
    ~RecentKeys() = default;

    // The remembered entry of `key`, if any (`end` otherwise).
    Map::iterator find(std::string_view key, Map::iterator end) const {
      for (std::size_t i = 0; i < used_; ++i) {
        if (std::string_view(slots_[i]->first) == key) return slots_[i];
      }
      return end;
    }
    void remember(Map::iterator entry) {
      slots_[next_] = entry;
      next_ = (next_ + 1) % kSlots;
      used_ = std::max(used_, next_ == 0 ? kSlots : next_);
    }
    void forget() { used_ = next_ = 0; }

   private:
    std::array<Map::iterator, kSlots> slots_{};
    std::size_t used_ = 0;
    std::size_t next_ = 0;
  };

  bool expired(const Entry& entry) const;
  // A new entry for an absent `key` (no value, no deadline).
  Entry& create(std::string_view key);
  // The entry of `key`, live or expired (RecentKeys first, then the map).
  Map::iterator lookup(std::string_view key);
  // The live entry for `key`, removing it first if it has expired.
  Map::iterator find_live(std::string_view key);
  // Erases the entry at `entry` (RecentKeys forgets every entry).
  void erase_entry(Map::iterator entry);

  ServerClock clock_;
  Map entries_;
  RecentKeys recent_;
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_KEYSPACE_H_
