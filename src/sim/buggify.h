// sim/buggify.h
//
// The registry of a world's BUGGIFY points (turnstile/sim/buggify.h):
// per point, whether it is enabled in this run and its odds of firing,
// each drawn from the world's seed on a stream of its own, so that one
// point's traffic never shifts another's draws. Asked by SimRuntime
// (library points), FakeBackend and the fake Server (through its fault
// hook). Not thread-safe: the world's scheduler thread only.

#ifndef TURNSTILE_SIM_BUGGIFY_INTERNAL_H_
#define TURNSTILE_SIM_BUGGIFY_INTERNAL_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/random.h"
#include "turnstile/sim/buggify.h"

namespace turnstile::sim {

class Buggify {
 public:
  // `on` false: every point is disabled (asked points are still counted).
  Buggify(std::uint64_t seed, bool on);

  // Whether `point` fires now. A name not in buggify_point_names() is a
  // bug (checked).
  bool fires(std::string_view point);
  // A draw in [0, bound) from the point's stream, for how much it does.
  std::uint64_t below(std::string_view point, std::uint64_t bound);

  // `point` never fires in this run (a flavor that cannot take its fault).
  void disable(std::string_view point) { counts_[index_of(point)].enabled = false; }
  // `point` fires every time it is reached (a test of the point itself).
  void force(std::string_view point);

  const std::vector<BuggifyCount>& counts() const { return counts_; }

 private:
  std::size_t index_of(std::string_view point) const;

  std::vector<BuggifyCount> counts_;
  std::vector<std::uint64_t> odds_;  // of 2^53
  std::vector<Random> randoms_;
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_SIM_BUGGIFY_INTERNAL_H_
