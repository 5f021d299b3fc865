#include "lock_environment.h"

#include <algorithm>
#include <mutex>

namespace turnstile::testing {

bool eventually(Client& client, const std::function<bool()>& condition, Duration patience) {
  const Instant give_up = client.runtime().deadline_after(patience);
  while (!condition()) {
    if (client.runtime().now() >= give_up) return false;
    client.runtime().sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

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

void expect_increasing_fencing_tokens(LockEnvironment& environment, const std::string& token_key,
                                      const std::function<std::unique_ptr<Lock>(Client&)>& make_lock) {
  std::vector<std::int64_t> tokens;
  std::mutex tokens_mutex;
  for (int i = 0; i < 2; ++i) {
    Client& client = environment.add_client();
    environment.spawn(client, [&] {
      const std::unique_ptr<Lock> lock = make_lock(client);
      for (int round = 0; round < 5; ++round) {
        lock->lock();
        const auto token = lock->fencing_token();
        EXPECT_TRUE(token.has_value());
        {
          std::lock_guard guard(tokens_mutex);
          if (token) tokens.push_back(*token);
        }
        client.runtime().sleep_for(std::chrono::milliseconds(3));
        lock->unlock();
        EXPECT_FALSE(lock->fencing_token().has_value());
      }
    });
  }
  environment.run();
  ASSERT_EQ(tokens.size(), 10u);
  // Recorded in lock order, so strictly increasing as recorded.
  for (std::size_t i = 1; i < tokens.size(); ++i) EXPECT_LT(tokens[i - 1], tokens[i]);
  EXPECT_EQ(environment.inspector().command({"GET", token_key}), Reply::bulk(std::to_string(tokens.back())));
}

}  // namespace turnstile::testing
