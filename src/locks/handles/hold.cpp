// LockHold (turnstile/hold.h): a handle on a HoldRecord.

#include <utility>

#include "core/check.h"
#include "locks/engine/hold_record.h"
#include "locks/engine/task_future.h"
#include "turnstile/errors.h"
#include "turnstile/flavor.h"

namespace turnstile {
namespace detail {

void HoldRecord::release_quietly() noexcept {
  if (released_.exchange(true, std::memory_order_acq_rel)) return;
  try {
    release(/*strict=*/false);
  } catch (...) {
    report_background_error(std::current_exception());
  }
}

void HoldRecord::release_strictly() {
  if (released_.exchange(true, std::memory_order_acq_rel)) return;
  release(/*strict=*/true);
}

std::stop_token stopped_token() {
  std::stop_source stopped;
  stopped.request_stop();
  return stopped.get_token();
}

LockHold wrap_hold(std::shared_ptr<HoldRecord> record) {
  TURNSTILE_CHECK(record != nullptr);
  return LockHold(std::move(record));
}

}  // namespace detail

LockHold Holdable::acquire_hold(std::optional<Duration> lease) {
  LockHold hold = try_acquire_hold({.wait = kWaitForever, .lease = lease});
  TURNSTILE_CHECK_MSG(hold.owns_hold(), "an acquisition with neither a deadline nor a stop came back empty");
  return hold;
}

LockHold::LockHold() noexcept = default;
LockHold::LockHold(std::shared_ptr<detail::HoldRecord> record) noexcept : record_(std::move(record)) {}
LockHold::LockHold(LockHold&& other) noexcept = default;

LockHold& LockHold::operator=(LockHold&& other) noexcept {
  if (this != &other) {
    release();
    record_ = std::move(other.record_);
  }
  return *this;
}

LockHold::~LockHold() { release(); }

bool LockHold::owns_hold() const noexcept { return record_ != nullptr; }

const detail::HoldRecord& LockHold::record() const {
  TURNSTILE_CHECK_MSG(record_ != nullptr, "a LockHold that holds nothing was asked about its hold");
  return *record_;
}

namespace {

// What an empty hold (default-made, moved from, released) answers.
const std::string kNoString;
const std::vector<std::string> kNoPermits;

std::stop_token stopped_token() {
  std::stop_source stopped;
  stopped.request_stop();
  return stopped.get_token();
}

}  // namespace

Flavor LockHold::flavor() const { return record().flavor; }
const std::string& LockHold::name() const { return record_ ? record_->name : kNoString; }
const std::string& LockHold::owner() const { return record_ ? record_->owner : kNoString; }
std::optional<std::int64_t> LockHold::fencing_token() const { return record_ ? record_->fencing_token : std::nullopt; }
const std::vector<std::string>& LockHold::permit_ids() const { return record_ ? record_->permit_ids : kNoPermits; }
bool LockHold::held() const { return record_ && record_->held(); }
std::stop_token LockHold::loss_token() const { return record_ ? record_->loss_token() : stopped_token(); }

void LockHold::extend(Duration lease) {
  if (record_ == nullptr) throw NotOwnerError("attempt to extend a LockHold that holds nothing");
  record_->extend(lease);
}

void LockHold::release() noexcept {
  if (std::shared_ptr<detail::HoldRecord> record = std::exchange(record_, nullptr)) record->release_quietly();
}

Future<void> LockHold::release_async() {
  TURNSTILE_CHECK_MSG(record_ != nullptr, "a LockHold that holds nothing was asked to release asynchronously");
  std::shared_ptr<detail::HoldRecord> record = std::exchange(record_, nullptr);
  Runtime& runtime = record->runtime();
  return detail::post_future<void>(runtime, [record = std::move(record)] { record->release_quietly(); });
}

void LockHold::release_or_throw() {
  if (std::shared_ptr<detail::HoldRecord> record = std::exchange(record_, nullptr)) record->release_strictly();
}

}  // namespace turnstile
