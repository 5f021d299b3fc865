// Revocation (turnstile/revocation.h, issue #53): a release request reaches
// the holder's watch, which decides; one that does not listen keeps the
// lock. Bodies run in virtual time and against a real redis-server.

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lock_environment.h"
#include "turnstile/client.h"
#include "turnstile/election.h"
#include "turnstile/errors.h"
#include "turnstile/flavor.h"
#include "turnstile/revocation.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using RevocationTest = LockTest;

TEST_P(RevocationTest, ARequestReachesTheHoldersWatchWithItsReason) {
  Client& holder = env().add_client();
  Client& asker = env().add_client();
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock("revoke:basic");
    LockHold hold = lock.acquire_hold();
    std::mutex mutex;
    std::vector<std::string> reasons;
    RevocationWatch watch = holder.watch_release_requests("revoke:basic", [&](const ReleaseRequest& request) {
      std::lock_guard guard(mutex);
      reasons.emplace_back(request.reason);
      EXPECT_EQ(request.name, "revoke:basic");
    });
    EXPECT_FALSE(watch.token().stop_requested());
    EXPECT_EQ(asker.request_release("revoke:basic", "deploy 4.2 needs it"), 1) << "one watch heard it";
    ASSERT_TRUE(eventually(holder, [&] { return watch.token().stop_requested(); }));
    {
      std::lock_guard guard(mutex);
      EXPECT_EQ(reasons, std::vector<std::string>{"deploy 4.2 needs it"});
    }
    EXPECT_TRUE(hold.held()) << "advice, not force: the lock is untouched";
    ReentrantLock other = asker.lock("revoke:basic");
    EXPECT_FALSE(other.try_lock()) << "a holder that has not let go keeps the lock";
    hold.release();
    watch.stop();
    // Nobody listens any more, once the backend let go of the channel
    // (kChannelLingerMs after its last subscription ended).
    EXPECT_TRUE(eventually(asker, [&] { return asker.request_release("revoke:basic") == 0; }));
    EXPECT_TRUE(other.try_lock());
    other.unlock();
  });
  env().run();
}

// Every flavor with named holders: the holder watches its name and lets go
// when asked; the asker, waiting, gets it then.
TEST_P(RevocationTest, EveryFlavorsHolderCanBeAskedToLetGo) {
  for (const FlavorTraits& traits : kFlavorTable) {
    if (is_composite(traits.flavor)) continue;  // watched per node (revocation.h)
    SCOPED_TRACE(std::string(flavor_name(traits.flavor)));
    const std::string name = "revoke:" + std::string(flavor_name(traits.flavor));
    Client& holder = env().add_client();
    Client& asker = env().add_client();
    const HoldableOptions options{.permits = is_semaphore(traits.flavor) ? 1 : 0};
    std::atomic<bool> held{false};
    env().spawn(holder, [&] {
      std::unique_ptr<Holdable> lock = holder.holdable(traits.flavor, name, options);
      LockHold hold = lock->acquire_hold();
      RevocationWatch watch = holder.watch_release_requests(name);
      held = true;
      ASSERT_TRUE(eventually(holder, [&] { return watch.token().stop_requested(); }));
      hold.release();
    });
    env().spawn(asker, [&] {
      ASSERT_TRUE(eventually(asker, [&] { return held.load(); }));
      std::unique_ptr<Holdable> lock = asker.holdable(traits.flavor, name, options);
      EXPECT_FALSE(lock->try_acquire_hold({}));
      EXPECT_EQ(asker.request_release(name, "mine now"), 1);
      LockHold mine = lock->try_acquire_hold({.wait = seconds(20)});
      EXPECT_TRUE(mine) << "not had once its holder let go";
    });
    env().run();
  }
}

// A leader asked to step down resigns; the next candidate leads.
TEST_P(RevocationTest, ALeaderAskedToStepDownResigns) {
  Client& leader = env().add_client();
  Client& candidate = env().add_client();
  std::atomic<bool> leading{false};
  env().spawn(leader, [&] {
    Election election = leader.election("revoke:election");
    Leadership leadership = election.campaign("old");
    RevocationWatch watch = leader.watch_release_requests(election.name());
    leading = true;
    ASSERT_TRUE(eventually(leader, [&] { return watch.token().stop_requested(); }));
    leadership.resign();
  });
  env().spawn(candidate, [&] {
    ASSERT_TRUE(eventually(candidate, [&] { return leading.load(); }));
    Election election = candidate.election("revoke:election");
    EXPECT_EQ(candidate.request_release("revoke:election", "maintenance on the old leader's host"), 1);
    Leadership next = election.try_campaign("new", {.wait = seconds(20)});
    ASSERT_TRUE(next);
    EXPECT_EQ(election.leader()->value, "new");
  });
  env().run();
}

TEST_P(RevocationTest, BadNamesAndReasonsAreRefusedAndPrefixesApply) {
  Client& client = env().add_client();
  Client& prefixed = env().add_client(ClientOptions{.key_prefix = "app1:"});
  env().spawn(client, [&] {
    EXPECT_THROW((void)client.request_release(""), InvalidArgumentError);
    EXPECT_THROW((void)client.watch_release_requests(""), InvalidArgumentError);
    EXPECT_THROW((void)client.request_release("revoke:x", std::string(kMaxReleaseReasonBytes + 1, 'r')),
                 InvalidArgumentError);
    RevocationWatch watch = prefixed.watch_release_requests("revoke:prefixed");
    EXPECT_EQ(client.request_release("revoke:prefixed"), 0) << "another key: app1:revoke:prefixed is watched";
    EXPECT_EQ(client.request_release("app1:revoke:prefixed"), 1);
    EXPECT_EQ(prefixed.request_release("revoke:prefixed"), 1);
    RevocationWatch empty;
    EXPECT_FALSE(empty.token().stop_possible());
  });
  env().run();
}

INSTANTIATE_TEST_SUITE_P(Environments, RevocationTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
