#include "fake_redis/keyspace.h"

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

bool SortedSet::set(std::string_view member, double score) {
  TURNSTILE_CHECK_MSG(!std::isnan(score), "scores are parsed, and NaN refused, before they are stored");
  if (by_score_.size() + 1 > kListpackMaxEntries || member.size() > kListpackMaxValueBytes) {
    skiplist_encoded_ = true;
  }
  // A listpack stores 0 for -0; a skiplist keeps the sign.
  if (score == 0 && !skiplist_encoded_) score = 0.0;
  auto it = by_member_.find(member);
  if (it != by_member_.end()) {
    const std::size_t moved = by_score_.erase(Element(it->second, it->first));
    it->second = score;
    const bool placed = by_score_.emplace(score, it->first).second;
    TURNSTILE_CHECK_MSG(moved == 1 && placed, "every member is in both indexes once");
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
  const std::size_t erased = by_score_.erase(Element(it->second, it->first));
  by_member_.erase(it);
  TURNSTILE_CHECK(erased == 1 && by_score_.size() == by_member_.size());
  return true;
}

std::size_t SortedSet::rank(std::string_view member) const {
  auto it = by_member_.find(member);
  TURNSTILE_CHECK_MSG(it != by_member_.end(), "rank() of a member the set holds");
  auto position = by_score_.find(Element(it->second, it->first));
  TURNSTILE_CHECK(position != by_score_.end());
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

Keyspace::Map::iterator Keyspace::find_live(std::string_view key) {
  auto it = entries_.find(key);
  if (it != entries_.end() && expired(it->second)) {
    entries_.erase(it);
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
  auto it = entries_.find(key);
  if (it == entries_.end()) {
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
  entries_.erase(it);
  return true;
}

void Keyspace::erase_if_empty(std::string_view key) {
  auto it = entries_.find(key);
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
  if (empty) entries_.erase(it);
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
  const auto [it, inserted] = entries_.try_emplace(std::string(key));
  TURNSTILE_CHECK_MSG(inserted, "created only when absent (expired keys are gone on lookup)");
  TURNSTILE_CHECK(!it->second.deadline_ms);
  return it->second;
}

std::size_t Keyspace::erase_expired() {
  return std::erase_if(entries_, [this](const auto& item) { return expired(item.second); });
}

}  // namespace turnstile::sim
