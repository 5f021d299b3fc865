// RedisBackend: the standalone Backend over one Node (a connection pool for
// commands and scripts, pipelined send_eval on a leased connection, a
// subscriber for pub/sub), and make_redis_backend(),
// which picks the backend for the options' mode. See turnstile/redis_backend.h.

#include "turnstile/redis_backend.h"

#include <optional>
#include <utility>

#include "core/script_call.h"
#include "redis/cluster_backend.h"
#include "redis/node.h"
#include "redis/sentinel_backend.h"
#include "redis/tls_stream.h"

namespace turnstile {
namespace {

class RedisBackend final : public Backend {
 public:
  explicit RedisBackend(const RedisOptions& options)
      : options_(options), counters_(std::make_shared<redis::Counters>()), node_(options, false, {}, counters_) {}

  Reply eval(const Script& script, const std::vector<std::string>& keys,
             const std::vector<std::string>& args) override {
    return node_.eval(script, keys, args, false);
  }

  SyncedReply eval_synced(const Script& script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args) override {
    return node_.eval_synced(script, keys, args, false);
  }

  SyncedReply eval_synced_within(const Script& script, const std::vector<std::string>& keys,
                                 const std::vector<std::string>& args, const EvalOptions& options) override {
    return node_.eval_synced(script, keys, args, false, options.send_within);
  }

  std::unique_ptr<PendingReply> send_eval(const Script& script, const std::vector<std::string>& keys,
                                          const std::vector<std::string>& args, EvalSync sync) override {
    return node_.send_eval(script, keys, args, sync);
  }

  std::unique_ptr<PendingReply> send_eval_within(const Script& script, const std::vector<std::string>& keys,
                                                 const std::vector<std::string>& args, EvalSync sync,
                                                 const EvalOptions& options) override {
    return node_.send_eval(script, keys, args, sync, options.send_within);
  }

  // Pipelined on one connection (Node::send_evals).
  std::vector<std::unique_ptr<PendingReply>> send_evals(std::vector<EvalRequest> calls) override {
    return node_.send_evals(std::move(calls));
  }

  Reply command(const std::vector<std::string>& argv) override {
    redis::check_pooled_command(argv);
    return raise_if_error(node_.command(argv, false));
  }

  std::vector<MasterReply> command_each_master(const std::vector<std::string>& argv) override {
    redis::check_pooled_command(argv);
    return {redis::ask_master(node_, argv)};
  }

  Subscription subscribe(std::string_view channel, PubSubHandler handler) override {
    return Subscription(this, node_.subscriber().subscribe(channel, std::move(handler)));
  }

  Subscription subscribe_within(std::string_view channel, PubSubHandler handler,
                                const SubscribeOptions& options) override {
    return Subscription(this, node_.subscriber().subscribe(channel, std::move(handler),
                                                           redis::callers_deadline_after(options.confirm_within)));
  }

  Subscription subscribe_if_confirmed(std::string_view channel, const PubSubHandler& handler) override {
    const std::optional<std::uint64_t> id = node_.subscriber().subscribe_if_confirmed(channel, handler);
    return id ? Subscription(this, *id) : Subscription();
  }

  std::string describe() const override { return options_.describe(); }

  BackendCounters counters() const override { return counters_->read(); }

  RestartWatch watch_restarts(ServerRestartHandler handler) override {
    return counters_->identities->watch(std::move(handler));
  }
  RestartWatch watch_reconnects(ServerRestartHandler handler) override {
    return counters_->identities->watch_reconnects(std::move(handler));
  }

 protected:
  void unsubscribe(std::uint64_t id) noexcept override { node_.subscriber().unsubscribe(id); }

 private:
  const RedisOptions options_;
  const std::shared_ptr<redis::Counters> counters_;
  redis::Node node_;
};

}  // namespace

std::unique_ptr<Backend> make_redis_backend(const RedisOptions& options) {
  options.validate();
  // Reads the CA, certificate and key files now, so that a bad one is an
  // InvalidArgumentError here rather than a failure of every connection.
  if (options.tls.enabled) redis::tls_context(options.tls);
  switch (options.mode) {
    case RedisMode::cluster:
      return redis::make_cluster_backend(options);
    case RedisMode::sentinel:
      return redis::make_sentinel_backend(options);
    case RedisMode::standalone:
      break;
  }
  return std::make_unique<RedisBackend>(options);
}

}  // namespace turnstile
