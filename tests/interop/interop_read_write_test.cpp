// The read-write lock beside Redisson's RReadWriteLock (played at the Redis
// level: redisson_client.h, support/redisson_scripts.h) on a real
// redis-server: readers of both libraries share it, a writer of either
// keeps out everyone of the other, releases of either wake the other's
// waiters ("0" one, "1" all), downgrades of either keep the other's
// writers out, each library's read release reads the other's timeout keys,
// reentrancy counts mix, and a Redisson force unlock of a half ends a
// turnstile hold in that mode. Where Redisson's own arithmetic shortens a
// turnstile holder's ttl, the test asserts what happens (docs/redisson-interop.md).
//
// Waiters of both sides are woken by messages: the played Redisson waiter
// waits for messages only, and turnstile's would retry on its own only
// after the holder's long lease (120 s), far beyond the deadline it is
// given here.

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "interop_fixture.h"
#include "turnstile/errors.h"
#include "turnstile/read_write_lock.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::int64_t kLongLeaseMs = 120'000;
constexpr Duration kLongLease = seconds(120);

class InteropReadWriteTest : public InteropTest {
 protected:
  std::int64_t pttl(const std::string& key) { return raw({"PTTL", key}).as_integer(); }
  Reply field(const std::string& name, const std::string& name_of_field) { return raw({"HGET", name, name_of_field}); }
  bool exists(const std::string& key) { return raw({"EXISTS", key}) == Reply::integer(1); }

  // A hold of the read half with a fixed lease, no wait.
  static bool read_with_lease(ReadWriteLock& lock, Duration lease) {
    return lock.read().try_lock({.wait = Duration::zero(), .lease = lease});
  }

  // `body` on a thread of its own (another turnstile owner), its result
  // (or exception) back here.
  template <typename Body>
  static auto elsewhere(Body body) {
    return std::async(std::launch::async, std::move(body)).get();
  }
  // Whether a turnstile task other than this one may take the half now.
  bool other_task_can_write(const std::string& name) {
    return elsewhere([&] {
      ReadWriteLock lock = client().read_write_lock(name);
      if (!lock.write().try_lock()) return false;
      lock.write().unlock();
      return true;
    });
  }
  bool other_task_can_read(const std::string& name) {
    return elsewhere([&] {
      ReadWriteLock lock = client().read_write_lock(name);
      if (!lock.read().try_lock()) return false;
      lock.read().unlock();
      return true;
    });
  }
};

TEST_F(InteropReadWriteTest, ReadersOfBothLibrariesShareTheLock) {
  const std::string name = "interop:rw:share";
  const std::string reader = redisson().owner(1);
  const std::string writer = redisson().owner(2);
  RedissonReadWriteLock theirs(redisson(), name);
  ReadWriteLock mine = client().read_write_lock(name);
  const std::string me = mine.read().current_owner();

  // turnstile first, then Redisson.
  ASSERT_TRUE(read_with_lease(mine, seconds(60)));
  ASSERT_FALSE(theirs.try_read(reader, kLongLeaseMs).has_value());
  EXPECT_EQ(field(name, "mode"), Reply::bulk("read"));
  EXPECT_EQ(field(name, me), Reply::bulk("1"));
  EXPECT_EQ(field(name, reader), Reply::bulk("1"));
  EXPECT_GT(pttl(name), 60'000);  // the longer of the two leases
  // Nobody writes while they read.
  EXPECT_TRUE(theirs.try_write(writer, kLongLeaseMs).has_value());
  EXPECT_FALSE(other_task_can_write(name));
  EXPECT_TRUE(other_task_can_read(name));
  EXPECT_TRUE(mine.read().is_locked());

  Mailbox released(redisson().backend(), theirs.channel());
  mine.read().unlock();  // Redisson still reads
  EXPECT_TRUE(exists(name));
  EXPECT_EQ(field(name, me), Reply::nil());
  EXPECT_FALSE(exists(theirs.timeout_key(me, 1)));
  EXPECT_EQ(theirs.read_unlock(reader), Reply::integer(1));  // the last reader
  EXPECT_FALSE(exists(name));
  EXPECT_EQ(released.wait_beyond(0), 1);  // only the last release publishes

  // Redisson first, then turnstile; Redisson leaves first.
  ASSERT_FALSE(theirs.try_read(reader, 60'000).has_value());
  ASSERT_TRUE(read_with_lease(mine, kLongLease));
  EXPECT_GT(pttl(name), 60'000);
  EXPECT_TRUE(theirs.try_write(writer, kLongLeaseMs).has_value());
  EXPECT_EQ(theirs.read_unlock(reader), Reply::integer(0));  // turnstile still reads
  EXPECT_GT(pttl(name), 60'000);                             // Redisson found turnstile's 120 s key
  EXPECT_TRUE(mine.read().is_locked());
  mine.read().unlock();
  EXPECT_FALSE(exists(name));
  EXPECT_EQ(released.wait_beyond(1), 2);
}

TEST_F(InteropReadWriteTest, RedissonWriterKeepsTurnstileReadersAndWritersOut) {
  const std::string name = "interop:rw:redisson-writes";
  const std::string writer = redisson().owner(1);
  RedissonReadWriteLock theirs(redisson(), name);
  ReadWriteLock mine = client().read_write_lock(name);

  ASSERT_FALSE(theirs.try_write(writer, kLongLeaseMs).has_value());
  EXPECT_EQ(field(name, "mode"), Reply::bulk("write"));
  EXPECT_EQ(field(name, writer + ":write"), Reply::bulk("1"));
  EXPECT_FALSE(mine.read().try_lock());
  EXPECT_FALSE(mine.read().try_lock({.wait = milliseconds(200), .lease = std::nullopt}));
  EXPECT_FALSE(mine.write().try_lock());
  EXPECT_FALSE(mine.write().try_lock({.wait = milliseconds(200), .lease = std::nullopt}));
  EXPECT_TRUE(mine.write().is_locked());
  EXPECT_THROW(mine.read().unlock(), NotOwnerError);
  EXPECT_THROW(mine.write().unlock(), NotOwnerError);
  EXPECT_EQ(field(name, writer + ":write"), Reply::bulk("1"));  // untouched

  EXPECT_EQ(theirs.write_unlock(writer), Reply::integer(1));
  EXPECT_FALSE(exists(name));
  ASSERT_TRUE(mine.read().try_lock());
  mine.read().unlock();
}

TEST_F(InteropReadWriteTest, TurnstileWriterKeepsRedissonReadersAndWritersOut) {
  const std::string name = "interop:rw:turnstile-writes";
  const std::string reader = redisson().owner(1);
  const std::string writer = redisson().owner(2);
  RedissonReadWriteLock theirs(redisson(), name);
  ReadWriteLock mine = client().read_write_lock(name);

  ASSERT_TRUE(mine.write().try_lock());
  const std::optional<std::int64_t> ttl = theirs.try_read(reader, kLongLeaseMs);
  ASSERT_TRUE(ttl.has_value());
  EXPECT_GT(*ttl, 0);
  EXPECT_TRUE(theirs.try_write(writer, kLongLeaseMs).has_value());
  EXPECT_FALSE(exists(theirs.timeout_key(reader, 1)));
  // Not theirs to release.
  EXPECT_TRUE(theirs.read_unlock(reader).is_nil());
  EXPECT_TRUE(theirs.write_unlock(writer).is_nil());
  EXPECT_EQ(field(name, "mode"), Reply::bulk("write"));
  EXPECT_TRUE(mine.write().is_held_by_current_thread());

  mine.write().unlock();
  EXPECT_FALSE(exists(name));
  ASSERT_FALSE(theirs.try_read(reader, kLongLeaseMs).has_value());
  EXPECT_EQ(theirs.read_unlock(reader), Reply::integer(1));
}

TEST_F(InteropReadWriteTest, RedissonReadReleaseWakesAWaitingTurnstileWriter) {
  const std::string name = "interop:rw:wake-turnstile-writer";
  const std::string reader = redisson().owner(1);
  RedissonReadWriteLock theirs(redisson(), name);
  ASSERT_FALSE(theirs.try_read(reader, kLongLeaseMs).has_value());
  std::atomic<bool> acquired = false;
  spawn("turnstile writer", [&] {
    ReadWriteLock lock = client().read_write_lock(name);
    if (!lock.write().try_lock({.wait = seconds(60), .lease = std::nullopt})) throw std::runtime_error("not acquired");
    acquired = true;
    lock.write().unlock();
  });
  EXPECT_TRUE(eventually([&] { return subscribers(theirs.channel()) >= 1; }));
  Mailbox released(redisson().backend(), theirs.channel());
  EXPECT_FALSE(acquired);
  EXPECT_EQ(theirs.read_unlock(reader), Reply::integer(1));
  // The reader's ttl was 120 s: taken well before it, the writer was woken
  // by the "0".
  EXPECT_GE(released.wait_beyond(0), 1);
  EXPECT_TRUE(eventually([&] { return acquired.load(); }));
  join_all();
  EXPECT_FALSE(exists(name));
}

TEST_F(InteropReadWriteTest, TurnstileReadReleaseWakesOneWaitingRedissonWriter) {
  const std::string name = "interop:rw:wake-redisson-writer";
  const std::string first = redisson().owner(1);
  const std::string second = redisson().owner(2);
  RedissonReadWriteLock theirs(redisson(), name);
  ReadWriteLock mine = client().read_write_lock(name);
  ASSERT_TRUE(read_with_lease(mine, kLongLease));

  std::atomic<int> writing = 0;
  for (const std::string& owner : {first, second}) {
    spawn("redisson writer " + owner, [&, owner] {
      if (!theirs.write_lock(owner, kLongLeaseMs)) throw std::runtime_error("not acquired");
      ++writing;
    });
  }
  EXPECT_TRUE(eventually([&] { return theirs.sleeping() == 2; }));
  mine.read().unlock();  // "0": wakes one of them
  EXPECT_TRUE(eventually([&] { return writing.load() == 1; }));
  EXPECT_EQ(theirs.messages("0"), 1);
  EXPECT_EQ(theirs.wakeups(), 1);
  EXPECT_TRUE(eventually([&] { return theirs.sleeping() == 1; }));  // the other sleeps on
  EXPECT_EQ(writing.load(), 1);
  // The winner's write release ("1") wakes the other.
  const std::string winner = field(name, first + ":write").is_nil() ? second : first;
  const std::string other = winner == first ? second : first;
  EXPECT_EQ(theirs.write_unlock(winner), Reply::integer(1));
  EXPECT_TRUE(eventually([&] { return writing.load() == 2; }));
  join_all();
  EXPECT_EQ(field(name, other + ":write"), Reply::bulk("1"));
  EXPECT_EQ(theirs.write_unlock(other), Reply::integer(1));
  EXPECT_FALSE(exists(name));
}

TEST_F(InteropReadWriteTest, RedissonWriteReleaseWakesEveryWaitingTurnstileReader) {
  const std::string name = "interop:rw:wake-turnstile-readers";
  const std::string writer = redisson().owner(1);
  RedissonReadWriteLock theirs(redisson(), name);
  ASSERT_FALSE(theirs.try_write(writer, kLongLeaseMs).has_value());
  std::atomic<int> reading = 0;
  std::atomic<bool> done = false;
  for (int reader = 0; reader < 2; ++reader) {
    spawn("turnstile reader " + std::to_string(reader), [&] {
      ReadWriteLock lock = client().read_write_lock(name);
      if (!lock.read().try_lock({.wait = seconds(60), .lease = std::nullopt})) {
        throw std::runtime_error("not acquired");
      }
      ++reading;
      // Held together until the test has seen both.
      if (!eventually([&] { return done.load(); })) throw std::runtime_error("the test never finished");
      lock.read().unlock();
    });
  }
  EXPECT_TRUE(eventually([&] { return subscribers(theirs.channel()) >= 1; }));
  Mailbox released(redisson().backend(), theirs.channel());
  EXPECT_EQ(reading.load(), 0);
  EXPECT_EQ(theirs.write_unlock(writer), Reply::integer(1));
  // One "1" lets both in: they read together.
  EXPECT_TRUE(eventually([&] { return reading.load() == 2; }));
  EXPECT_EQ(released.wait_beyond(0), 1);
  EXPECT_EQ(field(name, "mode"), Reply::bulk("read"));
  EXPECT_EQ(raw({"HLEN", name}), Reply::integer(3));  // mode + two readers
  done = true;
  join_all();
  EXPECT_FALSE(exists(name));
}

TEST_F(InteropReadWriteTest, TurnstileWriteReleaseWakesEveryWaitingRedissonReader) {
  const std::string name = "interop:rw:wake-redisson-readers";
  const std::string first = redisson().owner(1);
  const std::string second = redisson().owner(2);
  RedissonReadWriteLock theirs(redisson(), name);
  ReadWriteLock mine = client().read_write_lock(name);
  ASSERT_TRUE(mine.write().try_lock({.wait = Duration::zero(), .lease = kLongLease}));
  std::atomic<int> reading = 0;
  for (const std::string& owner : {first, second}) {
    spawn("redisson reader " + owner, [&, owner] {
      if (!theirs.read_lock(owner, kLongLeaseMs)) throw std::runtime_error("not acquired");
      ++reading;
    });
  }
  EXPECT_TRUE(eventually([&] { return theirs.sleeping() == 2; }));
  mine.write().unlock();  // "1": wakes both
  EXPECT_TRUE(eventually([&] { return reading.load() == 2; }));
  join_all();
  EXPECT_EQ(theirs.messages("1"), 1);
  EXPECT_EQ(theirs.messages("0"), 0);
  EXPECT_EQ(theirs.wakeups(), 2);
  EXPECT_EQ(field(name, first), Reply::bulk("1"));
  EXPECT_EQ(field(name, second), Reply::bulk("1"));
  EXPECT_EQ(theirs.read_unlock(first), Reply::integer(0));
  EXPECT_EQ(theirs.read_unlock(second), Reply::integer(1));
}

TEST_F(InteropReadWriteTest, RedissonDowngradeKeepsTurnstileWritersOut) {
  const std::string name = "interop:rw:redisson-downgrade";
  const std::string owner = redisson().owner(1);
  RedissonReadWriteLock theirs(redisson(), name);
  ReadWriteLock mine = client().read_write_lock(name);

  ASSERT_FALSE(theirs.try_write(owner, kLongLeaseMs).has_value());
  ASSERT_FALSE(theirs.try_read(owner, 60'000).has_value());  // its own read in write mode
  EXPECT_EQ(field(name, "mode"), Reply::bulk("write"));
  EXPECT_EQ(field(name, owner), Reply::bulk("1"));
  EXPECT_FALSE(mine.read().try_lock());  // still write mode
  EXPECT_FALSE(mine.write().try_lock());

  Mailbox released(redisson().backend(), theirs.channel());
  EXPECT_EQ(theirs.write_unlock(owner), Reply::integer(1));  // now reading only
  EXPECT_EQ(field(name, "mode"), Reply::bulk("read"));
  EXPECT_GT(pttl(name), 60'000);  // unchanged: the write's 120 s
  EXPECT_FALSE(mine.write().try_lock());
  EXPECT_FALSE(mine.write().try_lock({.wait = milliseconds(200), .lease = std::nullopt}));
  ASSERT_TRUE(read_with_lease(mine, seconds(30)));  // read mode: turnstile reads beside it
  EXPECT_FALSE(other_task_can_write(name));

  EXPECT_EQ(theirs.read_unlock(owner), Reply::integer(0));  // turnstile still reads
  const std::int64_t left = pttl(name);
  EXPECT_GT(left, 0);
  EXPECT_LE(left, 30'000);  // Redisson's release: the ttl of turnstile's 30 s read hold
  EXPECT_FALSE(other_task_can_write(name));
  mine.read().unlock();
  EXPECT_FALSE(exists(name));
  EXPECT_EQ(released.wait_beyond(0), 1);  // the downgrade published nothing; the last read release did
}

TEST_F(InteropReadWriteTest, TurnstileDowngradeKeepsRedissonWritersOut) {
  const std::string name = "interop:rw:turnstile-downgrade";
  const std::string owner = redisson().owner(1);
  RedissonReadWriteLock theirs(redisson(), name);
  ReadWriteLock mine = client().read_write_lock(name);

  ASSERT_TRUE(mine.write().try_lock({.wait = Duration::zero(), .lease = kLongLease}));
  ASSERT_TRUE(read_with_lease(mine, seconds(20)));
  EXPECT_TRUE(theirs.try_read(owner, 10'000).has_value());
  EXPECT_TRUE(theirs.try_write(owner, 10'000).has_value());
  EXPECT_TRUE(theirs.read_unlock(owner).is_nil());
  mine.write().unlock();  // now reading only
  EXPECT_EQ(field(name, "mode"), Reply::bulk("read"));
  EXPECT_GT(pttl(name), 60'000);  // the write's lease, left as it was
  EXPECT_TRUE(theirs.try_write(owner, 10'000).has_value());

  // A Redisson reader comes and goes while turnstile reads: its release
  // sets the ttl from the read holds' keys (turnstile's 20 s), down from
  // the released write's 120 s. turnstile holds only its 20 s read now,
  // so no lease it holds is cut.
  ASSERT_FALSE(theirs.try_read(owner, 10'000).has_value());
  EXPECT_EQ(theirs.read_unlock(owner), Reply::integer(0));
  const std::int64_t left = pttl(name);
  EXPECT_GT(left, 10'000);
  EXPECT_LE(left, 20'000);
  EXPECT_TRUE(mine.read().is_held_by_current_thread());
  EXPECT_TRUE(theirs.try_write(owner, 10'000).has_value());
  mine.read().unlock();
  EXPECT_FALSE(exists(name));
}

TEST_F(InteropReadWriteTest, EachSidesReadReleaseReadsTheOthersTimeoutKeys) {
  const std::string name = "interop:rw:timeouts";
  const std::string reader = redisson().owner(7);
  RedissonReadWriteLock theirs(redisson(), name);
  ReadWriteLock mine = client().read_write_lock(name);
  const std::string me = mine.read().current_owner();

  // turnstile's holds: keys 1 (40 s) and 2 (80 s), under Redisson's names.
  ASSERT_TRUE(read_with_lease(mine, seconds(40)));
  ASSERT_TRUE(read_with_lease(mine, seconds(80)));
  EXPECT_EQ(field(name, me), Reply::bulk("2"));
  EXPECT_GT(pttl(theirs.timeout_key(me, 1)), 30'000);
  EXPECT_LE(pttl(theirs.timeout_key(me, 1)), 40'000);
  EXPECT_GT(pttl(theirs.timeout_key(me, 2)), 70'000);
  EXPECT_LE(pttl(theirs.timeout_key(me, 2)), 80'000);
  // Redisson joins for 120 s and leaves: its release takes the longest of
  // turnstile's keys.
  ASSERT_FALSE(theirs.try_read(reader, kLongLeaseMs).has_value());
  EXPECT_GT(pttl(name), 100'000);
  EXPECT_EQ(theirs.read_unlock(reader), Reply::integer(0));
  EXPECT_GT(pttl(name), 70'000);
  EXPECT_LE(pttl(name), 80'000);

  // Redisson's holds: keys 1 (100 s) and 2 (60 s); turnstile's release of
  // its two holds takes the longest of Redisson's keys.
  ASSERT_FALSE(theirs.try_read(reader, 100'000).has_value());
  ASSERT_FALSE(theirs.try_read(reader, 60'000).has_value());
  mine.read().unlock();
  mine.read().unlock();
  EXPECT_EQ(field(name, me), Reply::nil());
  EXPECT_GT(pttl(name), 90'000);
  EXPECT_LE(pttl(name), 100'000);
  EXPECT_EQ(theirs.read_unlock(reader), Reply::integer(0));  // key 2 gone, key 1 left
  EXPECT_GT(pttl(name), 90'000);
  EXPECT_EQ(theirs.read_unlock(reader), Reply::integer(1));
  EXPECT_FALSE(exists(name));
}

TEST_F(InteropReadWriteTest, BracedNamesKeepRedissonsTagRule) {
  // A name with a '{' is its own tag: timeout keys
  // "interop:{braced}:<owner>:rwlock_timeout:<k>", channel
  // "redisson_rwlock:interop:{braced}".
  const std::string name = "interop:{braced}";
  const std::string reader = redisson().owner(1);
  RedissonReadWriteLock theirs(redisson(), name);
  ReadWriteLock mine = client().read_write_lock(name);
  const std::string me = mine.read().current_owner();
  EXPECT_EQ(mine.read().layout().channel, theirs.channel());
  EXPECT_EQ(theirs.channel(), "redisson_rwlock:interop:{braced}");
  ASSERT_TRUE(read_with_lease(mine, seconds(80)));
  EXPECT_TRUE(exists("interop:{braced}:" + me + ":rwlock_timeout:1"));
  ASSERT_FALSE(theirs.try_read(reader, kLongLeaseMs).has_value());
  EXPECT_EQ(theirs.read_unlock(reader), Reply::integer(0));
  EXPECT_GT(pttl(name), 60'000);  // Redisson found turnstile's key
  EXPECT_LE(pttl(name), 80'000);
  Mailbox released(redisson().backend(), theirs.channel());
  mine.read().unlock();
  EXPECT_EQ(released.wait_beyond(0), 1);
  EXPECT_FALSE(exists(name));
}

TEST_F(InteropReadWriteTest, ReentrancyCountsMix) {
  const std::string name = "interop:rw:reentrancy";
  const std::string first = redisson().owner(1);
  const std::string second = redisson().owner(2);
  RedissonReadWriteLock theirs(redisson(), name);
  ReadWriteLock mine = client().read_write_lock(name);
  const std::string me = mine.read().current_owner();

  ASSERT_TRUE(mine.read().try_lock());
  ASSERT_FALSE(theirs.try_read(first, kLongLeaseMs).has_value());
  ASSERT_TRUE(mine.read().try_lock());
  ASSERT_FALSE(theirs.try_read(first, kLongLeaseMs).has_value());
  ASSERT_FALSE(theirs.try_read(second, kLongLeaseMs).has_value());
  ASSERT_FALSE(theirs.try_read(first, kLongLeaseMs).has_value());
  EXPECT_EQ(field(name, me), Reply::bulk("2"));
  EXPECT_EQ(field(name, first), Reply::bulk("3"));
  EXPECT_EQ(field(name, second), Reply::bulk("1"));
  EXPECT_EQ(mine.read().hold_count(), 2);
  for (const std::int64_t k : {1, 2}) EXPECT_TRUE(exists(theirs.timeout_key(me, k)));
  for (const std::int64_t k : {1, 2, 3}) EXPECT_TRUE(exists(theirs.timeout_key(first, k)));

  Mailbox released(redisson().backend(), theirs.channel());
  EXPECT_EQ(theirs.read_unlock(first), Reply::integer(0));
  EXPECT_FALSE(exists(theirs.timeout_key(first, 3)));
  mine.read().unlock();
  EXPECT_FALSE(exists(theirs.timeout_key(me, 2)));
  EXPECT_EQ(mine.read().hold_count(), 1);
  EXPECT_EQ(theirs.read_unlock(second), Reply::integer(0));
  EXPECT_EQ(field(name, second), Reply::nil());
  EXPECT_EQ(theirs.read_unlock(first), Reply::integer(0));
  mine.read().unlock();
  EXPECT_EQ(field(name, me), Reply::nil());
  EXPECT_EQ(field(name, first), Reply::bulk("1"));
  EXPECT_FALSE(other_task_can_write(name));
  EXPECT_EQ(theirs.read_unlock(first), Reply::integer(1));
  EXPECT_FALSE(exists(name));
  EXPECT_EQ(released.wait_beyond(0), 1);

  // A Redisson writer twice, reading once (its downgrade): a reentrant
  // write adds its lease to the ttl, as Redisson's does.
  ASSERT_FALSE(theirs.try_write(first, 60'000).has_value());
  ASSERT_FALSE(theirs.try_write(first, 60'000).has_value());
  EXPECT_GT(pttl(name), 100'000);
  ASSERT_FALSE(theirs.try_read(first, 60'000).has_value());
  EXPECT_EQ(field(name, first + ":write"), Reply::bulk("2"));
  EXPECT_FALSE(mine.read().try_lock());
  EXPECT_FALSE(mine.write().try_lock());
  EXPECT_EQ(theirs.write_unlock(first), Reply::integer(0));
  EXPECT_FALSE(mine.read().try_lock());
  EXPECT_EQ(theirs.write_unlock(first), Reply::integer(1));
  ASSERT_TRUE(mine.read().try_lock());  // read mode now
  EXPECT_EQ(theirs.read_unlock(first), Reply::integer(0));
  mine.read().unlock();
  EXPECT_FALSE(exists(name));

  // A turnstile writer twice, reading once: Redisson sees the counts.
  ASSERT_TRUE(mine.write().try_lock());
  ASSERT_TRUE(mine.write().try_lock());
  ASSERT_TRUE(mine.read().try_lock());
  EXPECT_EQ(field(name, me + ":write"), Reply::bulk("2"));
  EXPECT_EQ(field(name, me), Reply::bulk("1"));
  EXPECT_TRUE(theirs.try_read(first, kLongLeaseMs).has_value());
  mine.write().unlock();
  EXPECT_TRUE(theirs.try_read(first, kLongLeaseMs).has_value());
  mine.write().unlock();
  EXPECT_EQ(field(name, "mode"), Reply::bulk("read"));
  ASSERT_FALSE(theirs.try_read(first, kLongLeaseMs).has_value());
  mine.read().unlock();
  EXPECT_EQ(theirs.read_unlock(first), Reply::integer(1));
  EXPECT_FALSE(exists(name));
}

TEST_F(InteropReadWriteTest, RedissonForceUnlockOfAHalfEndsTurnstilesHoldInThatMode) {
  const std::string name = "interop:rw:force";
  RedissonReadWriteLock theirs(redisson(), name);
  ReadWriteLock mine = client().read_write_lock(name);
  Mailbox released(redisson().backend(), theirs.channel());

  ASSERT_TRUE(mine.read().try_lock());
  EXPECT_FALSE(theirs.force_unlock_write());  // read mode: not the write half's
  EXPECT_TRUE(mine.read().is_held_by_current_thread());
  EXPECT_TRUE(theirs.force_unlock_read());
  EXPECT_FALSE(exists(name));
  EXPECT_GE(released.wait_beyond(0), 1);  // "0"
  EXPECT_NO_THROW(mine.read().unlock());  // lost: told, unlock() returns (lock.h)

  ASSERT_TRUE(mine.write().try_lock());
  EXPECT_FALSE(theirs.force_unlock_read());
  EXPECT_TRUE(mine.write().is_held_by_current_thread());
  const std::int64_t seen = released.count();
  EXPECT_TRUE(theirs.force_unlock_write());
  EXPECT_FALSE(exists(name));
  EXPECT_GE(released.wait_beyond(seen), seen + 1);  // "1"
  EXPECT_NO_THROW(mine.write().unlock());           // lost: told, unlock() returns (lock.h)
}

TEST_F(InteropReadWriteTest, RedissonForceUnlockReachesTurnstilesLostHandler) {
  ClientOptions options;
  options.lease = seconds(6);  // renewals every ~2 s
  std::unique_ptr<Client> watched = make_client(options);
  RedissonReadWriteLock theirs(redisson(), "interop:rw:lost");
  ReadWriteLock mine = watched->read_write_lock("interop:rw:lost");
  std::atomic<int> read_lost = 0;
  std::atomic<int> write_lost = 0;
  std::atomic<bool> all_gone = true;  // told why: the lock was gone (not a late renewal)
  mine.read().set_lost_handler([&](const LockLost& lost) {
    if (lost.reason != LockLostReason::gone) all_gone = false;  // one store: never set back
    ++read_lost;
  });
  mine.write().set_lost_handler([&](const LockLost& lost) {
    if (lost.reason != LockLostReason::gone) all_gone = false;  // one store: never set back
    ++write_lost;
  });

  mine.read().lock();  // the watchdog's
  EXPECT_TRUE(theirs.force_unlock_read());
  EXPECT_TRUE(eventually([&] { return read_lost.load() == 1; }));
  EXPECT_NO_THROW(mine.read().unlock());  // lost: told, unlock() returns (lock.h)

  mine.write().lock();
  EXPECT_TRUE(theirs.force_unlock_write());
  EXPECT_TRUE(eventually([&] { return write_lost.load() == 1; }));
  EXPECT_NO_THROW(mine.write().unlock());  // lost: told, unlock() returns (lock.h)
  EXPECT_EQ(read_lost.load(), 1);
  EXPECT_TRUE(all_gone.load());
}

TEST_F(InteropReadWriteTest, TurnstileWatchdogReArmsTheKeysRedissonReadsAndNeverCutsTheLock) {
  ClientOptions options;
  options.lease = seconds(3);  // renewals every ~1 s
  std::unique_ptr<Client> watched = make_client(options);
  const std::string reader = redisson().owner(1);
  for (const std::string name : {"interop:rw:renewed", "interop:{renewed}"}) {
    SCOPED_TRACE(name);
    RedissonReadWriteLock theirs(redisson(), name);
    ReadWriteLock mine = watched->read_write_lock(name);
    const std::string me = mine.read().current_owner();
    mine.read().lock();
    ASSERT_FALSE(theirs.try_read(reader, kLongLeaseMs).has_value());
    // Pushed far out by hand: only a renewal of this very key (Redisson's
    // name for turnstile's hold) brings it back to the 3 s lease.
    const std::string key = theirs.timeout_key(me, 1);
    ASSERT_EQ(raw({"PEXPIRE", key, "100000"}), Reply::integer(1));
    EXPECT_TRUE(eventually([&] { return pttl(key) > 0 && pttl(key) <= 3000; }));
    EXPECT_GT(pttl(name), 100'000);  // Redisson's 120 s reader: the renewal did not cut the lock
    // Redisson leaves: its release finds turnstile's renewed key.
    EXPECT_EQ(theirs.read_unlock(reader), Reply::integer(0));
    EXPECT_GT(pttl(name), 0);
    EXPECT_LE(pttl(name), 3000);
    mine.read().unlock();
    EXPECT_FALSE(exists(name));
  }
}

// Known difference (docs/redisson-interop.md): Redisson's read watchdog sets
// the lock's ttl to its own watchdog timeout, below a turnstile reader's
// longer lease. Should the Redisson process then die, the lock expires
// before turnstile's lease: a writer gets in while turnstile still
// believes it reads. turnstile's side never shortens the ttl.
TEST_F(InteropReadWriteTest, RedissonReadWatchdogCanCutATurnstileReadersLease) {
  const std::string name = "interop:rw:cut";
  const std::string reader = redisson().owner(1);
  const std::string writer = redisson().owner(2);
  redisson().set_watchdog_ms(1000);
  RedissonReadWriteLock theirs(redisson(), name);
  ReadWriteLock mine = client().read_write_lock(name);
  const std::string me = mine.read().current_owner();

  ASSERT_TRUE(read_with_lease(mine, kLongLease));
  ASSERT_FALSE(theirs.try_read(reader).has_value());  // the watchdog's lease: 1 s
  EXPECT_GT(pttl(name), 100'000);
  EXPECT_TRUE(theirs.renew_reads({reader}));
  EXPECT_LE(pttl(name), 1000);  // cut to Redisson's watchdog timeout
  EXPECT_GT(pttl(theirs.timeout_key(me, 1)), 100'000);

  // While Redisson releases normally, its release restores the longest hold.
  EXPECT_EQ(theirs.read_unlock(reader), Reply::integer(0));
  EXPECT_GT(pttl(name), 100'000);

  // Redisson renews, then its process dies: the lock expires with
  // turnstile's hold still within its lease.
  ASSERT_FALSE(theirs.try_read(reader).has_value());
  EXPECT_TRUE(theirs.renew_reads({reader}));
  EXPECT_TRUE(eventually([&] { return !exists(name); }));
  EXPECT_GT(pttl(theirs.timeout_key(me, 1)), 60'000);
  ASSERT_FALSE(theirs.try_write(writer, kLongLeaseMs).has_value());  // a writer beside a believed reader
  EXPECT_NO_THROW(mine.read().unlock());                             // lost: told, unlock() returns (lock.h)
  EXPECT_EQ(theirs.write_unlock(writer), Reply::integer(1));
}

}  // namespace
}  // namespace turnstile::testing
