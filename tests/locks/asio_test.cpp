// Acquiring from Boost.Asio coroutines (issue #31, item 4, and #49;
// turnstile/asio.h), against a real redis-server: many coroutines wait on
// one lock on a single io_context thread, which keeps answering meanwhile,
// and every one is served in turn; twelve thousand wait on twenty names
// with no thread of their own; a hold taken by a coroutine is released
// after it resumes on another thread; errors and cancellation complete the
// operation, in both completion forms; an io_context destroyed with
// acquisitions pending leaves nothing held and touches nothing freed (the
// ASan build runs this suite).

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <exception>
#include <fstream>
#include <future>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "lock_environment.h"
#include "turnstile/asio.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/hold.h"
#include "turnstile/lock.h"

namespace turnstile::testing {
namespace {

namespace asio = boost::asio;
using std::chrono::seconds;

// A hang guard, not a timing: conditions are waited for, never timed.
constexpr auto kPatience = std::chrono::seconds(120);

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer's cost per synchronisation makes fewer of them the same
// test.
constexpr int kCoroutines = 100;
constexpr int kCrowd = 2'000;
#else
constexpr int kCoroutines = 1000;
constexpr int kCrowd = 12'000;
#endif

// The OS threads of this process now (Linux: /proc/self/status).
int os_threads() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  ADD_FAILURE() << "no Threads: line in /proc/self/status";
  return -1;
}

std::int64_t waiting(const Client& client, Flavor flavor) { return client.metrics().waiters_of(flavor); }

// Runs `io` on a thread of its own until it runs out of work; joins it.
class IoThread {
 public:
  explicit IoThread(asio::io_context& io)
      : io_(io), done_(finished_.get_future()), thread_([this] {
          io_.run();
          finished_.set_value();
        }) {}
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;
  ~IoThread() {
    if (done_.wait_for(kPatience) != std::future_status::ready) {
      ADD_FAILURE() << "the io_context still had work after " << kPatience.count() << " s";
      io_.stop();
    }
    thread_.join();
  }
  // Whether run() returned (every operation completed) in time.
  bool finished() { return done_.wait_for(kPatience) == std::future_status::ready; }
  std::thread::id id() const { return thread_.get_id(); }

 private:
  asio::io_context& io_;
  std::promise<void> finished_;
  std::future<void> done_;
  std::thread thread_;
};

class AsioTest : public LockTest {};

TEST_P(AsioTest, ManyCoroutinesWaitOnOneIoThreadWithoutBlockingIt) {
  Client& other = env().add_client();
  Client& client = env().add_client();
  ReentrantLock blocker = other.lock("asio:many");
  LockHold blocking = blocker.acquire_hold();  // everyone waits until this goes
  ReentrantLock lock = client.lock("asio:many");

  asio::io_context io;
  // Touched on the io thread only.
  int inside = 0;
  int most_inside = 0;
  int served = 0;
  std::atomic<int> failures{0};
  for (int i = 0; i < kCoroutines; ++i) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          LockHold hold =
              co_await turnstile::asio::async_acquire_hold(lock, {.wait = kWaitForever}, asio::use_awaitable);
          if (!hold.owns_hold()) {
            failures.fetch_add(1);
            co_return;
          }
          most_inside = std::max(most_inside, ++inside);
          // Give the thread away while holding: other completions run now.
          co_await asio::post(io, asio::use_awaitable);
          --inside;
          ++served;
          co_await turnstile::asio::async_release(std::move(hold), asio::use_awaitable);
        },
        [&](std::exception_ptr error) {
          if (error) failures.fetch_add(1);
        });
  }
  std::promise<int> probe;
  // Posted after every coroutine started (FIFO): when it runs, all of them
  // have begun waiting, and the thread is free.
  asio::post(io, [&] { probe.set_value(served); });
  IoThread thread(io);
  std::future<int> probed = probe.get_future();
  ASSERT_EQ(probed.wait_for(kPatience), std::future_status::ready) << "the io thread was blocked";
  EXPECT_EQ(probed.get(), 0) << "served while the lock was held elsewhere";

  blocking.release();
  ASSERT_TRUE(thread.finished());
  EXPECT_EQ(served, kCoroutines);
  EXPECT_EQ(most_inside, 1) << "two coroutines held the lock at once";
  EXPECT_EQ(failures.load(), 0);
  EXPECT_FALSE(lock.is_locked());
}

TEST_P(AsioTest, AHoldTakenByACoroutineIsReleasedAfterItResumesOnAnotherThread) {
  Client& client = env().add_client();
  Client& other = env().add_client();
  FairLock lock = client.fair_lock("asio:hop");
  asio::io_context io;
  asio::steady_timer moved(io, asio::steady_timer::time_point::max());
  std::thread::id acquired_on;
  std::thread::id released_on;
  std::atomic<bool> waiting_to_move{false};
  std::atomic<bool> held_elsewhere_meanwhile{true};
  std::atomic<bool> released{false};
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        LockHold hold = co_await turnstile::asio::async_acquire_hold(lock, {.wait = seconds(5)}, asio::use_awaitable);
        EXPECT_TRUE(hold.owns_hold());
        acquired_on = std::this_thread::get_id();
        waiting_to_move = true;
        boost::system::error_code cancelled;
        co_await moved.async_wait(asio::redirect_error(asio::use_awaitable, cancelled));
        released_on = std::this_thread::get_id();  // another thread runs the io_context now
        held_elsewhere_meanwhile = other.fair_lock("asio:hop").try_lock();
        hold.release();
        released = true;
      },
      asio::detached);
  // One thread runs the io_context until the coroutine holds the lock and
  // waits; another resumes it.
  std::atomic<bool> first_done{false};
  std::thread first([&] {
    while (!waiting_to_move.load() && io.run_one() > 0) {
    }
    first_done = true;
  });
  // The first thread is joined only after the second one ran: a joined
  // thread's id may be reused by the next thread.
  if (!eventually(client, [&] { return first_done.load(); })) {
    io.stop();
    first.join();
    FAIL() << "the coroutine did not get the lock";
  }
  moved.cancel();
  {
    IoThread second(io);
    EXPECT_TRUE(second.finished());
  }
  first.join();
  ASSERT_TRUE(waiting_to_move.load());
  EXPECT_TRUE(released.load());
  EXPECT_NE(released_on, acquired_on);
  EXPECT_FALSE(held_elsewhere_meanwhile.load());
  EXPECT_FALSE(lock.is_locked());
}

TEST_P(AsioTest, ErrorsAndCancellationCompleteTheOperation) {
  Client& client = env().add_client();
  Client& other = env().add_client();
  TokenLock lock = client.token_lock("asio:errors");
  LockHold blocking = other.token_lock("asio:errors").acquire_hold();
  asio::io_context io;
  std::stop_source cancel;
  std::atomic<int> completed{0};
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        // An invalid lease: thrown at the co_await, nothing sent. (Not in
        // EXPECT_THROW: GCC 12 mishandles a co_await in that macro's
        // discarded temporary.)
        bool refused = false;
        try {
          LockHold never = co_await turnstile::asio::async_acquire_hold(
              lock, {.wait = seconds(1), .lease = Duration::zero()}, asio::use_awaitable);
          ADD_FAILURE() << "a zero lease was accepted: " << never.owns_hold();
        } catch (const InvalidArgumentError&) {
          refused = true;
        }
        EXPECT_TRUE(refused);
        completed.fetch_add(1);
        // Cancelled while waiting: an empty hold. (The options are a named
        // variable: GCC 12 destroys a co_await expression's temporaries
        // twice, and a stop token's reference count with them.)
        const AcquireOptions cancellable{.wait = kWaitForever, .stop = cancel.get_token()};
        LockHold none = co_await turnstile::asio::async_acquire_hold(lock, cancellable, asio::use_awaitable);
        EXPECT_FALSE(none.owns_hold());
        completed.fetch_add(1);
        // Releasing an empty hold completes at once.
        co_await turnstile::asio::async_release(std::move(none), asio::use_awaitable);
        completed.fetch_add(1);
      },
      asio::detached);
  IoThread thread(io);
  ASSERT_TRUE(eventually(client, [&] { return completed.load() == 1; }));
  cancel.request_stop();
  ASSERT_TRUE(thread.finished());
  EXPECT_EQ(completed.load(), 3);
  // The cancelled waiter left nothing behind; the holder still holds.
  EXPECT_TRUE(blocking.held());
  blocking.release();
  EXPECT_FALSE(lock.is_locked());
}

TEST_P(AsioTest, TwelveThousandCoroutinesOnTwentyNamesWaitWithoutThreadsOfTheirOwn) {
  constexpr int kNames = 20;
  Client& other = env().add_client();
  Client& client = env().add_client();
  std::vector<LockHold> blocking;  // everyone waits until these go
  std::vector<ReentrantLock> locks;
  for (int i = 0; i < kNames; ++i) {
    const std::string name = "asio:crowd:" + std::to_string(i);
    blocking.push_back(other.lock(name).acquire_hold());
    locks.push_back(client.lock(name));
    // Each name's channel subscribed and its connections open before the
    // count: what a crowd adds is what is measured.
    EXPECT_FALSE(locks.back().try_lock());
  }
  // The engine's threads start at its first asynchronous operation: one
  // that waits for nothing, so they are counted before the crowd.
  EXPECT_FALSE(locks.front().try_acquire_hold_async({}).get().owns_hold());
  const int threads_before = os_threads();

  asio::io_context io;
  // Touched on the io thread only.
  std::vector<int> inside(kNames, 0);
  int most_inside = 0;
  int served = 0;
  std::atomic<int> failures{0};
  for (int i = 0; i < kCrowd; ++i) {
    asio::co_spawn(
        io,
        [&, i]() -> asio::awaitable<void> {
          boost::system::error_code code;
          LockHold hold = co_await turnstile::asio::async_acquire(locks[i % kNames], {},
                                                                  asio::redirect_error(asio::use_awaitable, code));
          if (code || !hold.owns_hold()) {
            failures.fetch_add(1);
            co_return;
          }
          most_inside = std::max(most_inside, ++inside[i % kNames]);
          co_await asio::post(io, asio::use_awaitable);
          --inside[i % kNames];
          ++served;
          co_await turnstile::asio::async_release(std::move(hold), asio::use_awaitable);
        },
        asio::detached);
  }
  IoThread thread(io);
  ASSERT_TRUE(eventually(
      client, [&] { return waiting(client, Flavor::reentrant) == kCrowd; }, kPatience))
      << waiting(client, Flavor::reentrant) << " of " << kCrowd << " waiting";
  const int threads_waiting = os_threads();
  // The io thread, and nothing per waiter (before the engine: one each).
  EXPECT_LE(threads_waiting - threads_before, 2)
      << threads_before << " threads before, " << threads_waiting << " with " << kCrowd << " acquisitions waiting";

  blocking.clear();  // released: each name serves its waiters in turn
  ASSERT_TRUE(thread.finished());
  EXPECT_EQ(served, kCrowd);
  EXPECT_EQ(most_inside, 1) << "two coroutines held a lock at once";
  EXPECT_EQ(failures.load(), 0);
  for (ReentrantLock& lock : locks) EXPECT_FALSE(lock.is_locked()) << lock.name();
}

TEST_P(AsioTest, AnIoContextDestroyedWithAcquisitionsPendingLeavesNothingHeld) {
  constexpr int kPending = 50;
  Client& other = env().add_client();
  Client& client = env().add_client();
  LockHold blocking = other.fair_lock("asio:gone").acquire_hold();
  FairLock lock = client.fair_lock("asio:gone");
  std::atomic<int> resumed{0};
  {
    asio::io_context io;
    for (int i = 0; i < kPending; ++i) {
      asio::co_spawn(
          io,
          [&]() -> asio::awaitable<void> {
            LockHold hold =
                co_await turnstile::asio::async_acquire_hold(lock, {.wait = kWaitForever}, asio::use_awaitable);
            resumed.fetch_add(1);
          },
          asio::detached);
    }
    std::atomic<bool> stop_running{false};
    std::thread runner([&] {
      while (!stop_running.load()) io.run_for(std::chrono::milliseconds(10));
    });
    const bool all_waiting = eventually(
        client, [&] { return waiting(client, Flavor::fair) == kPending; }, kPatience);
    stop_running = true;
    io.stop();
    runner.join();
    ASSERT_TRUE(all_waiting) << waiting(client, Flavor::fair) << " of " << kPending << " waiting";
  }  // destroyed: its handlers go unrun, the acquisitions are cancelled
  // Released now: an acquisition still trying might take the lock, for a
  // handler that is gone; it must give it back at once.
  blocking.release();
  EXPECT_TRUE(eventually(
      client, [&] { return waiting(client, Flavor::fair) == 0; }, kPatience));
  EXPECT_TRUE(eventually(
      client, [&] { return !lock.is_locked(); }, kPatience));
  EXPECT_EQ(resumed.load(), 0);
  // Nobody is left in the queue: another client gets in at once.
  LockHold next = other.fair_lock("asio:gone").try_acquire_hold({});
  EXPECT_TRUE(next.owns_hold());
}

TEST_P(AsioTest, TheErrorCodeFormTellsTimeoutCancellationAndErrors) {
  Client& client = env().add_client();
  Client& other = env().add_client();
  ReentrantLock lock = client.lock("asio:codes");
  LockHold blocking = other.lock("asio:codes").acquire_hold();
  asio::io_context io;
  std::stop_source cancel;
  std::atomic<int> step{0};
  boost::system::error_code timed_out;
  boost::system::error_code aborted;
  boost::system::error_code invalid;
  boost::system::error_code fine;
  bool held_at_last = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        // The options as a temporary inside co_await, stop source and all:
        // asio::AcquireOptions is safe there under GCC 12.
        LockHold none = co_await turnstile::asio::async_acquire(lock, {.wait = std::chrono::milliseconds(50)},
                                                                asio::redirect_error(asio::use_awaitable, timed_out));
        EXPECT_FALSE(none.owns_hold());
        (void)co_await turnstile::asio::async_acquire(lock, {.wait = seconds(1), .lease = Duration::zero()},
                                                      asio::redirect_error(asio::use_awaitable, invalid));
        step = 1;
        LockHold cancelled = co_await turnstile::asio::async_acquire(
            lock, {.stop = &cancel}, asio::redirect_error(asio::use_awaitable, aborted));
        EXPECT_FALSE(cancelled.owns_hold());
        step = 2;
        LockHold held = co_await turnstile::asio::async_acquire(lock, {.wait = seconds(30)},
                                                                asio::redirect_error(asio::use_awaitable, fine));
        held_at_last = held.owns_hold();
        co_await turnstile::asio::async_release(std::move(held), asio::use_awaitable);
      },
      asio::detached);
  IoThread thread(io);
  ASSERT_TRUE(eventually(client, [&] { return step.load() == 1 && waiting(client, Flavor::reentrant) == 1; }));
  cancel.request_stop();
  ASSERT_TRUE(eventually(client, [&] { return step.load() == 2; }));
  blocking.release();
  ASSERT_TRUE(thread.finished());
  EXPECT_EQ(timed_out, boost::asio::error::timed_out);
  EXPECT_EQ(invalid, turnstile::asio::errc::invalid_argument) << invalid.message();
  EXPECT_EQ(invalid.category().name(), std::string("turnstile"));
  EXPECT_EQ(aborted, boost::asio::error::operation_aborted);
  EXPECT_FALSE(fine) << fine.message();
  EXPECT_TRUE(held_at_last);
  EXPECT_FALSE(lock.is_locked());
}

TEST_P(AsioTest, AnAcquisitionBeyondMaxWaitingIsRefusedTypedAndTheOthersWaitOn) {
  Client& other = env().add_client();
  Client& client = env().add_client({.max_waiting = 2});
  LockHold blocking = other.lock("asio:bound").acquire_hold();
  ReentrantLock lock = client.lock("asio:bound");
  Future<LockHold> first = lock.try_acquire_hold_async({.wait = kWaitForever});
  Future<LockHold> second = lock.try_acquire_hold_async({.wait = kWaitForever});
  ASSERT_TRUE(eventually(client, [&] { return waiting(client, Flavor::reentrant) == 2; }));
  Future<LockHold> third = lock.try_acquire_hold_async({.wait = kWaitForever});
  EXPECT_THROW((void)third.get(), TooManyWaitersError);
  bool refused_blocking = false;
  try {
    (void)lock.try_acquire_hold({.wait = seconds(1)});
  } catch (const TooManyWaitersError& error) {
    refused_blocking = std::string(error.what()).find("max_waiting") != std::string::npos;
  }
  EXPECT_TRUE(refused_blocking);
  // A try that does not wait is never refused: it only finds the holder.
  EXPECT_FALSE(lock.try_acquire_hold({}).owns_hold());
  blocking.release();
  // Either waiter may be served first (a release wakes one, a grant may
  // name either); the other gets it once the first lets go.
  ASSERT_TRUE(eventually(
      client, [&] { return first.is_ready() || second.is_ready(); }, kPatience));
  const bool first_served = first.is_ready();
  Future<LockHold>& served = first_served ? first : second;
  Future<LockHold>& next = first_served ? second : first;
  LockHold got = served.get();
  EXPECT_TRUE(got.owns_hold());
  got.release();
  EXPECT_TRUE(next.get().owns_hold());
}

INSTANTIATE_TEST_SUITE_P(Environments, AsioTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
