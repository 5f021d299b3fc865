// The holds a semaphore handed out through Holdable (hold_book.h).

#include "locks/hold_book.h"

#include <cassert>
#include <utility>

#include "turnstile/errors.h"

namespace turnstile::detail {

void HoldBook::push(const std::string& owner, Hold hold) {
  std::scoped_lock guard(mutex_);
  holds_[owner].push_back(std::move(hold));
}

Hold HoldBook::pop(const std::string& owner, std::string_view name) {
  std::scoped_lock guard(mutex_);
  const auto found = holds_.find(owner);
  if (found == holds_.end()) {
    throw InvalidArgumentError("release_hold() of " + in_quotes(name) + " by a task that holds none of it");
  }
  assert(!found->second.empty());
  Hold hold = std::move(found->second.back());
  found->second.pop_back();
  if (found->second.empty()) holds_.erase(found);
  return hold;
}

void HoldBook::require_total(std::int64_t total) {
  std::scoped_lock guard(mutex_);
  total_ = total;
  settled_ = false;
}

std::optional<std::int64_t> HoldBook::unsettled_total() const {
  std::scoped_lock guard(mutex_);
  if (settled_) return std::nullopt;
  return total_;
}

void HoldBook::settled() {
  std::scoped_lock guard(mutex_);
  settled_ = true;
}

}  // namespace turnstile::detail
