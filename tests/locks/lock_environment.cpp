#include "lock_environment.h"

#include <algorithm>
#include <mutex>

namespace turnstile::testing {

void expect_mutual_exclusion(LockEnvironment& environment, int clients, int rounds,
                             const std::function<std::unique_ptr<Lock>(Client&)>& make_lock) {
  int inside = 0;
  int max_inside = 0;
  int total = 0;
  std::mutex counters_mutex;  // the real environment runs clients on threads
  std::vector<Client*> all;
  for (int i = 0; i < clients; ++i) all.push_back(&environment.add_client());
  for (Client* client : all) {
    environment.spawn(*client, [&, client] {
      const std::unique_ptr<Lock> lock = make_lock(*client);
      for (int round = 0; round < rounds; ++round) {
        lock->lock();
        {
          std::lock_guard guard(counters_mutex);
          max_inside = std::max(max_inside, ++inside);
          ++total;
        }
        client->runtime().sleep_for(std::chrono::milliseconds(2));
        {
          std::lock_guard guard(counters_mutex);
          --inside;
        }
        lock->unlock();
      }
    });
  }
  environment.run();
  EXPECT_EQ(max_inside, 1);
  EXPECT_EQ(total, clients * rounds);
}

}  // namespace turnstile::testing
