#include "turnstile/backend.h"

#include <utility>

namespace turnstile {

Subscription::Subscription(Subscription&& other) noexcept
    : backend_(std::exchange(other.backend_, nullptr)), id_(std::exchange(other.id_, 0)) {}

Subscription& Subscription::operator=(Subscription&& other) noexcept {
  if (this != &other) {
    reset();
    backend_ = std::exchange(other.backend_, nullptr);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

void Subscription::reset() noexcept {
  if (backend_ != nullptr) {
    std::exchange(backend_, nullptr)->unsubscribe(id_);
    id_ = 0;
  }
}

}  // namespace turnstile
