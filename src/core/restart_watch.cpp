#include <utility>

#include "turnstile/backend.h"

namespace turnstile {

RestartWatch::RestartWatch(RestartWatch&& other) noexcept : remove_(std::exchange(other.remove_, nullptr)) {}

RestartWatch& RestartWatch::operator=(RestartWatch&& other) noexcept {
  if (this != &other) {
    reset();
    remove_ = std::exchange(other.remove_, nullptr);
  }
  return *this;
}

void RestartWatch::reset() noexcept {
  if (remove_ != nullptr) std::exchange(remove_, nullptr)();
}

}  // namespace turnstile
