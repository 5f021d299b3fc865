// Lock test bodies on the fake Redis in a simulated world: one fake server,
// one simulated client (runtime + connection) per Client, virtual time.

#include "lock_environment.h"
#include "sim/fake_backend.h"
#include "sim/scheduler.h"
#include "fake_redis/server.h"
#include "sim/sim_runtime.h"
#include "fake_redis/virtual_clock.h"

namespace turnstile::testing {
namespace {

// Fixed, so every run of a test body is the same run.
constexpr std::uint64_t kSeed = 20261121;

class SimEnvironment final : public LockEnvironment {
 public:
  SimEnvironment()
      : scheduler_(clock_, {.seed = kSeed}),
        server_(clock_, sim::ServerOptions::idealised()),  // its tests pin exact instants
        inspector_(std::make_shared<sim::FakeBackend>(server_, "inspector", scheduler_, scheduler_.add_client())) {}

  ~SimEnvironment() override {
    // Clients first (their watchdogs cancel timers), then the connections.
    for (SimClient& client : clients_) client.client.reset();
  }

  Client& add_client(ClientOptions options) override {
    const sim::ClientId id = scheduler_.add_client();
    SimClient client;
    client.id = id;
    client.runtime = std::make_shared<sim::SimRuntime>(scheduler_, id, kSeed, id);
    client.backend = std::make_shared<sim::FakeBackend>(server_, "server", scheduler_, id);
    client.client = std::make_unique<Client>(client.backend, client.runtime, std::move(options));
    clients_.push_back(std::move(client));
    return *clients_.back().client;
  }

  void spawn(Client& client, std::function<void()> task) override {
    scheduler_.spawn(find(client).id, std::move(task));
  }

  // Bounded by the scheduler's default budgets (SimulationBudgetError, the
  // test fails): a body whose holds are renewed for ever fails in seconds.
  void run() override {
    const sim::Scheduler::RunResult result = scheduler_.run_until_idle();
    EXPECT_EQ(result.stuck_tasks, 0u) << "tasks left waiting forever";
  }

  void crash(Client& client) override {
    SimClient& simulated = find(client);
    simulated.backend->kill();  // a crashed client sends nothing more
    scheduler_.kill_client(simulated.id);
  }

  void freeze(Client& client) override { scheduler_.pause_client(find(client).id); }
  void thaw(Client& client) override { scheduler_.resume_client(find(client).id); }

  Backend& inspector() override { return *inspector_; }
  bool virtual_time() const override { return true; }
  std::string name() const override { return "sim"; }

 private:
  struct SimClient {
    sim::ClientId id = 0;
    std::shared_ptr<sim::SimRuntime> runtime;
    std::shared_ptr<sim::FakeBackend> backend;
    std::unique_ptr<Client> client;
  };

  SimClient& find(Client& client) {
    for (SimClient& simulated : clients_) {
      if (simulated.client.get() == &client) return simulated;
    }
    ADD_FAILURE() << "not a client of this environment";
    std::abort();
  }

  sim::VirtualClock clock_;
  sim::Scheduler scheduler_;
  sim::Server server_;
  std::shared_ptr<sim::FakeBackend> inspector_;
  std::vector<SimClient> clients_;
};

}  // namespace

std::vector<EnvironmentParam> lock_environments() {
  return {{"sim", [] { return std::make_unique<SimEnvironment>(); }}};
}

}  // namespace turnstile::testing
