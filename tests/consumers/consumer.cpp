// A program of a library user: built against an installed turnstile by
// tests/consumers/run_consumers.py, once through CMake's find_package and
// once through pkg-config, with nothing of turnstile's source tree in
// sight. It holds a lock on the redis-server named by its argument (and on
// a standalone fake Redis, for libturnstile_sim), checks that a second
// thread is kept out while it is held and gets in after, and prints one
// line per backend. Exit status 0 only if everything held, and the
// installed turnstile/version.h names the version of the libturnstile the
// program runs with.

#include <turnstile/client.h>
#include <turnstile/redis_backend.h>
#include <turnstile/sim/standalone.h>
#include <turnstile/version.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>

namespace {

// Whether another thread (another task, so another owner) can take `name`
// through `client` without waiting.
bool other_thread_gets(turnstile::Client& client, const std::string& name) {
  bool acquired = false;
  std::thread other([&] {
    turnstile::ReentrantLock lock = client.lock(name);
    acquired = lock.try_lock();
    if (acquired) lock.unlock();
  });
  other.join();
  return acquired;
}

bool exercise(const char* what, const std::shared_ptr<turnstile::Backend>& backend) {
  turnstile::Client client(backend);
  const std::string name = "consumer:lock";
  turnstile::ReentrantLock lock = client.lock(name);
  lock.lock();
  const bool kept_out = !other_thread_gets(client, name);
  lock.unlock();
  const bool got_in_after = other_thread_gets(client, name);
  std::printf("%s: kept out while held: %s, got in after: %s\n", what, kept_out ? "yes" : "NO",
              got_in_after ? "yes" : "NO");
  return kept_out && got_in_after;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s redis://127.0.0.1:PORT\n", argv[0]);
    return 64;
  }
  std::printf("version: headers %s, library %s\n", TURNSTILE_VERSION_STRING, turnstile::version());
  if (std::strcmp(turnstile::version(), TURNSTILE_VERSION_STRING) != 0) return 1;
  try {
    const bool on_redis =
        exercise("redis-server", turnstile::make_redis_backend(turnstile::RedisOptions::from_url(argv[1])));
    const bool on_fake = exercise("fake redis", turnstile::sim::make_standalone_fake_backend("consumer"));
    return on_redis && on_fake ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "consumer: %s\n", error.what());
    return 1;
  }
}
