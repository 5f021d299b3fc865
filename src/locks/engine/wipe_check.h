// locks/engine/wipe_check.h
//
// Finds a server that lost the keys under a Client's holdings (FLUSHALL,
// FLUSHDB, a restart without persistence, a failover to a replica that had
// not synced them) within one check period, whatever the holdings' leases.
// The Watchdog runs it every ClientOptions::wipe_check_period while it
// renews anything, and renews every holding at once when it reports a wipe:
// the renewals that find their keys gone lose them (LockLostReason::gone).
//
// The presence key: one per cluster slot in use (one in all on a single
// server or Sentinel), "turnstile_presence:{<tag>}:<client uuid>"
// (key_layout.h), <tag> "0" on one server, else the smallest number whose
// tag hashes to that slot (the numbers tried once each, in order, every
// slot met recorded: about 170,000 tries find all 16,384 slots of a
// Cluster, at most kMaxTagSearch in all), a string with an expiry of presence_ttl(period,
// slots): longer than the checks take to come back to it (with more slots
// in use than kMaxSlotsPerCheck, every ceil(slots / kMaxSlotsPerCheck)
// periods). Each check runs lua/wipe_check.lua on it:
// found, it is left alone (re-armed once less than half its expiry is left); missing, it is written again and the slot
// is reported wiped; with more slots in use than one check reads, a key this check never wrote is a slot newly in use
// instead (a wipe there is found by the slot's next renewal, within one renewal period). A key missing for another
// reason (it expired because no check ran for that long, it was evicted, it had never been written) costs one renewal
// more: a renewal never loses what is still held.
//
// A restart is also found by the check's own reconnection: a call whose
// connection was closed is sent once more at once, on a new connection,
// whose handshake compares the server's run_id (Backend::watch_restarts).
//
// Bounds: at most kMaxSlotsPerCheck presence keys per check, taken in turn
// when more slots are in use (a Cluster with holdings in many slots learns
// of a wipe within ceil(slots / kMaxSlotsPerCheck) periods), at most
// kMaxCallsInFlight of them sent and unread at once: each holds a pooled
// connection until its reply is read, and a check that took a node's every
// connection would wait for one it holds itself, the renewals starved
// meanwhile (every lock lost). Each call waits for its reply at most one
// period.
//
// Refused by an ACL (no access to turnstile_presence:* keys): reported once
// through `on_error` with what to grant, and no check runs again on this
// Client; holders then learn of a wipe at their next renewal, as before.

#ifndef TURNSTILE_LOCKS_ENGINE_WIPE_CHECK_H_
#define TURNSTILE_LOCKS_ENGINE_WIPE_CHECK_H_

#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "turnstile/backend.h"
#include "turnstile/runtime.h"

namespace turnstile::detail {

class WipeCheck {
 public:
  static constexpr std::size_t kMaxSlotsPerCheck = 64;
  // Calls sent and not read yet, at most: well below a node's pool
  // (RedisOptions::pool_size, 16 by default), beside the watchdog's
  // renewal waves in flight (Watchdog::kMaxRenewalLocksInFlight).
  static constexpr std::size_t kMaxCallsInFlight = 4;
  // Numbers tried as tags in all, at most (finding every slot of 16,384
  // takes about 170,000: 16,384 x ln 16,384).
  static constexpr int kMaxTagSearch = 1'000'000;
  // Cluster slots are below this (16,384 in Redis): the bound of the
  // tags' table.
  static constexpr int kMaxSlot = 1 << 16;
  // A call whose connection was closed or refused is sent this many times.
  static constexpr int kAttempts = 2;

  // `client_id` names the Client in its presence keys. `on_error` is told
  // a refusal (once) and must not throw.
  WipeCheck(Backend& backend, Runtime& runtime, std::string client_id, Duration period,
            std::function<void(std::exception_ptr)> on_error);

  // One check of the cluster slots `slots` (nullopt: a server that is no
  // cluster), in a fixed order; at most kMaxSlotsPerCheck are read, in turn
  // across calls. True if a presence key was missing: some server may have
  // lost what it held. Never throws; blocks up to one period.
  bool run(const std::vector<std::optional<int>>& slots);

  // Whether checks still run (false once refused by the server).
  bool enabled() const { return enabled_; }
  Duration period() const { return period_; }

  // The presence key for `slot` (the file comment); nullopt if no tag was
  // found for it.
  std::optional<std::string> presence_key(std::optional<int> slot);

  // How long a presence key outlives the last check that re-armed it,
  // with `slots` slots in use (checked kMaxSlotsPerCheck at a time).
  static Duration presence_ttl(Duration period, std::size_t slots = 1);

 private:
  Backend& backend_;
  Runtime& runtime_;
  const std::string client_id_;
  const Duration period_;
  const std::function<void(std::exception_ptr)> on_error_;
  std::atomic<bool> enabled_{true};
  std::size_t next_ = 0;           // where the next check starts (one check runs at a time)
  std::vector<int> tag_by_slot_;   // the smallest tag met for each slot, -1 if none yet (one check at a time)
  int next_tag_ = 0;               // the next number to try as a tag
  std::set<std::string> written_;  // presence keys this check has written (at most one per slot)
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_WIPE_CHECK_H_
