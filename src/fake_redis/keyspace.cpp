#include "fake_redis/keyspace.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/check.h"

namespace turnstile::sim {

// ---- Hash --------------------------------------------------------------------

Hash::Hash(const Hash& other) {
  for (const auto& [field, value] : other.entries_) set(field, value);
}

Hash& Hash::operator=(const Hash& other) {
  if (this != &other) *this = Hash(other);
  return *this;
}

const std::string* Hash::find(std::string_view field) const {
  auto it = index_.find(field);
  return it == index_.end() ? nullptr : &it->second->second;
}

bool Hash::set(std::string_view field, std::string value) {
  if (auto it = index_.find(field); it != index_.end()) {
    it->second->second = std::move(value);
    return false;
  }
  entries_.emplace_back(std::string(field), std::move(value));
  auto last = std::prev(entries_.end());
  const bool inserted = index_.emplace(std::string_view(last->first), last).second;
  TURNSTILE_CHECK(inserted && index_.size() == entries_.size());
  return true;
}

bool Hash::erase(std::string_view field) {
  auto it = index_.find(field);
  if (it == index_.end()) return false;
  auto entry = it->second;
  index_.erase(it);  // before the string it views goes away
  entries_.erase(entry);
  TURNSTILE_CHECK(index_.size() == entries_.size());
  return true;
}

// ---- SortedSet -----------------------------------------------------------------

std::optional<double> SortedSet::score(std::string_view member) const {
  auto it = by_member_.find(member);
  if (it == by_member_.end()) return std::nullopt;
  return it->second;
}

SortedSet::Ordered::const_iterator SortedSet::position_of(double score, std::string_view member) const {
  // By (score, member) without building an Element (no string copy).
  const auto position =
      std::lower_bound(by_score_.begin(), by_score_.end(), score, [member](const Element& element, double wanted) {
        return element.first < wanted || (element.first == wanted && std::string_view(element.second) < member);
      });
  TURNSTILE_CHECK_MSG(position != by_score_.end() && position->first == score && position->second == member,
                      "every member is in both indexes once");
  return position;
}

bool SortedSet::set(std::string_view member, double score, bool compact_keeps_negative_zero) {
  TURNSTILE_CHECK_MSG(!std::isnan(score), "scores are parsed, and NaN refused, before they are stored");
  if (by_score_.size() + 1 > kListpackMaxEntries || member.size() > kListpackMaxValueBytes) {
    skiplist_encoded_ = true;
  }
  // A listpack stores 0 for -0; a skiplist (and 6.2's ziplist) keeps the sign.
  if (score == 0 && !skiplist_encoded_ && !compact_keeps_negative_zero) score = 0.0;
  auto it = by_member_.find(member);
  if (it != by_member_.end()) {
    by_score_.erase(position_of(it->second, it->first));
    it->second = score;
    const bool placed = by_score_.emplace(score, it->first).second;
    TURNSTILE_CHECK_MSG(placed, "every member is in both indexes once");
    return false;
  }
  const bool added = by_member_.emplace(std::string(member), score).second;
  const bool placed = by_score_.emplace(score, std::string(member)).second;
  TURNSTILE_CHECK(added && placed && by_score_.size() == by_member_.size());
  return true;
}

bool SortedSet::erase(std::string_view member) {
  auto it = by_member_.find(member);
  if (it == by_member_.end()) return false;
  by_score_.erase(position_of(it->second, it->first));
  by_member_.erase(it);
  TURNSTILE_CHECK(by_score_.size() == by_member_.size());
  return true;
}

std::size_t SortedSet::rank(std::string_view member) const {
  auto it = by_member_.find(member);
  TURNSTILE_CHECK_MSG(it != by_member_.end(), "rank() of a member the set holds");
  const auto position = position_of(it->second, it->first);
  return static_cast<std::size_t>(position - by_score_.begin());
}

// ---- Keyspace ------------------------------------------------------------------

std::string_view type_name(ValueType type) {
  switch (type) {
    case ValueType::string:
      return "string";
    case ValueType::hash:
      return "hash";
    case ValueType::list:
      return "list";
    case ValueType::sorted_set:
      return "zset";
  }
  return "none";
}

std::int64_t Keyspace::now_ms() const { return clock_.now_ms(); }

bool Keyspace::expired(const Entry& entry) const { return entry.deadline_ms && now_ms() > *entry.deadline_ms; }

Keyspace::Map::iterator Keyspace::lookup(std::string_view key) {
  const auto recent = recent_.find(key, entries_.end());
  if (recent != entries_.end()) return recent;
  const auto found = entries_.find(key);
  if (found != entries_.end()) recent_.remember(found);
  return found;
}

void Keyspace::erase_entry(Map::iterator entry) {
  recent_.forget();
  entries_.erase(entry);
}

Keyspace::Map::iterator Keyspace::find_live(std::string_view key) {
  auto it = lookup(key);
  if (it != entries_.end() && expired(it->second)) {
    erase_entry(it);
    return entries_.end();
  }
  return it;
}

Value* Keyspace::find(std::string_view key) {
  auto it = find_live(key);
  return it == entries_.end() ? nullptr : &it->second.value;
}

std::optional<ValueType> Keyspace::type(std::string_view key) {
  Value* value = find(key);
  if (value == nullptr) return std::nullopt;
  TURNSTILE_CHECK(!value->valueless_by_exception() &&
                  value->index() <= static_cast<std::size_t>(ValueType::sorted_set));
  return static_cast<ValueType>(value->index());
}

void Keyspace::set(std::string_view key, Value value) {
  auto it = lookup(key);
  if (it == entries_.end()) {
    recent_.forget();
    entries_.emplace(std::string(key), Entry{std::move(value), std::nullopt});
  } else {
    it->second = Entry{std::move(value), std::nullopt};
  }
}

void Keyspace::replace_keep_deadline(std::string_view key, Value value) {
  auto it = find_live(key);
  if (it == entries_.end()) {
    set(key, std::move(value));
  } else {
    it->second.value = std::move(value);
  }
}

bool Keyspace::erase(std::string_view key) {
  auto it = find_live(key);
  if (it == entries_.end()) return false;
  erase_entry(it);
  return true;
}

void Keyspace::erase_if_empty(std::string_view key) {
  auto it = lookup(key);
  if (it == entries_.end()) return;
  bool empty = std::visit(
      [](const auto& value) {
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::string>) {
          return false;
        } else {
          return value.empty();
        }
      },
      it->second.value);
  if (empty) erase_entry(it);
}

std::optional<std::int64_t> Keyspace::deadline_ms(std::string_view key) {
  auto it = find_live(key);
  if (it == entries_.end()) return std::nullopt;
  TURNSTILE_CHECK_MSG(!expired(it->second), "lookups expire first");
  return it->second.deadline_ms;
}

bool Keyspace::set_deadline_ms(std::string_view key, std::optional<std::int64_t> deadline_ms) {
  auto it = find_live(key);
  if (it == entries_.end()) return false;
  it->second.deadline_ms = deadline_ms;
  return true;
}

std::vector<std::string> Keyspace::keys() {
  erase_expired();
  std::vector<std::string> names;
  names.reserve(entries_.size());
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

std::size_t Keyspace::size() {
  erase_expired();
  return entries_.size();
}

Keyspace::Entry& Keyspace::create(std::string_view key) {
  recent_.forget();
  const auto [it, inserted] = entries_.try_emplace(std::string(key));
  TURNSTILE_CHECK_MSG(inserted, "created only when absent (expired keys are gone on lookup)");
  TURNSTILE_CHECK(!it->second.deadline_ms);
  return it->second;
}

std::size_t Keyspace::erase_expired() {
  recent_.forget();
  return std::erase_if(entries_, [this](const auto& item) { return expired(item.second); });
}

}  // namespace turnstile::sim
