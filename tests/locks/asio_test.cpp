// Acquiring from Boost.Asio coroutines (issue #31, item 4;
// turnstile/asio.h), against a real redis-server: many coroutines wait on
// one lock on a single io_context thread, which keeps answering meanwhile,
// and every one is served in turn; a hold taken by a coroutine is released
// after it resumes on another thread; errors and cancellation complete the
// operation.

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
#include <future>
#include <stop_token>
#include <string>
#include <thread>

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
// Each waiting acquisition parks a runtime thread; ThreadSanitizer's cost
// per thread makes a tenth of them the same test.
constexpr int kCoroutines = 100;
#else
constexpr int kCoroutines = 1000;
#endif

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

INSTANTIATE_TEST_SUITE_P(Environments, AsioTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
