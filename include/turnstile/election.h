// turnstile/election.h
//
// Leader election (etcd's concurrency.Election, Curator's LeaderLatch): of
// the candidates campaigning on one name, one leads at a time, until it
// resigns or is lost; the next in line then leads.
//
//   turnstile::Election election = client.election("billing");
//   turnstile::Leadership leading = election.campaign("host-a:8080");
//   while (!leading.loss_token().stop_requested()) do_a_step(leading.term());
//   leading.resign();                    // or its destructor
//
// How: a campaign is a waiting acquisition of the fenced fair lock at the
// election's name (fair_lock.h): candidates lead in the order they started
// campaigning, a dead candidate loses its place, and a term is the fencing
// token of the leader's hold: strictly increasing for the name, across
// leaders and server restarts (fencing.h). A Leadership is that hold
// (hold.h): the watchdog renews it, it is lost at its local deadline as
// any hold (loss token, lost handler), and the client's lease warning
// (on_lease_at_risk) and lock-delay apply to it. Once elected, the leader
// proclaims its value in the leader record beside the lock (key_layout.h:
// turnstile_leader:{<name>}), written only by the lock's holder, and tells
// the observers (turnstile_leader__channel:{<name>}).
//
// Contract:
//   * One leader. At most one candidate believes it leads at any instant,
//     within the limits of docs/safety.md (a leader paused past its lease
//     sees its loss token requested when it runs again, before it acts;
//     use the term as a fencing token for writes that must not overlap,
//     and a lock-delay to keep a successor out for a pause's length).
//   * Terms strictly increase: every leader's term is above every earlier
//     leader's of the name.
//   * leader() answers the last leader proclaimed while it still holds the
//     lock; nobody between a leader's end and its successor's proclamation
//     (one round trip after its election).
//   * observe() tells the current leader at once, then each change: a
//     proclamation or resignation at once (pub/sub), a leader lost without
//     resigning (crashed, partitioned) when its lock's lease ends on the
//     server, and within ElectionOptions::observe_period in any case.
//   * A Redisson process's RFairLock at the same name is a candidate too
//     (it holds the lock, so nobody else leads), but proclaims nothing.
//   * Thread safety: an Election may be used from any thread; a Leadership
//     is one value (as LockHold), except resign(). The Client must outlive
//     both.

#ifndef TURNSTILE_ELECTION_H_
#define TURNSTILE_ELECTION_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "turnstile/export.h"
#include "turnstile/flavor.h"
#include "turnstile/future.h"
#include "turnstile/hold.h"
#include "turnstile/runtime.h"

namespace turnstile {

namespace detail {
class ElectionCore;
class ObserverCore;
}  // namespace detail

struct TURNSTILE_EXPORT ElectionOptions {
  // How long a waiting candidate near the head of the line may go silent
  // before it loses its place (FairLockOptions::waiter_timeout).
  std::chrono::milliseconds waiter_timeout{5'000};
  // Observers read the leader at least this often, whatever they were told
  // (a message lost with a connection, a leader's lock deleted).
  // Between kMinObservePeriod and kMaxObservePeriod (InvalidArgumentError).
  std::chrono::milliseconds observe_period{5'000};
  // The lock-delay of the election's lock (LockOptions::lock_delay; unset:
  // the client's): a leader lost without resigning (crashed, paused, cut
  // off) keeps the next one out this much beyond its own deadline, so a
  // deposed leader that wakes within it finds no successor yet.
  std::optional<Duration> lock_delay = {};

  static constexpr std::chrono::milliseconds kMinObservePeriod{10};
  static constexpr std::chrono::milliseconds kMaxObservePeriod{3'600'000};
};

// Who leads, as an observer reads it.
struct TURNSTILE_EXPORT Leader {
  std::string owner;                // its hold's owner id
  std::int64_t term = 0;            // its hold's fencing token
  std::string value;                // what it proclaimed last
  std::int64_t since_epoch_ms = 0;  // when it first proclaimed (its wall clock)
  // How long its lock's lease had left on the server when read (its
  // lock-delay included).
  std::chrono::milliseconds remaining{0};

  friend bool operator==(const Leader&, const Leader&) = default;
};

// A candidate's leadership: its hold of the election's lock, its term and
// value. Move-only; empty when default-made, moved from, resigned, or
// returned by a campaign that was not elected in time.
class TURNSTILE_EXPORT Leadership {
 public:
  Leadership() noexcept;
  Leadership(Leadership&& other) noexcept;
  // Resigns what this led (as resign()), then takes `other`'s.
  Leadership& operator=(Leadership&& other) noexcept;
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;
  // resign(): never throws.
  ~Leadership();

  // Whether this has a leadership it has not resigned (a lost one too:
  // held() says whether it still leads).
  [[nodiscard]] bool owns_hold() const noexcept { return hold_.owns_hold(); }
  explicit operator bool() const noexcept { return owns_hold(); }

  // Whether it still leads, by this process's own record (LockHold::held():
  // the local deadline, a loss seen). No call to Redis.
  [[nodiscard]] bool held() const { return hold_.held(); }
  // Requested at the instant the leadership is lost (LockHold::loss_token()).
  std::stop_token loss_token() const { return hold_.loss_token(); }
  // The term (0 for an empty leadership).
  std::int64_t term() const noexcept { return term_; }
  const std::string& value() const noexcept { return value_; }
  // The owner id of the hold, as Leader::owner shows it.
  const std::string& owner() const { return hold_.owner(); }
  // The hold itself (its name, extend(), release_async()).
  const LockHold& hold() const noexcept { return hold_; }

  // Changes the value observers see. Throws NotOwnerError when it no
  // longer leads (its local deadline passed, a loss seen, or Redis says
  // another holds the lock), InvalidArgumentError for a value longer than
  // kMaxLeaderValueBytes, and what the script call throws.
  void proclaim(std::string value);
  // Gives the leadership back: releases the hold (LockHold::release()),
  // then clears the leader record if it is still this leader's and tells
  // the observers. Never throws (a failure goes to on_background_error);
  // a no-op for an empty leadership.
  void resign() noexcept;

 private:
  friend class detail::ElectionCore;
  TURNSTILE_HIDDEN Leadership(std::shared_ptr<detail::ElectionCore> election, LockHold hold, std::int64_t term,
                              std::string value) noexcept;

  std::shared_ptr<detail::ElectionCore> election_;
  LockHold hold_;
  std::int64_t term_ = 0;
  std::string value_;
};

// An observer's registration (Election::observe()). Move-only; destroying
// it (or stop()) ends it, and once that returns the handler is not called
// again (unless stop() is called from the handler itself).
class TURNSTILE_EXPORT Observation {
 public:
  Observation() noexcept;
  Observation(Observation&& other) noexcept;
  Observation& operator=(Observation&& other) noexcept;
  Observation(const Observation&) = delete;
  Observation& operator=(const Observation&) = delete;
  ~Observation();

  bool active() const noexcept { return core_ != nullptr; }
  void stop() noexcept;

 private:
  friend class Election;
  TURNSTILE_HIDDEN explicit Observation(std::shared_ptr<detail::ObserverCore> core) noexcept;
  std::shared_ptr<detail::ObserverCore> core_;
};

// Told the leader (nullopt: nobody leads) at once and at every change; runs
// on one of the client's engine threads, one call at a time; must not block
// for long.
using LeaderHandler = std::function<void(const std::optional<Leader>&)>;

// The longest value a leader may proclaim: 64 KiB.
inline constexpr std::size_t kMaxLeaderValueBytes = 64 * 1024;

class TURNSTILE_EXPORT Election {
 public:
  Election(Election&&) noexcept;
  Election& operator=(Election&&) noexcept;
  Election(const Election&) = delete;
  Election& operator=(const Election&) = delete;
  ~Election();

  // The key of the election's lock (the client's key prefix included).
  const std::string& name() const;
  const ElectionOptions& options() const;

  // Campaigns until elected, then proclaims `value`: waits as long as it
  // takes. Throws what the acquisition and the proclamation throw
  // (InvalidArgumentError for a value longer than kMaxLeaderValueBytes).
  [[nodiscard]] Leadership campaign(std::string value);
  // Campaigns within options.wait (kWaitForever: as long as it takes),
  // cancellable through options.stop; an empty Leadership if not elected
  // by then. options.lease: a leadership with a fixed lease the watchdog
  // does not renew.
  [[nodiscard]] Leadership try_campaign(std::string value, const AcquireOptions& options);
  // try_campaign() on the client's engine, holding no thread while it
  // waits (future.h).
  [[nodiscard]] Future<Leadership> campaign_async(std::string value,
                                                  const AcquireOptions& options = {
                                                      .wait = kWaitForever, .lease = std::nullopt, .stop = {}});

  // Who leads now (one script call); nullopt when nobody does.
  std::optional<Leader> leader();
  // Tells `handler` the leader now and at every change (see the file
  // comment) until the returned Observation ends. Subscribes before it
  // returns.
  [[nodiscard]] Observation observe(LeaderHandler handler);

  // Who to tell when a leadership is lost (Holdable::set_lost_handler).
  void set_lost_handler(LockLostHandler handler);

 private:
  friend class Client;
  TURNSTILE_HIDDEN explicit Election(std::shared_ptr<detail::ElectionCore> core) noexcept;
  std::shared_ptr<detail::ElectionCore> core_;
};

}  // namespace turnstile

#endif  // TURNSTILE_ELECTION_H_
