// locks/hold_book.h
//
// What a semaphore handed out through Holdable::try_hold() (flavor.h): the
// holds of each owner task, latest last, so that release_hold() gives back
// the calling task's latest; and the total permits the holdable makes sure
// of before its first hold (HoldableOptions::permits). Locks need no book:
// the server and the Lock's own holdings know their owner.
//
// Thread-safe. The total is settled outside the book's mutex (a script
// call): two tasks may both settle it, which is harmless (set-if-absent).

#ifndef TURNSTILE_LOCKS_HOLD_BOOK_H_
#define TURNSTILE_LOCKS_HOLD_BOOK_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/flavor.h"

namespace turnstile::detail {

class HoldBook {
 public:
  void push(const std::string& owner, Hold hold);
  // `owner`'s latest hold, taken out of the book; InvalidArgumentError
  // naming `name` if it has none.
  Hold pop(const std::string& owner, std::string_view name);

  // The total to make sure of before the next hold, until settled().
  void require_total(std::int64_t total);
  std::optional<std::int64_t> unsettled_total() const;
  void settled();

 private:
  mutable std::mutex mutex_;  // guards everything below; never held across a call
  std::map<std::string, std::vector<Hold>, std::less<>> holds_;
  std::optional<std::int64_t> total_;
  bool settled_ = false;
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_HOLD_BOOK_H_
