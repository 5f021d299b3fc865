#include "turnstile/runtime.h"

namespace turnstile {

Instant Runtime::deadline_after(Duration duration) {
  const Instant start = now();
  if (duration <= Duration::zero()) return start;
  if (duration >= kNoDeadline - start) return kNoDeadline;
  return start + duration;
}

}  // namespace turnstile
