// The watchdog's renewal batches on a backend that is a Redis Cluster
// (Backend::cluster_slot() answers slots): every renewal call carries keys
// of one slot, as a cluster requires, and every holding is renewed. On the
// fake, in virtual time, behind a decorator that answers Redis's slots and
// refuses a call whose keys span slots, as the cluster backend does
// (tests/redis/cluster_renewal_test.cpp: the same on a real cluster); a
// tick's calls go out as one batch (Backend::send_evals).

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "locks/engine/metrics_recorder.h"
#include "locks/engine/watchdog.h"
#include "locks/engine/wipe_check.h"
#include "lua_scripts.h"
#include "redis/slot.h"
#include "turnstile/backend.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/key_layout.h"
#include "turnstile/sim/world.h"

namespace turnstile {
namespace {

using std::chrono::seconds;

constexpr std::uint64_t kSeed = 7;
constexpr auto kLease = seconds(30);
constexpr int kPeriodsHeld = 3;
constexpr char kOwner[] = "slots-owner";
// Holdings whose names spread over many slots, and holdings sharing a tag:
// the tagged ones need ceil(250 / 100) = 3 calls per tick.
constexpr std::int64_t kSpread = 300;
constexpr std::int64_t kTagged = 250;

// The fake behind a cluster's slot rule: each key's slot, and a call whose
// keys span slots refused before it is sent.
class SlottedBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

  std::optional<int> cluster_slot(std::string_view key) const override {
    ++slots_asked;
    return redis::key_slot(key);
  }
  Reply eval(const Script& script, const std::vector<std::string>& keys,
             const std::vector<std::string>& args) override {
    check_one_slot(script, keys);
    return ForwardingBackend::eval(script, keys, args);
  }
  std::unique_ptr<PendingReply> send_eval(const Script& script, const std::vector<std::string>& keys,
                                          const std::vector<std::string>& args, EvalSync sync) override {
    check_one_slot(script, keys);
    return ForwardingBackend::send_eval(script, keys, args, sync);
  }

  // Sent as one batch (the watchdog's waves): each call checked as above.
  std::vector<std::unique_ptr<PendingReply>> send_evals(std::vector<EvalRequest> calls) override {
    if (!calls.empty() && calls.front().script->name == scripts::reentrant_lock_renew.name) ++renewal_waves;
    return ForwardingBackend::send_evals(std::move(calls));
  }

  mutable std::int64_t slots_asked = 0;
  int renewal_calls = 0;
  int renewal_waves = 0;
  int cross_slot_calls = 0;

 private:
  void check_one_slot(const Script& script, const std::vector<std::string>& keys) {
    if (script.name == scripts::reentrant_lock_renew.name) ++renewal_calls;
    std::set<int> slots;
    for (const std::string& key : keys) slots.insert(redis::key_slot(key));
    if (slots.size() <= 1) return;
    ++cross_slot_calls;
    throw InvalidArgumentError(std::string(script.name) + ": keys of " + std::to_string(slots.size()) + " slots");
  }
};

std::vector<std::string> holding_keys() {
  std::vector<std::string> keys;
  for (std::int64_t i = 0; i < kSpread; ++i) keys.push_back("spread:" + std::to_string(i));
  for (std::int64_t i = 0; i < kTagged; ++i) keys.push_back("{tagged}:" + std::to_string(i));
  return keys;
}

// Every holding renewed once a tick, in one call per slot, with or
// without the wipe check (`wipe_check_period`, zero: none).
void expect_one_call_per_slot_a_tick(Duration wipe_check_period) {
  sim::World world(kSeed);
  sim::SimClient& holder = world.add_client("holder");
  const auto slotted = std::make_shared<SlottedBackend>(holder.backend_ptr());
  const std::vector<std::string> keys = holding_keys();
  std::set<int> slots_in_use;
  for (const std::string& key : keys) slots_in_use.insert(redis::key_slot(key));
  std::int64_t lost = 0;
  std::int64_t errors = 0;
  std::int64_t live_at_end = 0;
  auto metrics = std::make_shared<detail::MetricsRecorder>();
  world.spawn(holder, [&] {
    const std::string lease_ms = std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(kLease).count());
    const Instant sent_at = holder.runtime().now();
    for (const std::string& key : keys) {
      (void)slotted->command({"HSET", key, kOwner, "1"});
      (void)slotted->command({"PEXPIRE", key, lease_ms});
    }
    auto watchdog = std::make_shared<detail::Watchdog>(
        *slotted, holder.runtime(), kLease,
        detail::LeaseTiming{.clock_drift_factor = 0.01, .stop_margin = kDefaultStopMargin},
        [&errors](std::exception_ptr) { ++errors; }, std::nullopt, metrics);
    if (wipe_check_period > Duration::zero()) {
      watchdog->set_wipe_check(std::make_unique<detail::WipeCheck>(
          *slotted, holder.runtime(), "slots-client", wipe_check_period, [&errors](std::exception_ptr) { ++errors; }));
    }
    for (const std::string& key : keys) {
      (void)watchdog->watch(detail::Watchdog::Target{
          .renew_script = &scripts::reentrant_lock_renew,
          .key = key,
          .holder = kOwner,
          .sent_at = sent_at,
          .lease = kLease,
          .on_lost = [&lost](std::uint64_t, LockLostReason) { ++lost; },
      });
    }
    // Past the kPeriodsHeld-th tick, and past the first lease: only
    // renewals keep the keys.
    holder.runtime().sleep_for(watchdog->renewal_period() * kPeriodsHeld + watchdog->renewal_period() / 2);
    for (const std::string& key : keys) live_at_end += slotted->command({"PTTL", key}).as_integer() > 0 ? 1 : 0;
    watchdog->stop();
  });
  world.run_until_idle();

  EXPECT_EQ(slotted->cross_slot_calls, 0);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(live_at_end, static_cast<std::int64_t>(keys.size()));
  EXPECT_EQ(metrics->snapshot().renewals, keys.size() * kPeriodsHeld);
  // One call per slot in use, the tag's slot (250 keys) taking three.
  const std::size_t calls_per_tick = (slots_in_use.size() - 1) + 3;
  EXPECT_EQ(static_cast<std::size_t>(slotted->renewal_calls), calls_per_tick * kPeriodsHeld);
  // Fewer holdings than a wave (Watchdog::kMaxRenewalLocksInFlight / 2):
  // a tick's calls are one batch, which a cluster pipelines per master.
  static_assert(kSpread + kTagged <= detail::Watchdog::kMaxRenewalLocksInFlight / 2);
  EXPECT_EQ(slotted->renewal_waves, kPeriodsHeld);
}

TEST(WatchdogSlotsTest, EachRenewalCallCarriesKeysOfOneSlotAndAllAreRenewed) {
  expect_one_call_per_slot_a_tick(Duration::zero());
}

// With the wipe check every second over more slots than one check reads
// (64): a slot it has not visited yet is newly in use, not wiped. It used
// to be reported wiped, and every check that found new slots renewed every
// holding at once (on a Cluster with 100,000 holdings over every slot, a
// full renewal every second for minutes, and with the presence keys'
// expiry shorter than a round of checks, for ever).
TEST(WatchdogSlotsTest, TheWipeCheckOverManySlotsAddsNoRenewal) {
  expect_one_call_per_slot_a_tick(std::chrono::seconds(1));
}

// The presence keys of every slot: each hashes to its slot with the
// smallest number that does, and finding all 16,384 tries each number once
// (about 170,000 slot lookups in all, coupon collector's), not 16,384 per
// slot (268 million: a Client holding locks over a Cluster's slots spent
// seconds of CPU a check on it).
TEST(WatchdogSlotsTest, PresenceKeysOfEverySlotCostOneSweepOfTags) {
  sim::World world(kSeed);
  sim::SimClient& holder = world.add_client("holder");
  const auto slotted = std::make_shared<SlottedBackend>(holder.backend_ptr());
  detail::WipeCheck check(*slotted, holder.runtime(), "slots-client", seconds(1), [](std::exception_ptr) {});
  constexpr int kSlots = 16384;
  // Backwards, so that most slots were met while looking for another.
  for (int slot = kSlots - 1; slot >= 0; --slot) {
    const std::optional<std::string> key = check.presence_key(slot);
    ASSERT_TRUE(key.has_value()) << slot;
    ASSERT_EQ(redis::key_slot(*key), slot) << *key;
  }
  EXPECT_LT(slotted->slots_asked, 300'000);
  EXPECT_LE(slotted->slots_asked, detail::WipeCheck::kMaxTagSearch);
  // The smallest number: none below it hashes to the slot.
  for (const int slot : {0, 1, 8000, kSlots - 1}) {
    const std::string key = *check.presence_key(slot);
    const std::string tag = key.substr(key.find('{') + 1, key.find('}') - key.find('{') - 1);
    for (int smaller = 0; smaller < std::stoi(tag); ++smaller) {
      ASSERT_NE(redis::key_slot(presence_key(std::to_string(smaller), "slots-client")), slot) << smaller;
    }
  }
  // Asked again: from the table, no more lookups.
  const std::int64_t asked = slotted->slots_asked;
  EXPECT_EQ(redis::key_slot(*check.presence_key(123)), 123);
  EXPECT_EQ(slotted->slots_asked, asked);
}

}  // namespace
}  // namespace turnstile
