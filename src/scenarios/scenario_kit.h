// scenarios/scenario_kit.h
//
// What every scenario shares: make_lock(), where --flavor picks a flavor
// through the library's one factory (Client::holdable, turnstile/flavor.h),
// and
// ScenarioWorld, a World with its checkers, optional timeline, simulated
// clients each with a turnstile::Client, and the bookkeeping of what
// clients believe (waiting, acquired, lost, releasing, released) fed to
// checkers, timeline and counters at once. make_lock() installs the lost
// handler of every flavor that has one, so the instant a holder learns of
// a loss ends its belief interval (Checkers, belief_overlap).

#ifndef TURNSTILE_SCENARIOS_SCENARIO_KIT_H_
#define TURNSTILE_SCENARIOS_SCENARIO_KIT_H_

#include <functional>
#include <initializer_list>
#include <string_view>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "turnstile/client.h"
#include "turnstile/flavor.h"
#include "turnstile/hold.h"
#include "turnstile/sim/checkers.h"
#include "turnstile/sim/scenarios.h"
#include "turnstile/sim/timeline.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim::scenarios {

// One ClientOptions::on_lease_deadline call, kept.
struct LeaseDeadlineTold {
  std::string key;
  Instant deadline;
};

struct Member {
  SimClient* sim = nullptr;
  std::unique_ptr<Client> client;  // on server 0
  // redlock, multilock: the Clients on servers 1..nodes-1 (same runtime).
  std::vector<std::unique_ptr<Client>> node_clients;
  std::uint64_t background_errors = 0;
  // The local deadlines its clients told (ClientOptions::on_lease_deadline)
  // since the current round began, one per node (index 0: `client`) with
  // the key they were told for: how the library times the belief.
  std::vector<std::optional<LeaseDeadlineTold>> told_deadlines;
  // When its client warned of a hold at risk (ScenarioWorld's
  // lease_warning), in order.
  std::vector<Instant> warned_at;
  // Its locks' own lock-delay (LockOptions::lock_delay), set on every
  // other member when the run has one, so that both ways of arming it are
  // judged; nullopt: its client's (ClientOptions::lock_delay).
  std::optional<Duration> lock_delay;
};

// What a scenario asks of its members' clients beyond the options.
struct MemberOptions {
  // ClientOptions::lease_warning (zero: none); each warning is kept in
  // Member::warned_at.
  Duration lease_warning = Duration::zero();
};

class ScenarioWorld;

// What a scenario whose servers may lose their state expects of it
// (ScenarioWorld::expect_state_loss).
struct StateLossExpectation {
  // The longest lease a lost grant may have had (its holder believes, and
  // the checkers count it granted, until then).
  Duration lease;
  // The lock's fencing counter may come back behind tokens already drawn
  // (a lagging replica promoted). A counter lost outright starts above
  // every token drawn (lua/lib/fencing_counter.lua): not this.
  bool tokens_go_back = false;
};

// Throws InvalidArgumentError ("<scenario>: --flavor <flavor> <why>") if the
// options' flavor is one of `refused`.
void refuse_flavors(const ScenarioOptions& options, std::initializer_list<Flavor> refused, std::string_view why);
// `member`'s handle on `name` in the options' flavor. `fenced`: draw fencing
// tokens (reentrant and fair only; InvalidArgumentError otherwise). The
// semaphores are given the options' permits if they have none yet (a script
// call: call it from the member's task). Its lost handler tells sw.lost().
// `shared`: the read half of a read-write lock (InvalidArgumentError for
// another flavor); otherwise a read-write lock's write half.
std::unique_ptr<Holdable> make_lock(ScenarioWorld& sw, Member& member, const std::string& name, bool fenced,
                                    bool shared = false);
// The trace digest results carry: sha256 of the text and the schedule hash.
std::string trace_digest(const std::string& trace_text, std::uint64_t trace_hash);

class ScenarioWorld {
 public:
  ScenarioWorld(const ScenarioOptions& options, std::size_t clients, WorldOptions world_options = {},
                MemberOptions member_options = {});
  ~ScenarioWorld();

  const ScenarioOptions& options() const { return options_; }
  Member& member(std::size_t index) { return *members_[index]; }
  std::size_t size() const { return members_.size(); }

  // Watches `name` in the options' flavor: capacity 1 for a lock, the
  // permits for a semaphore (permit conservation on), a majority of the
  // nodes for a RedLock; `fifo` for the fair lock; readers and writers for
  // the read-write lock; liveness all along, bounded by the lease and the
  // fault plan (liveness_bound()).
  void watch(const std::string& name, bool fifo = false);
  // Expects only the violations a server's lost state causes
  // (Checkers::expect(ExpectedViolation)): a double grant and two holders
  // believing within the lease and the longest fault of the run's plan
  // after the loss, and fencing tokens below one drawn before it if they
  // may go back. Any other violation still fails the run.
  void expect_state_loss(const StateLossExpectation& expectation);

  void waiting(Member& member, const std::string& resource);
  // `shared`: a read hold of a read-write lock (Checkers::acquired).
  void acquired(Member& member, const std::string& resource, std::optional<std::int64_t> token = std::nullopt,
                bool shared = false);
  // The holder's lost handler ran: its belief ends (ignored if it holds none).
  void lost(Member& member, const std::string& resource, bool shared = false);
  // Call before unlock: the holder stops acting on its belief.
  void releasing(Member& member, const std::string& resource, bool shared = false);
  void released(Member& member, const std::string& resource, bool shared = false);
  void gave_up(Member& member, const std::string& resource);
  // Its acquisition was undone: no replica acknowledged it (ReplicaSyncError).
  void withdrawn(Member& member, const std::string& resource);

  // Runs to `limit` in slices, reporting progress against [0, total_end].
  // The first call applies the options' fault mix until total_end.
  void run_until(Instant limit, Instant total_end);
  // Fills the common fields of `result`, writes the trace file if asked.
  void finish(ScenarioResult& result);

  World world;
  Checkers checkers;
  std::unique_ptr<Timeline> timeline;
  std::uint64_t acquisitions = 0;
  std::uint64_t handoffs = 0;
  // The most clients holding read holds at once (read-write lock; a
  // crashed reader no longer counts).
  std::int64_t max_readers = 0;
  // Told after lost() recorded a loss (a scenario's own bookkeeping).
  std::function<void(Member&, const std::string&)> on_lost;

 private:
  ScenarioOptions options_;
  std::vector<std::unique_ptr<Member>> members_;
  ClientId last_holder_ = 0;
  std::set<const SimClient*> reading_;  // read holders, crashed ones until they are counted out
  bool faults_applied_ = false;
  std::optional<FaultPlan> plan_;  // the options' fault plan (its `until` set when applied)
  // How long a live waiter may see the watched lock free (Checkers).
  Duration liveness_bound() const;
  // The longest fault of the plan that keeps a client from the server.
  Duration longest_fault() const;
};

// One round of a client loop: wait, hold (running `while_held`), release,
// each step told to the checkers and timeline.
struct Round {
  bool acquired = false;
  bool lost_before_unlock = false;  // unlock found the lock gone (NotOwnerError)
  bool replica_sync_error = false;  // acquired on the master only, undone (ReplicaSyncError)
  std::uint64_t failed_calls = 0;   // lock or unlock failed otherwise (faults)
};
struct RoundOptions {
  std::optional<Duration> lease;                    // unset: the watchdog keeps it
  std::function<void(const LockHold&)> while_held;  // told what was taken
  bool shared = false;                              // a read hold (make_lock's `shared`)
};
Round hold_round(ScenarioWorld& sw, Member& member, Holdable& lock, const std::string& resource,
                 const RoundOptions& options);

// The instant `duration` after virtual zero.
inline Instant at_offset(Duration duration) { return Instant{} + duration; }
// `duration` in whole milliseconds (facts are virtual ms).
inline std::int64_t to_ms(Duration duration) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
}

}  // namespace turnstile::sim::scenarios

#endif  // TURNSTILE_SCENARIOS_SCENARIO_KIT_H_
