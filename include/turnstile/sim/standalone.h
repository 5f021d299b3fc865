// turnstile/sim/standalone.h
//
// The fake Redis outside a simulated world: a Backend over a fresh
// in-process fake server of its own, for code on real threads with the
// production runtime (a Client built without a Runtime uses RealRuntime):
//
//   turnstile::Client client(turnstile::sim::make_standalone_fake_backend());
//   turnstile::ReentrantLock lock = client.lock("orders");
//   lock.lock();  // the same scripts as on a real redis-server, no network
//
// Each call holds the server's mutex, so any number of threads may share the
// backend. Pub/sub messages are delivered synchronously on the publishing
// thread while that mutex is held: a subscription handler must not call the
// backend (the lock family's handlers do not). The server's clock stands
// still: keys never expire by time, so a lease only ends by an unlock or a
// renewal's refusal. No faults, delays or replicas: for those, use a
// sim::World (turnstile/sim/world.h).

#ifndef TURNSTILE_SIM_STANDALONE_H_
#define TURNSTILE_SIM_STANDALONE_H_

#include <memory>
#include <string>

#include "turnstile/export.h"
#include "turnstile/backend.h"

namespace turnstile::sim {

// A Backend over a new fake server that only it uses; the server lives as
// long as the backend. `name` appears in describe() ("sim:<name>") and in
// error messages.
TURNSTILE_EXPORT std::shared_ptr<Backend> make_standalone_fake_backend(std::string name = "standalone");

}  // namespace turnstile::sim

#endif  // TURNSTILE_SIM_STANDALONE_H_
