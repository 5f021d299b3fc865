#include "sim/drifting_runtime.h"

#include <utility>

#include "core/check.h"

namespace turnstile::sim {
namespace {

// Products of nanoseconds and parts per million overflow 64 bits.
__extension__ using Wide = __int128;
constexpr Wide kMillion = 1'000'000;

Instant scale_to_world(Instant origin, std::int64_t drift_ppm, Instant local) {
  if (local >= kNoDeadline) return kNoDeadline;
  const Wide elapsed = (local - origin).count();
  const Wide rate = kMillion + drift_ppm;
  Wide scaled = elapsed * kMillion / rate;
  if (scaled * rate < elapsed * kMillion) ++scaled;  // round up
  return origin + Duration(static_cast<Duration::rep>(scaled));
}

// Keeps the scale by value: it may outlive the runtime that made it.
class DriftingEvent final : public Event {
 public:
  DriftingEvent(Instant origin, std::int64_t drift_ppm, std::unique_ptr<Event> inner)
      : origin_(origin), drift_ppm_(drift_ppm), inner_(std::move(inner)) {}
  void notify() override { inner_->notify(); }
  bool wait_until(Instant deadline) override {
    return inner_->wait_until(scale_to_world(origin_, drift_ppm_, deadline));
  }

 private:
  Instant origin_;
  std::int64_t drift_ppm_;
  std::unique_ptr<Event> inner_;
};

}  // namespace

DriftingRuntime::DriftingRuntime(std::shared_ptr<Runtime> inner, std::int64_t drift_ppm)
    : inner_(std::move(inner)), drift_ppm_(drift_ppm) {
  TURNSTILE_CHECK(inner_ != nullptr);
  TURNSTILE_CHECK(drift_ppm >= -kMaxDriftPpm && drift_ppm <= kMaxDriftPpm);
  origin_ = inner_->now();
}

Instant DriftingRuntime::to_local(Instant world) const {
  const Wide elapsed = (world - origin_).count();
  return origin_ + Duration(static_cast<Duration::rep>(elapsed * (kMillion + drift_ppm_) / kMillion));
}

Instant DriftingRuntime::to_world(Instant local) const { return scale_to_world(origin_, drift_ppm_, local); }

Instant DriftingRuntime::now() { return to_local(inner_->now()); }
std::int64_t DriftingRuntime::wall_clock_ms() { return inner_->wall_clock_ms(); }
void DriftingRuntime::sleep_until(Instant deadline) { inner_->sleep_until(to_world(deadline)); }

std::unique_ptr<Event> DriftingRuntime::make_event() {
  return std::make_unique<DriftingEvent>(origin_, drift_ppm_, inner_->make_event());
}

Runtime::TimerId DriftingRuntime::schedule_at(Instant when, std::function<void()> callback) {
  return inner_->schedule_at(to_world(when), std::move(callback));
}

bool DriftingRuntime::cancel(TimerId id) { return inner_->cancel(id); }
void DriftingRuntime::spawn(std::function<void()> task) { inner_->spawn(std::move(task)); }
std::uint64_t DriftingRuntime::current_task_id() { return inner_->current_task_id(); }
std::uint64_t DriftingRuntime::random_u64() { return inner_->random_u64(); }
bool DriftingRuntime::buggify(std::string_view point) { return inner_->buggify(point); }

}  // namespace turnstile::sim
