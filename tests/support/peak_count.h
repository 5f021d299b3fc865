// support/peak_count.h
//
// How many threads are inside a section at once, and the most there ever
// were, counted so that no update is lost. `most = max(most.load(),
// ++inside)` is a load and a separate store: two threads entering together
// can store 2 and then 1, so a check of the peak could miss the very
// overlap it exists to catch. Here the peak is raised by compare-and-
// exchange, and it only ever grows.

#ifndef TURNSTILE_TESTS_SUPPORT_PEAK_COUNT_H_
#define TURNSTILE_TESTS_SUPPORT_PEAK_COUNT_H_

#include <atomic>

namespace turnstile::testing {

class PeakCount {
 public:
  // One more inside; returns how many are inside now.
  int enter() {
    const int now = inside_.fetch_add(1) + 1;
    int seen = most_.load();
    while (seen < now && !most_.compare_exchange_weak(seen, now)) {
    }
    return now;
  }
  void leave() { inside_.fetch_sub(1); }

  int inside() const { return inside_.load(); }
  // The most that were ever inside at once.
  int most() const { return most_.load(); }

 private:
  std::atomic<int> inside_{0};
  std::atomic<int> most_{0};
};

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_SUPPORT_PEAK_COUNT_H_
