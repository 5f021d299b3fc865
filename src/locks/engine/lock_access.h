// locks/engine/lock_access.h
//
// The one friend of Lock (turnstile/lock.h): it makes the Lock around a
// flavor's engine that the flavor's handle is made from (Client's
// factories: ReentrantLock(LockAccess::make(engine))), and hands the
// flavors' own code and the composite locks (multi_lock.cpp) a handle's
// engine. A new flavor's handle needs no line in Lock.

#ifndef TURNSTILE_LOCKS_ENGINE_LOCK_ACCESS_H_
#define TURNSTILE_LOCKS_ENGINE_LOCK_ACCESS_H_

#include <memory>
#include <utility>

#include "turnstile/lock.h"

namespace turnstile::detail {

class LockEngine;

struct LockAccess {
  static Lock make(std::shared_ptr<LockEngine> engine) { return Lock(std::move(engine)); }
  static LockEngine& engine(const Lock& lock) { return lock.engine(); }
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_LOCK_ACCESS_H_
