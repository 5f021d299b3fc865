// The read-write lock (Redisson RReadWriteLock layout): readers share it, a
// writer holds it alone, both halves are reentrant, write -> read downgrade
// works, read -> write upgrade is refused at once, and the keys are
// Redisson's. Run in simulation and against a real redis-server.

#include "turnstile/read_write_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "lock_environment.h"
#include "peak_count.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/key_layout.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

class ReadWriteLockTest : public LockTest {};

TEST_P(ReadWriteLockTest, ReadersShareItAndAWriterWaitsForThemAll) {
  Client& alice = env().add_client();
  Client& bob = env().add_client();
  Client& carol = env().add_client();
  env().spawn(alice, [&] {
    ReadWriteLock mine = alice.read_write_lock("catalog");
    ASSERT_TRUE(mine.read().try_lock());
    ReadWriteLock theirs = bob.read_write_lock("catalog");
    ReadWriteLock writer = carol.read_write_lock("catalog");
    // bob's and carol's calls on alice's task: owners are "<their uuid>:<this task>".
    EXPECT_TRUE(theirs.read().try_lock());
    EXPECT_FALSE(writer.write().try_lock());
    mine.read().unlock();
    EXPECT_FALSE(writer.write().try_lock());  // bob still reads
    theirs.read().unlock();
    EXPECT_EQ(inspect({"EXISTS", "catalog"}), Reply::integer(0));
    ASSERT_TRUE(writer.write().try_lock());
    EXPECT_FALSE(mine.read().try_lock());  // a writer excludes readers
    EXPECT_FALSE(theirs.write().try_lock());
    writer.write().unlock();
    EXPECT_TRUE(mine.read().try_lock());
    mine.read().unlock();
  });
  env().run();
}

TEST_P(ReadWriteLockTest, KeyLayoutMatchesRedisson) {
  Client& alice = env().add_client();
  env().spawn(alice, [&] {
    ReadWriteLock lock = alice.read_write_lock("docs");
    const std::string owner = alice.current_owner();
    ASSERT_TRUE(lock.read().try_lock({.wait = {}, .lease = seconds(10), .stop = {}}));
    ASSERT_TRUE(lock.read().try_lock({.wait = {}, .lease = seconds(20), .stop = {}}));
    EXPECT_EQ(inspect({"HGET", "docs", "mode"}), Reply::bulk("read"));
    EXPECT_EQ(inspect({"HGET", "docs", owner}), Reply::bulk("2"));
    const std::string timeouts = "{docs}:" + owner + ":rwlock_timeout";
    EXPECT_EQ(key_layout(Flavor::read_write, "docs").read_timeouts(owner), timeouts);
    const std::int64_t first = inspect({"PTTL", timeouts + ":1"}).as_integer();
    const std::int64_t second = inspect({"PTTL", timeouts + ":2"}).as_integer();
    EXPECT_GT(first, 5'000);
    EXPECT_LE(first, 10'000);
    EXPECT_GT(second, 15'000);
    EXPECT_LE(second, 20'000);
    // The hash lives as long as its longest read hold.
    EXPECT_GT(inspect({"PTTL", "docs"}).as_integer(), 15'000);
    lock.read().unlock();
    EXPECT_EQ(inspect({"EXISTS", timeouts + ":2"}), Reply::integer(0));
    lock.read().unlock();
    EXPECT_EQ(inspect({"EXISTS", "docs", timeouts + ":1"}), Reply::integer(0));

    ASSERT_TRUE(lock.write().try_lock({.wait = {}, .lease = seconds(10), .stop = {}}));
    EXPECT_EQ(inspect({"HGET", "docs", "mode"}), Reply::bulk("write"));
    EXPECT_EQ(inspect({"HGET", "docs", owner + ":write"}), Reply::bulk("1"));
    EXPECT_EQ(key_layout(Flavor::read_write, "docs").channel, "redisson_rwlock:{docs}");
    lock.write().unlock();
    EXPECT_EQ(inspect({"EXISTS", "docs"}), Reply::integer(0));
  });
  env().run();
}

TEST_P(ReadWriteLockTest, BothHalvesAreReentrantAndAWriterMayDowngrade) {
  Client& alice = env().add_client();
  Client& bob = env().add_client();
  env().spawn(alice, [&] {
    ReadWriteLock lock = alice.read_write_lock("doc");
    ReadWriteLock other = bob.read_write_lock("doc");
    lock.write().lock();
    lock.write().lock();
    EXPECT_EQ(lock.write().hold_count(), 2);
    lock.read().lock();  // downgrade: the writer reads too
    EXPECT_EQ(lock.read().hold_count(), 1);
    lock.write().unlock();
    lock.write().unlock();
    // Still reading, now in read mode: others may read, nobody may write.
    EXPECT_EQ(inspect({"HGET", "doc", "mode"}), Reply::bulk("read"));
    EXPECT_TRUE(lock.read().is_held_by_current_thread());
    EXPECT_FALSE(other.write().try_lock());
    EXPECT_TRUE(other.read().try_lock());
    other.read().unlock();
    lock.read().unlock();
    EXPECT_EQ(inspect({"EXISTS", "doc"}), Reply::integer(0));
    EXPECT_THROW(lock.read().unlock(), NotOwnerError);
    EXPECT_THROW(lock.write().unlock(), NotOwnerError);
  });
  env().run();
}

TEST_P(ReadWriteLockTest, UpgradeIsRefusedAtOnceNotADeadlock) {
  Client& alice = env().add_client();
  env().spawn(alice, [&] {
    ReadWriteLock lock = alice.read_write_lock("up");
    lock.read().lock();
    EXPECT_THROW(lock.write().lock(), InvalidArgumentError);
    EXPECT_THROW((void)lock.write().try_lock({.wait = seconds(5), .lease = {}, .stop = {}}), InvalidArgumentError);
    EXPECT_EQ(inspect({"HGET", "up", "mode"}), Reply::bulk("read"));
    lock.read().unlock();
    EXPECT_TRUE(lock.write().try_lock());
    lock.write().unlock();
  });
  env().run();
}

// A plain lock and a read-write lock of one name exclude each other and
// wait for each other (`turnstile run NAME`, `-x`, `-s`): neither is
// another kind of value to the other. force_unlock() deletes a lock of its
// own shape only.
TEST_P(ReadWriteLockTest, APlainLockAtTheNameExcludesBothHalvesAndTheOtherWayRound) {
  Client& alice = env().add_client();
  env().spawn(alice, [&] {
    ReentrantLock plain = alice.lock("shared-name");
    plain.lock();
    ReadWriteLock lock = alice.read_write_lock("shared-name");
    EXPECT_FALSE(lock.read().try_lock());
    EXPECT_FALSE(lock.write().try_lock());
    EXPECT_THROW((void)lock.force_unlock(), WrongTypeError);
    EXPECT_EQ(inspect({"HLEN", "shared-name"}), Reply::integer(1));  // untouched
    plain.unlock();
    lock.read().lock();
    EXPECT_FALSE(plain.try_lock());  // and the other way round: readers, its own task's too
    lock.read().unlock();
    lock.write().lock();
    EXPECT_FALSE(plain.try_lock());  // and a writer
    EXPECT_THROW((void)plain.force_unlock(), WrongTypeError);
    lock.write().unlock();
    EXPECT_TRUE(plain.try_lock());
    plain.unlock();
  });
  env().run();
}

// ...and a release of either wakes a waiter of the other: a reader waits
// on a plain hold, then the plain lock on a writer, each holding a 30 s
// lease it releases within a second, and each waiter gets in at once.
TEST_P(ReadWriteLockTest, AReleaseOfEitherWakesAWaiterOfTheOther) {
  TURNSTILE_SIM_ONLY();
  Client& plain_holder = env().add_client();
  Client& reader = env().add_client();
  Client& writer = env().add_client();
  Duration reader_waited{};
  Duration plain_waited{};
  env().spawn(plain_holder, [&] {
    ReentrantLock plain = plain_holder.lock("mixed");
    plain.lock();
    plain_holder.runtime().sleep_for(seconds(1));
    plain.unlock();
    plain_holder.runtime().sleep_for(milliseconds(500));
    const Instant asked = plain_holder.runtime().now();
    ASSERT_TRUE(plain.try_lock({.wait = seconds(60), .lease = {}, .stop = {}}));  // the writer holds it
    plain_waited = plain_holder.runtime().now() - asked;
    plain.unlock();
  });
  env().spawn(reader, [&] {
    reader.runtime().sleep_for(milliseconds(100));
    ReadWriteLock lock = reader.read_write_lock("mixed");
    const Instant asked = reader.runtime().now();
    ASSERT_TRUE(lock.read().try_lock({.wait = seconds(60), .lease = {}, .stop = {}}));
    reader_waited = reader.runtime().now() - asked;
    lock.read().unlock();
  });
  env().spawn(writer, [&] {
    writer.runtime().sleep_for(seconds(1) + milliseconds(200));
    ReadWriteLock lock = writer.read_write_lock("mixed");
    ASSERT_TRUE(lock.write().try_lock({.wait = seconds(60), .lease = {}, .stop = {}}));  // free by then
    writer.runtime().sleep_for(seconds(1));
    lock.write().unlock();
  });
  env().run();
  EXPECT_GT(reader_waited, milliseconds(800));  // it did wait for the plain hold (0.1 s to 1 s)...
  EXPECT_LT(reader_waited, seconds(2));         // ...and was woken by its release, not its 30 s lease
  EXPECT_GT(plain_waited, milliseconds(500));   // the plain lock waited for the writer (1.5 s to 2.2 s)...
  EXPECT_LT(plain_waited, seconds(2));          // ...and was woken by the write release
}

TEST_P(ReadWriteLockTest, ForceUnlockDeletesItInAnyModeTheHalvesOnlyInTheirs) {
  Client& alice = env().add_client();
  Client& admin = env().add_client();
  env().spawn(alice, [&] {
    ReadWriteLock lock = alice.read_write_lock("forced");
    lock.write().lock();
    ReadWriteLock other = admin.read_write_lock("forced");
    EXPECT_FALSE(other.read().force_unlock());  // not in read mode
    EXPECT_EQ(inspect({"EXISTS", "forced"}), Reply::integer(1));
    EXPECT_TRUE(other.force_unlock());
    EXPECT_EQ(inspect({"EXISTS", "forced"}), Reply::integer(0));
    EXPECT_NO_THROW(lock.write().unlock());  // lost: told, unlock() returns (lock.h)
  });
  env().run();
}

TEST_P(ReadWriteLockTest, AWriterReleaseLetsEveryWaitingReaderIn) {
  TURNSTILE_SIM_ONLY();
  Client& writer = env().add_client();
  Client& first = env().add_client();
  Client& second = env().add_client();
  int readers_in = 0;
  env().spawn(writer, [&] {
    ReadWriteLock lock = writer.read_write_lock("board");
    lock.write().lock();
    writer.runtime().sleep_for(seconds(5));
    lock.write().unlock();
  });
  for (Client* reader : {&first, &second}) {
    env().spawn(*reader, [&, reader] {
      reader->runtime().sleep_for(seconds(1));
      ReadWriteLock lock = reader->read_write_lock("board");
      ASSERT_TRUE(lock.read().try_lock({.wait = seconds(10), .lease = {}, .stop = {}}));
      ++readers_in;
      reader->runtime().sleep_for(seconds(1));  // both inside together
      EXPECT_EQ(readers_in, 2);
      lock.read().unlock();
    });
  }
  env().run();
  EXPECT_EQ(readers_in, 2);
}

TEST_P(ReadWriteLockTest, TheWatchdogKeepsReadHoldsAndACrashedReaderBlocksOnlyItsLease) {
  TURNSTILE_SIM_ONLY();
  Client& reader = env().add_client();
  Client& writer = env().add_client();
  env().spawn(reader, [&] {
    ReadWriteLock lock = reader.read_write_lock("report");
    lock.read().lock();
    reader.runtime().sleep_for(minutes(3));  // nine renewals of a 30 s lease
    EXPECT_TRUE(lock.read().is_held_by_current_thread());
    EXPECT_EQ(inspect({"EXISTS", "{report}:" + reader.current_owner() + ":rwlock_timeout:1"}), Reply::integer(1));
    reader.runtime().sleep_for(minutes(10));  // crashed before this ends
  });
  env().spawn(writer, [&] {
    ReadWriteLock lock = writer.read_write_lock("report");
    writer.runtime().sleep_for(minutes(4));
    EXPECT_FALSE(lock.write().try_lock());
    env().crash(reader);
    const Instant crashed = writer.runtime().now();
    ASSERT_TRUE(lock.write().try_lock({.wait = minutes(2), .lease = {}, .stop = {}}));
    // At most one watchdog timeout (30 s) after the crash.
    EXPECT_LE(writer.runtime().now() - crashed, seconds(31));
    lock.write().unlock();
  });
  env().run();
}

// A reader that leaves while others still read has let go of its own hold:
// the watchdog forgets it (no false "lost" later), and so does the lock.
TEST_P(ReadWriteLockTest, AReaderLeavingBeforeTheOthersLetsGoOfItsHoldForGood) {
  TURNSTILE_SIM_ONLY();
  Client& alice = env().add_client();
  Client& bob = env().add_client();
  int lost = 0;
  env().spawn(alice, [&] {
    ReadWriteLock lock = alice.read_write_lock("renewed");
    lock.read().set_lost_handler([&](const LockLost&) { ++lost; });
    lock.read().lock();
    alice.runtime().sleep_for(seconds(5));
    lock.read().unlock();  // bob still reads
    EXPECT_EQ(lock.read().hold_count(), 0);
    EXPECT_FALSE(lock.read().is_held_by_current_thread());
    EXPECT_THROW(lock.read().unlock(), NotOwnerError);
    alice.runtime().sleep_for(minutes(2));  // a dozen renewal rounds
    // Taken again, it is one hold, not two.
    lock.read().lock();
    EXPECT_EQ(lock.read().hold_count(), 1);
    lock.read().unlock();
  });
  env().spawn(bob, [&] {
    ReadWriteLock lock = bob.read_write_lock("renewed");
    lock.read().set_lost_handler([&](const LockLost&) { ++lost; });
    bob.runtime().sleep_for(seconds(1));
    lock.read().lock();
    bob.runtime().sleep_for(minutes(1));
    lock.read().unlock();
  });
  env().run();
  EXPECT_EQ(lost, 0);
}

// A read hold of its own the server has beyond what the task believes (a
// restart brought back a hold whose unlock it lost with the server's last
// writes): the unlock of its last hold gives that back too. Kept, the next
// hold of the same task would stack on it and its renewals re-arm it, for
// as long as the task keeps reading, every writer kept out.
TEST_P(ReadWriteLockTest, AnUnlockGivesBackReadHoldsTheTaskDoesNotKnowOf) {
  TURNSTILE_SIM_ONLY();
  Client& alice = env().add_client();
  env().spawn(alice, [&] {
    ReadWriteLock lock = alice.read_write_lock("feed");
    lock.read().lock();
    const std::string owner = alice.current_owner();
    // What an earlier hold whose unlock was lost leaves.
    inspect({"HINCRBY", "feed", owner, "1"});
    inspect({"SET", "{feed}:" + owner + ":rwlock_timeout:2", "1", "PX", "30000"});
    lock.read().unlock();
    EXPECT_EQ(inspect({"EXISTS", "feed"}), Reply::integer(0));
    EXPECT_EQ(inspect({"EXISTS", "{feed}:" + owner + ":rwlock_timeout:1"}), Reply::integer(0));
    EXPECT_TRUE(lock.write().try_lock());
    lock.write().unlock();
  });
  env().run();
}

// A read field none of whose timeout keys is left outlived its lease (a
// reader that stopped renewing while others kept the lock, a hold a
// restart brought back): the next read unlock drops it, so that readers
// coming and going cannot keep it for good.
TEST_P(ReadWriteLockTest, AReadFieldWithoutTimeoutKeysIsDroppedByTheNextReadUnlock) {
  TURNSTILE_SIM_ONLY();
  Client& alice = env().add_client();
  env().spawn(alice, [&] {
    ReadWriteLock lock = alice.read_write_lock("feed");
    lock.read().lock();
    inspect({"HSET", "feed", "gone:7", "1"});  // no "{feed}:gone:7:rwlock_timeout:1"
    lock.read().lock();
    lock.read().unlock();  // alice still reads
    EXPECT_EQ(inspect({"HEXISTS", "feed", "gone:7"}), Reply::integer(0));
    EXPECT_EQ(inspect({"HGET", "feed", alice.current_owner()}), Reply::bulk("1"));
    lock.read().unlock();
    EXPECT_EQ(inspect({"EXISTS", "feed"}), Reply::integer(0));
  });
  env().run();
}

// A write hold the task does not know of (the reply of its write
// acquisition lost in transit) lets it read no sooner than anyone else:
// reading through it would re-arm it at every read, for good.
TEST_P(ReadWriteLockTest, AWriteHoldTheTaskDoesNotKnowOfIsNoDowngrade) {
  TURNSTILE_SIM_ONLY();
  Client& alice = env().add_client();
  env().spawn(alice, [&] {
    ReadWriteLock lock = alice.read_write_lock("phantom");
    const std::string owner = alice.current_owner();
    (void)inspect({"HSET", "phantom", "mode", "write", owner + ":write", "1"});
    (void)inspect({"PEXPIRE", "phantom", "10000"});
    const Instant asked = alice.runtime().now();
    ASSERT_TRUE(lock.read().try_lock({.wait = seconds(30), .lease = {}, .stop = {}}));
    EXPECT_GE(alice.runtime().now() - asked, seconds(10));  // only once it lapsed
    EXPECT_EQ(inspect({"HGET", "phantom", owner + ":write"}), Reply::nil());
    lock.read().unlock();
  });
  env().run();
}

// Fleet-wide wake-ups (lua/lib/read_write_wake.lua), in both environments:
// every waiter is another process (Client), and the default 30 s lease
// would keep a waiter that missed its wake-up asleep far longer than the
// bound here. A write release lets both waiting readers in together, the
// last read release lets the waiting writer in; the registry keeps a
// record of each turnstile hold while it is held, none after.
TEST_P(ReadWriteLockTest, ReleasesWakeTheWaitersOfOtherProcessesOnTheirOwnChannels) {
  Client& holder = env().add_client();
  Client& first = env().add_client();
  Client& second = env().add_client();
  Client& writer = env().add_client();
  const std::string registry = key_layout(Flavor::read_write, "fleet-rw").wake_registry;
  constexpr auto kWoken = seconds(5);  // far below the 30 s lease
  PeakCount readers;
  std::atomic<bool> writer_in = false;
  env().spawn(holder, [&] {
    ReadWriteLock lock = holder.read_write_lock("fleet-rw");
    lock.write().lock();
    // Taken when nobody waited: no record in the registry; its identity
    // says its release wakes the registry (lua/lib/holder_identity.lua).
    EXPECT_EQ(inspect({"EXISTS", registry}).as_integer(), 0);
    const std::string side = key_layout(Flavor::read_write, "fleet-rw").holder_identity;
    EXPECT_NE(inspect({"GET", side}).as_string().find("\nwakes=registry"), std::string::npos);
    holder.runtime().sleep_for(milliseconds(300));
    lock.write().unlock();
  });
  for (Client* reader : {&first, &second}) {
    env().spawn(*reader, [&, reader] {
      reader->runtime().sleep_for(milliseconds(50));
      ReadWriteLock lock = reader->read_write_lock("fleet-rw");
      const Instant asked = reader->runtime().now();
      ASSERT_TRUE(lock.read().try_lock({.wait = seconds(20), .lease = {}, .stop = {}}));
      EXPECT_LT(reader->runtime().now() - asked, kWoken);
      readers.enter();
      // Both inside together: it stays until the other is in too (a slow
      // machine may wake the second reader late), then 300 ms more.
      for (int i = 0; i < 500 && readers.most() < 2; ++i) reader->runtime().sleep_for(milliseconds(10));
      reader->runtime().sleep_for(milliseconds(300));
      EXPECT_FALSE(writer_in.load());
      readers.leave();
      lock.read().unlock();
    });
  }
  env().spawn(writer, [&] {
    writer.runtime().sleep_for(milliseconds(100));
    ReadWriteLock lock = writer.read_write_lock("fleet-rw");
    const Instant asked = writer.runtime().now();
    ASSERT_TRUE(lock.write().try_lock({.wait = seconds(20), .lease = {}, .stop = {}}));
    writer_in = true;
    EXPECT_EQ(readers.inside(), 0);
    EXPECT_LT(writer.runtime().now() - asked, 2 * kWoken + milliseconds(600));
    lock.write().unlock();
  });
  env().run();
  EXPECT_EQ(readers.most(), 2);
  EXPECT_TRUE(writer_in.load());
  EXPECT_EQ(inspect({"ZCOUNT", registry, "0", "0"}), Reply::integer(0));  // no hold recorded
}

INSTANTIATE_TEST_SUITE_P(Environments, ReadWriteLockTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
