#include "turnstile/sim/standalone.h"

#include <utility>

#include "sim/fake_backend.h"

namespace turnstile::sim {
namespace {

// The server and the one link to it, freed together (the link first).
struct StandaloneFake {
  explicit StandaloneFake(std::string name) : backend(server, std::move(name)) {}
  StandaloneServer server;
  FakeBackend backend;
};

}  // namespace

std::shared_ptr<Backend> make_standalone_fake_backend(std::string name) {
  auto fake = std::make_shared<StandaloneFake>(std::move(name));
  return std::shared_ptr<Backend>(fake, &fake->backend);
}

}  // namespace turnstile::sim
