// What the fragments of the docs take as given (tools/doc_examples.py,
// `fragments`): every public header, and the names a reader supplies from
// context: a client, a lock, the application's own functions. Declared
// only; the fragments are compiled, never linked nor run.

#ifndef TURNSTILE_TESTS_DOCS_FRAGMENT_PRELUDE_H_
#define TURNSTILE_TESTS_DOCS_FRAGMENT_PRELUDE_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <utility>  // before Boost 1.74's awaitable.hpp, which uses std::exchange

#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <turnstile/asio.h>
#include <turnstile/backend.h>
#include <turnstile/client.h>
#include <turnstile/election.h>
#include <turnstile/errors.h>
#include <turnstile/events.h>
#include <turnstile/fair_lock.h>
#include <turnstile/fencing.h>
#include <turnstile/inspection.h>
#include <turnstile/lock.h>
#include <turnstile/lock_policy.h>
#include <turnstile/metrics.h>
#include <turnstile/multi_lock.h>
#include <turnstile/read_write_lock.h>
#include <turnstile/redis_backend.h>
#include <turnstile/semaphore.h>
#include <turnstile/sim/scenarios.h>

namespace doc_fragments {

using namespace std::chrono_literals;

// The reader's setting.
extern std::shared_ptr<turnstile::Backend> backend, backend_a, backend_b, backend_c;
extern turnstile::Client client, orders, billing;
extern turnstile::ReentrantLock lock;
extern turnstile::RedLock redlock;
extern turnstile::CountingSemaphore slots;
extern turnstile::PermitSemaphore jobs;
extern turnstile::PermitId permit;
extern std::stop_source shutdown;
extern std::ostream& out;
extern turnstile::Duration step_time;

// A thread pool of the application's.
struct Pool {
  template <typename Work>
  void submit(Work&& work) {
    std::forward<Work>(work)();
  }
};
extern Pool pool;

// The application's own work.
void place_order();
void run_job();
bool more_rows();
void write_a_row();
void call_the_api();
bool more_work();
void do_step();
void do_a_step();
void write_with_token(std::optional<std::int64_t> token);
template <typename... Anything>
void use(Anything&&...) {}

}  // namespace doc_fragments

#endif  // TURNSTILE_TESTS_DOCS_FRAGMENT_PRELUDE_H_
