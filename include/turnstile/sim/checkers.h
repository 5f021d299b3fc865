// turnstile/sim/checkers.h
//
// Safety and liveness checkers for a simulated world, on by default in every
// scenario. Most judge what the *servers granted*, not what clients say:
// after every command on every server, each watched resource's state is read
// from that server's keyspace (holders, their lease deadlines, the fair
// queue, free permits). A grant is a promise that lasts until its holder
// releases it on the server that granted it, or its lease deadline passes;
// a restart or a failover does not end it (the holder still believes it
// holds, rightly, within its lease). So a lock lost on a lagging replica
// promotion is caught as two live grants.
//
//   turnstile::sim::Checkers checkers(world);
//   checkers.watch({.resource = "orders", .reader = turnstile::sim::hash_lock_reader("orders")});
//   checkers.name_holder(client.id(), "alice");   // owner ids -> names in reports
//   world.run_for(1h);
//   checkers.check_liveness();                    // once faults healed
//   if (checkers.unexpected_count() > 0) std::puts(checkers.violations()[0].report().c_str());
//
// Checks:
//   * mutual_exclusion: at most `capacity` live grants per resource (1 for a
//     lock, N for a semaphore), across servers and server epochs.
//   * fifo (watch.fifo): a fair lock is granted to the earliest live waiter:
//     nobody who queued earlier and is still queued is skipped, and (with
//     the reader's liveness key) no release hands it to a waiter past its
//     liveness deadline while a live waiter still queues behind it.
//   * permit_conservation: free permits stay within 0..capacity, and free +
//     granted = capacity where the server lists grants; at the end, free +
//     permits clients believe they hold (crashed ones too) = capacity.
//   * fencing_order: tokens clients report (acquired()) strictly increase
//     per resource across holders.
//   * liveness (check_liveness): every client still waiting, and neither
//     crashed nor paused, is a violation. With watch.liveness_bound, also
//     all along: a live waiter that saw the resource free (no grant; a
//     free permit) for longer than the bound without getting it, judged
//     at every write and at check_liveness.
//   * belief_overlap: judged on what *holders believe*, in virtual time. A
//     belief interval runs from acquired() (the acquire returned true) to
//     the first of: lost() (the holder's lost handler ran), releasing() (it
//     starts its release; released() if it was not told), its crash, or
//     the deadline given to
//     believes_until() (a fixed lease the holder knows). When a belief
//     begins while other clients' beliefs in the same resource already hold
//     `capacity` permits (1 for a lock), that is a violation: a holder kept
//     acting on a lock the servers had given to someone else. If the
//     overlap needs a holder that is paused at that instant, it is counted
//     in overlaps_while_paused() instead: no client-side rule can end a
//     belief during a stop-the-world pause, only fencing protects its
//     writes (fencing_order and the scenarios' stale-write counts).
//   * readers_writers (watch.readers_writers, the read-write lock): in
//     place of the capacity, never a writer together with anyone else,
//     readers together allowed. Judged on grants (a write grant beside any
//     other holder's grant, or a read grant beside another holder's write
//     grant, is a mutual_exclusion violation; a holder's own reads during
//     a downgrade are one grant, the write) and on beliefs (acquired(...,
//     shared) opens a read or a write belief; a write belief beside any
//     other client's, or a read belief beside another's write belief, is
//     a belief_overlap).
//   * lock_delay (watch.lock_delay, a lock: capacity 1, one server, not
//     readers_writers): its holders arm every lease that much longer on
//     the server than they believe it (ClientOptions::lock_delay). A
//     holder whose hold ended without its release (lost(), a crash) keeps
//     the lock closed until its last local deadline (lease_deadline())
//     plus the delay, less 1 % of the delay for clock rates: a belief
//     another client begins earlier is a violation.
//
// A violation is recorded with what, when (virtual ms), which clients and
// the seed, and stops the world (World::stop) unless it is expected:
// scenarios that demonstrate a failure mode count it instead. expect(kind)
// expects every violation of a kind; expect(ExpectedViolation) only those
// of a kind that a server's lost state explains (a restart without
// persistence, a failover: World::server_epoch), within a window of that
// loss, so that a new kind, or the same kind for another reason, still
// fails the run.
//
// Not thread-safe: the world's thread.

#ifndef TURNSTILE_SIM_CHECKERS_H_
#define TURNSTILE_SIM_CHECKERS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/export.h"
#include "turnstile/flavor.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim {

enum class ViolationKind : std::uint8_t {
  mutual_exclusion,
  fifo,
  permit_conservation,
  fencing_order,
  liveness,
  belief_overlap,
  lock_delay,
};
inline constexpr std::size_t kViolationKinds = 7;
// "mutual exclusion", "fifo", ...
TURNSTILE_EXPORT std::string_view violation_name(ViolationKind kind);

struct TURNSTILE_EXPORT Violation {
  ViolationKind kind = ViolationKind::mutual_exclusion;
  std::int64_t virtual_ms = 0;
  std::string resource;
  std::vector<std::string> clients;  // names, in the order the text uses them
  std::string what;                  // one sentence
  std::uint64_t seed = 0;
  bool expected = false;
  // The instant (virtual ms) a server lost the state this violation stands
  // on, if it stands on one (see ExpectedViolation); unset otherwise.
  std::optional<std::int64_t> state_lost_ms;
  // "mutual exclusion violated at 31000 ms on 'orders' (alice, bob): ...;
  // replay with seed 42".
  std::string report() const;
};

// Violations a server's lost state (a restart without persistence, a
// failover to a lagging replica) can cause: of `kind`, standing on that
// loss, and at most `within` after it (unset: any time after it). A
// violation stands on a loss when, without what the server lost, it would
// not be one:
//   * mutual_exclusion: the earlier grant(s) it collides with were lost
//     by their server since (or, for a grant that reached its client after
//     the loss, the client's own);
//   * belief_overlap: the acquisitions of the beliefs it overlaps began
//     before the loss (a grant made before it may be answered after it);
//   * fencing_order: the call that drew the higher token it is compared
//     with began before the loss (a counter on a lagging replica starts
//     lower).
// The other kinds (fifo, permit_conservation, liveness) never stand on one.
struct TURNSTILE_EXPORT ExpectedViolation {
  ViolationKind kind = ViolationKind::mutual_exclusion;
  std::optional<Duration> within;
};

// One holder as a server records it.
struct TURNSTILE_EXPORT Grant {
  std::string holder;  // owner id, token or permit id
  // The last virtual ms it is live (absent: no expiry): a key's expiry
  // millisecond, as Redis keeps a key through it; a permit's expiry - 1,
  // as every deadline turnstile keeps is over at its own millisecond.
  std::optional<std::int64_t> deadline_ms;
  // A read hold of a read-write lock (judged only by readers_writers
  // watches): shared with other read holds, never with a write hold.
  bool shared = false;
};

// What one server holds for one resource.
struct TURNSTILE_EXPORT ResourceState {
  std::vector<Grant> grants;
  std::vector<std::string> queue;  // fair waiters, first first
  // Each queue entry's liveness deadline in virtual ms (turnstile's
  // waiters, by the wall clock of the client that wrote it; none for a
  // waiter without one, Redisson's), when the reader was given the
  // liveness key.
  std::vector<std::optional<std::int64_t>> queue_alive_ms;
  std::optional<std::int64_t> free_permits;  // semaphores
};

// Reads a resource's state from a server (sim/server.h); must not write.
using StateReader = std::function<ResourceState(Server& server)>;

// Readers for the layouts of turnstile's flavors (Redisson's keys).
// Reentrant and fenced locks: a hash of owner -> hold count with a TTL.
TURNSTILE_EXPORT StateReader hash_lock_reader(std::string key);
// Token lock: a string holding the holder's token, with a TTL.
TURNSTILE_EXPORT StateReader string_lock_reader(std::string key);
// Fair lock: the lock hash plus its waiter list (Redisson's
// "redisson_lock_queue:{name}") and, given `alive_key` (turnstile's
// "turnstile_lock_waiters:{name}"), each waiter's liveness deadline: a
// FIFO watch then also catches a grant to a waiter past it.
TURNSTILE_EXPORT StateReader fair_lock_reader(std::string key, std::string queue_key, std::string alive_key = {});
// Counting semaphore: a string with the free permits.
TURNSTILE_EXPORT StateReader counting_semaphore_reader(std::string key);
// Crash-safe semaphore: the free permits at `key` and every held permit id
// in its sorted set (key_layout(): "{<key>}:timeout", or "<key>:timeout"
// for a name with its own hash tag), its score (the permit's expiry in
// Unix ms) as the grant's deadline.
TURNSTILE_EXPORT StateReader permit_semaphore_reader(std::string key);
// Read-write lock: every holder of the hash once, with the hash's ttl: a
// reader ('<owner>' only) as a shared grant, a writer ('<owner>:write') as
// an exclusive one, also while it reads (downgrading). Watch it with
// readers_writers.
TURNSTILE_EXPORT StateReader read_write_lock_reader(std::string key);
// The reader of `flavor` at `key`, its side keys named by the library's
// key layout (turnstile/key_layout.h). A composite lock's nodes are
// reentrant locks: read each server with the quorum option below.
TURNSTILE_EXPORT StateReader state_reader(Flavor flavor, std::string key);

struct TURNSTILE_EXPORT WatchOptions {
  std::string resource = {};  // the name reports use
  StateReader reader = {};
  std::int64_t capacity = 1;  // concurrent grants allowed (permits)
  bool fifo = false;
  bool permits = false;  // check permit conservation
  // Held permits return to the pool when their lease runs out (the
  // crash-safe semaphore): the end-of-run count leaves crashed holders out.
  bool permits_expire = false;
  // RedLock: a holder counts as granted once `quorum` servers list it
  // (holders named alike, by name_holder, across servers), until it
  // releases or the quorum-th latest of its deadlines passes; a minority of
  // servers granting another holder is not a grant. 0 or 1: any server's.
  std::size_t quorum = 0;
  // A read-write lock: grants and beliefs are judged as readers and
  // writers (see the file comment), not against `capacity`.
  bool readers_writers = false;
  // Liveness all along (see above); unset: at check_liveness only.
  std::optional<Duration> liveness_bound = {};
  // Grant deadlines the clients' wall clocks wrote (the crash-safe
  // semaphore's permit expiries: any client reclaims a permit by its own
  // clock): with clocks skewed up to this apart, a grant ends this much
  // before its deadline. Beliefs are judged exactly all the same.
  Duration deadline_tolerance{0};
  // Fair waiters' liveness deadlines (FIFO: a release hands the lock to no
  // waiter past its deadline while a live one queues behind it), written
  // by each waiter's wall clock and read by the releaser's, as of its
  // send: a waiter counts as past it only this much after it (clocks
  // skewed this far apart). nullopt: not judged (a run whose requests may
  // wait in transit or behind a slow script, by an unknown time).
  std::optional<Duration> waiter_deadline_tolerance = Duration{0};
  // The holders' lock-delay (see the file comment); zero: not judged.
  Duration lock_delay{0};
};

class TURNSTILE_EXPORT Checkers {
 public:
  static constexpr std::size_t kMaxResources = 1024;
  static constexpr std::size_t kMaxViolationsKept = 1000;

  // Observes every server of `world` (World::set_command_observer).
  explicit Checkers(World& world);
  ~Checkers();
  Checkers(const Checkers&) = delete;
  Checkers& operator=(const Checkers&) = delete;

  void watch(WatchOptions options);
  // Violations of `kind` are counted, not stopping the run nor unexpected.
  void expect(ViolationKind kind);
  // Only those of its kind that stand on a server's lost state, within its
  // window (ExpectedViolation); several of one kind: any may match.
  void expect(ExpectedViolation expectation);
  // Owner ids starting with `owner_prefix` (a Client's uuid) belong to `name`.
  void name_holder(std::string_view owner_prefix, std::string name);

  // ---- what clients believe (fencing, conservation, liveness) ----
  void waiting(const SimClient& client, std::string_view resource);
  // `shared`: a read hold (readers_writers watches; ignored by others).
  void acquired(const SimClient& client, std::string_view resource,
                std::optional<std::int64_t> fencing_token = std::nullopt, std::int64_t permits = 1,
                bool shared = false);
  void released(const SimClient& client, std::string_view resource, std::int64_t permits = 1, bool shared = false);
  void gave_up(const SimClient& client, std::string_view resource);
  // The client undid an acquisition it never acted on (a ReplicaSyncError):
  // the servers' grant to it ends, as a release would end it.
  void withdrawn(const SimClient& client, std::string_view resource);

  // ---- belief intervals (belief_overlap; acquired() opens one) ----
  // The holder knows its belief ends by `deadline` (a fixed lease counted
  // from before its acquire call). For the belief acquired() opened last.
  void believes_until(const SimClient& client, std::string_view resource, Instant deadline);
  // The holder learned that one permit (or the lock, or its read or write
  // hold: `shared`) of `resource` is lost.
  void lost(const SimClient& client, std::string_view resource, bool shared = false);
  // The holder starts to release `permits`: its belief in them ends now.
  void releasing(const SimClient& client, std::string_view resource, std::int64_t permits = 1, bool shared = false);
  // The holder's local deadline for `resource` was set or moved
  // (ClientOptions::on_lease_deadline): what lock_delay is judged from.
  void lease_deadline(const SimClient& client, std::string_view resource, Instant deadline);
  // Overlaps that needed a paused holder (see the file comment).
  std::uint64_t overlaps_while_paused() const { return overlaps_while_paused_; }
  std::uint64_t beliefs_opened() const { return beliefs_opened_; }

  // Liveness and end-of-run conservation; call once faults healed.
  void check_liveness();

  const std::vector<Violation>& violations() const { return violations_; }
  std::uint64_t count(ViolationKind kind) const;
  std::uint64_t unexpected_count() const { return unexpected_; }
  std::uint64_t grants_observed() const { return grants_observed_; }

 private:
  struct LiveGrant {
    std::size_t server = 0;
    std::uint64_t epoch = 0;
    std::optional<std::int64_t> deadline_ms;
    std::int64_t granted_ms = 0;
    bool shared = false;
  };
  struct Resource {
    WatchOptions options;
    std::map<std::string, LiveGrant> grants;                                              // by holder
    std::map<std::size_t, std::vector<std::string>> last_queue;                           // by server
    std::map<std::size_t, std::vector<std::optional<std::int64_t>>> last_queue_alive_ms;  // by server
    // Per server, the epoch of its last reading (a grant first listed in a
    // new epoch's first reading was kept by the loss, granted by nobody).
    std::map<std::size_t, std::uint64_t> read_epochs;
    // Quorum mode: per server, holder name -> deadline, as last read.
    std::map<std::size_t, std::map<std::string, std::optional<std::int64_t>>> listed;
    // Quorum mode: each server's epoch when its listing was read (a listing
    // read before the server lost its state lists nothing now).
    std::map<std::size_t, std::uint64_t> listed_epochs;
    // Quorum mode: when a holder's grant began, the epoch of each server
    // that listed it (kNotBacking for the others).
    std::map<std::string, std::vector<std::uint64_t>> epochs_at_grant;
    std::optional<std::int64_t> last_token;
    std::string last_token_holder;
    std::int64_t last_token_ms = 0;  // when the call that drew last_token began
    // Liveness all along: since when the resource is free (unset: taken),
    // when the last grant ended, whether this free spell was reported.
    std::optional<std::int64_t> free_since_ms;
    std::optional<std::int64_t> last_end_ms;
    bool free_reported = false;
  };
  struct Belief {
    std::optional<std::int64_t> waiting_since_ms;
    std::int64_t permits_held = 0;
    std::int64_t permits_releasing = 0;  // announced by releasing(), not yet released()
    // lock_delay: the last local deadline told, and when; the one a hold
    // ended on without its release (lost(), until its next release or
    // acquisition).
    std::optional<Instant> told_deadline;
    std::int64_t told_ms = 0;
    std::optional<Instant> lost_deadline;
    std::int64_t lost_told_ms = 0;
  };
  // One client's open belief interval in one resource.
  struct OpenBelief {
    const SimClient* client = nullptr;
    std::int64_t permits = 0;
    std::int64_t shared = 0;  // of `permits`, read holds
    std::int64_t since_ms = 0;
    std::optional<Instant> until;
    // When the acquisition that opened it began (waiting()): its grant may
    // predate a server's loss even when its answer came after it.
    std::int64_t asked_ms = 0;
  };
  using OpenBeliefs = std::map<ClientId, OpenBelief>;
  void open_belief(const SimClient& client, std::string_view resource, std::int64_t permits, bool shared,
                   std::int64_t asked_ms);
  void end_belief(const SimClient& client, std::string_view resource, std::int64_t permits, bool shared);
  // readers_writers: a belief opening beside conflicting ones (a write
  // beside anyone, a read beside a write).
  void judge_readers_writers_belief(const SimClient& client, const std::string& resource, const OpenBeliefs& beliefs,
                                    bool shared);
  // readers_writers: a grant (new, or a read turned write) beside
  // conflicting live grants.
  void judge_readers_writers_grant(Resource& resource, const std::string& holder, const LiveGrant& grant);
  // lock_delay: `client` begins to believe while another client's hold,
  // ended without its release, still keeps the lock closed.
  void judge_lock_delay(const Resource& resource, const SimClient& client);
  // Drops beliefs that ended by a crash or a deadline before now.
  void expire_beliefs(OpenBeliefs& beliefs);

  // The claims `client` holds in `resource` end: it let go (released) or
  // undid its acquisition (withdrawn). A grant the server that made it
  // still lists, in the same epoch and within its lease, is not ended: the
  // release never reached the server (it failed in transit), so the server
  // goes on granting it until it drops it (a retried release, its lease
  // running out), which observe_resource sees. Taking the holder's word
  // here would make a later read of that unchanged hold (or the holder's
  // reentrant re-acquisition on top of it) look like a new grant. A grant
  // its server forgot (a restart, a failover) or a RedLock majority grant
  // ends here: only the holder can end those.
  void end_claims(Resource& resource, const SimClient& client);
  // Liveness all along: a free spell begun by expiries, judged; then the
  // spell updated from what the server now shows.
  void begin_free_by_expiry(Resource& resource, std::int64_t ended_ms);
  void judge_free_spell(Resource& resource, std::int64_t now_ms);
  void update_free_spell(Resource& resource, bool free, std::int64_t now_ms);

  void observe(std::size_t server_index);
  void observe_resource(Resource& resource, std::size_t server_index, std::uint64_t epoch);
  void observe_quorum(Resource& resource, std::size_t server_index, std::uint64_t epoch);
  // When `holder`'s majority of live listings ends (nullopt inside: no
  // deadline); nullopt when fewer than a quorum list it now.
  std::optional<std::optional<std::int64_t>> majority_deadline(const Resource& resource, const std::string& holder,
                                                               std::int64_t now_ms) const;
  // Whether the listing of `server` was read since it last lost its state.
  bool listing_current(const Resource& resource, std::size_t server) const;
  // A fair lock's queue before a command, and whether it was held then.
  struct QueueBefore {
    const std::vector<std::string>& queue;
    const std::vector<std::optional<std::int64_t>>& alive_ms;
    bool held = false;
  };
  void judge_fifo_grant(const Resource& resource, const std::string& holder, const QueueBefore& before,
                        const ResourceState& state, std::int64_t now_ms);
  void record_grant(Resource& resource, const std::string& holder, const LiveGrant& grant);
  // acquired(): `client`'s grant, lost by its server since and left out by
  // record_grant() while the client waited (from `waited_since_ms`), is
  // judged against the grants made meanwhile.
  void judge_undecided_grant(Resource& resource, const SimClient& client, std::int64_t waited_since_ms);
  Resource* find(std::string_view resource);
  std::string name_of_holder(const std::string& holder) const;
  // ExpectedViolation: when a server lost this grant (its first loss after
  // the grant; a quorum grant: the first of any server backing it); unset
  // if it still holds it.
  std::optional<std::int64_t> grant_lost_ms(const Resource& resource, const std::string& holder,
                                            const LiveGrant& grant) const;
  // The first loss of any server's state after `since_ms`, up to now.
  std::optional<std::int64_t> state_lost_since(std::int64_t since_ms) const;
  // The last loss of any server's state so far.
  std::optional<std::int64_t> latest_state_loss() const;
  void report(ViolationKind kind, const std::string& resource, std::vector<std::string> clients, std::string what,
              std::optional<std::int64_t> state_lost_ms = std::nullopt);
  bool is_expected(ViolationKind kind, std::optional<std::int64_t> state_lost_ms) const;

  // Per server: its write count and epoch when last observed.
  struct Seen {
    std::uint64_t writes = ~std::uint64_t{0};
    std::uint64_t epoch = 0;
  };

  World& world_;
  std::map<std::size_t, Seen> seen_;
  std::vector<Resource> resources_;
  std::vector<std::pair<std::string, std::string>> holder_names_;  // prefix, name
  std::set<ViolationKind> expected_;
  std::vector<ExpectedViolation> expected_after_loss_;
  std::map<std::pair<ClientId, std::string>, Belief, std::less<>> beliefs_;
  std::map<std::string, OpenBeliefs, std::less<>> open_beliefs_;  // by resource
  std::uint64_t overlaps_while_paused_ = 0;
  std::uint64_t beliefs_opened_ = 0;
  std::vector<Violation> violations_;
  std::uint64_t counts_[kViolationKinds] = {};
  std::uint64_t unexpected_ = 0;
  std::uint64_t grants_observed_ = 0;
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_SIM_CHECKERS_H_
