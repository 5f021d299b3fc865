#include "redis/cluster_backend.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/key_scan.h"
#include "core/pending_reply.h"
#include "core/script_call.h"
#include "redis/cluster_router.h"
#include "redis/subscription_router.h"

namespace turnstile::redis {
namespace {

constexpr std::array<std::string_view, 3> kBroadcastCommands = {"FLUSHALL", "FLUSHDB", "SCRIPT"};
constexpr std::array<std::string_view, 10> kKeylessCommands = {"PING",   "ECHO",    "INFO",   "TIME",    "ROLE",
                                                               "DBSIZE", "CLUSTER", "CONFIG", "COMMAND", "WAIT"};

template <std::size_t N>
bool is_one_of(const std::vector<std::string>& argv, const std::array<std::string_view, N>& names) {
  for (const std::string_view name : names) {
    if (is_command(argv, name)) return true;
  }
  return false;
}

std::string describe_call(const Script& script, const std::vector<std::string>& keys) {
  return "script '" + std::string(script.name) + "'" + (keys.empty() ? "" : " on key '" + keys[0] + "'");
}

// Whether a cluster answered with a redirection ClusterRouter::route
// follows (cluster_router.h).
bool is_redirection(const ServerError& error) {
  const std::string_view code = error.code();
  return code == "MOVED" || code == "ASK" || code == "TRYAGAIN" || code == "CLUSTERDOWN";
}

// A script call pipelined on its slot owner's connection (Node::send_eval).
// Its outcome is the owner's, except a redirection (MOVED, ASK, TRYAGAIN,
// CLUSTERDOWN): then get() makes the call again through
// ClusterRouter::route, which follows it as eval() does (each send bounded
// by the command timeout, at most kMaxClusterAttempts). A transport
// failure asks for a new slot map, as route() does, and is the outcome.
class ClusterPendingEval final : public PendingReply {
 public:
  ClusterPendingEval(std::unique_ptr<PendingReply> sent, std::function<void()> on_connection_error,
                     std::function<SyncedReply()> call_again)
      : sent_(std::move(sent)),
        on_connection_error_(std::move(on_connection_error)),
        call_again_(std::move(call_again)) {
    TURNSTILE_CHECK(sent_ != nullptr && on_connection_error_ && call_again_);
  }

  bool wait_for(std::chrono::nanoseconds timeout) override { return sent_->wait_for(timeout); }

  SyncedReply get() override {
    try {
      return sent_->get();
    } catch (const ServerError& error) {
      if (!is_redirection(error)) throw;
    } catch (const ConnectionError&) {
      on_connection_error_();  // the node may have failed over
      throw;
    }
    return call_again_();
  }

 private:
  const std::unique_ptr<PendingReply> sent_;
  const std::function<void()> on_connection_error_;
  const std::function<SyncedReply()> call_again_;
};

class ClusterBackend final : public Backend {
 public:
  explicit ClusterBackend(const RedisOptions& options)
      : options_(options),
        counters_(std::make_shared<Counters>()),
        // The owner, from the slot map (read on first use, not bounded by
        // the caller's deadline; refreshed in the background after that).
        subscriptions_([this](std::string_view channel,
                              const SubscriptionRouter::Deadline&) { return router_.owner(key_slot(channel)); },
                       [this] { router_.refresh(); }),
        router_(
            options, [this] { subscriptions_.rehome(); }, counters_) {}

  Reply eval(const Script& script, const std::vector<std::string>& keys,
             const std::vector<std::string>& args) override {
    const std::string what = describe_call(script, keys);
    const std::optional<int> slot = common_slot(what, keys);
    if (!slot) return router_.any_master()->eval(script, keys, args, false);
    return router_.route(*slot, what, [&](Node& node, bool asking) { return node.eval(script, keys, args, asking); });
  }

  SyncedReply eval_synced(const Script& script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args) override {
    return eval_synced_within(script, keys, args, EvalOptions{});
  }

  // Each node tried (a redirect included) gets the caller's bound afresh.
  SyncedReply eval_synced_within(const Script& script, const std::vector<std::string>& keys,
                                 const std::vector<std::string>& args, const EvalOptions& options) override {
    const std::string what = describe_call(script, keys);
    const std::optional<int> slot = common_slot(what, keys);
    if (!slot) return router_.any_master()->eval_synced(script, keys, args, false, options.send_within);
    return router_.route(*slot, what, [&](Node& node, bool asking) {
      return node.eval_synced(script, keys, args, asking, options.send_within);
    });
  }

  // Pipelined: written now on a pooled connection of the slot's owner
  // (Node::send_eval), so a caller with calls for many slots (the
  // watchdog's renewal batches) has them in flight on every node at once.
  // A redirection in the reply is followed when it is read
  // (ClusterPendingEval).
  std::unique_ptr<PendingReply> send_eval(const Script& script, const std::vector<std::string>& keys,
                                          const std::vector<std::string>& args, EvalSync sync) override {
    return send_eval_within(script, keys, args, sync, EvalOptions{});
  }

  // The bound is the first send's; a redirection followed later is not
  // bounded by it.
  std::unique_ptr<PendingReply> send_eval_within(const Script& script, const std::vector<std::string>& keys,
                                                 const std::vector<std::string>& args, EvalSync sync,
                                                 const EvalOptions& options) override {
    const std::string what = describe_call(script, keys);
    const std::optional<int> slot = common_slot(what, keys);
    if (!slot) return router_.any_master()->send_eval(script, keys, args, sync, options.send_within);
    std::unique_ptr<PendingReply> sent = router_.owner(*slot)->send_eval(script, keys, args, sync, options.send_within);
    // A copy: the call may be made again after send_eval returned.
    return follow_redirections(std::move(sent), std::make_shared<const EvalRequest>(EvalRequest{&script, keys, args}),
                               *slot, sync);
  }

  // The calls grouped by their slots' owners, each group pipelined on one
  // connection of its master (Node::send_evals): a batch of calls for many
  // slots costs each master a write and a few reads. A redirection in a
  // reply is followed when it is read (ClusterPendingEval).
  std::vector<std::unique_ptr<PendingReply>> send_evals(std::vector<EvalRequest> calls) override {
    std::vector<std::unique_ptr<PendingReply>> pending(calls.size());
    // Per master, in the order first met: its calls and their places.
    std::vector<std::pair<std::shared_ptr<Node>, std::vector<std::size_t>>> groups;
    std::vector<std::optional<int>> slots(calls.size());
    for (std::size_t i = 0; i < calls.size(); ++i) {
      TURNSTILE_CHECK(calls[i].script != nullptr);
      try {
        slots[i] = common_slot(describe_call(*calls[i].script, calls[i].keys), calls[i].keys);
        std::shared_ptr<Node> node = slots[i] ? router_.owner(*slots[i]) : router_.any_master();
        auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == node; });
        if (group == groups.end()) group = groups.insert(groups.end(), {std::move(node), {}});
        group->second.push_back(i);
      } catch (const std::exception&) {
        pending[i] = std::make_unique<CompletedReply>(std::current_exception());
      }
    }
    std::vector<std::shared_ptr<const EvalRequest>> requests(calls.size());
    for (auto& [node, places] : groups) {
      std::vector<EvalRequest> group_calls;
      group_calls.reserve(places.size());
      for (const std::size_t i : places) {
        group_calls.push_back(calls[i]);
        requests[i] = std::make_shared<const EvalRequest>(std::move(calls[i]));
      }
      std::vector<std::unique_ptr<PendingReply>> sent = node->send_evals(std::move(group_calls));
      TURNSTILE_CHECK(sent.size() == places.size());
      for (std::size_t k = 0; k < places.size(); ++k) {
        const std::size_t i = places[k];
        pending[i] = slots[i] ? follow_redirections(std::move(sent[k]), requests[i], *slots[i], EvalSync::none)
                              : std::move(sent[k]);
      }
    }
    TURNSTILE_CHECK(std::all_of(pending.begin(), pending.end(), [](const auto& p) { return p != nullptr; }));
    return pending;
  }

  Reply command(const std::vector<std::string>& argv) override {
    check_pooled_command(argv);
    if (is_one_of(argv, kBroadcastCommands)) {
      std::optional<Reply> first;
      for (const std::shared_ptr<Node>& node : router_.masters()) {
        Reply reply = raise_if_error(node->command(argv, false));
        if (!first) first = std::move(reply);
      }
      return first ? std::move(*first) : Reply::nil();
    }
    if (argv.size() < 2 || is_one_of(argv, kKeylessCommands)) {
      return raise_if_error(router_.any_master()->command(argv, false));
    }
    return router_.route(key_slot(argv[1]), argv[0] + " '" + argv[1] + "'",
                         [&](Node& node, bool asking) { return raise_if_error(node.command(argv, asking)); });
  }

  std::vector<MasterReply> command_each_master(const std::vector<std::string>& argv) override {
    check_pooled_command(argv);
    std::vector<MasterReply> answers;
    for (const std::shared_ptr<Node>& node : router_.masters()) answers.push_back(ask_master(*node, argv));
    return answers;
  }

  // Each master in turn, its own cursor: a cluster's SCAN is per node.
  ScanResult scan_each_master(const ScanOptions& options) override {
    detail::check_scan_options(options);
    ScanResult result;
    std::unordered_set<std::string> seen;
    for (const std::shared_ptr<Node>& node : router_.masters()) {
      detail::scan_server(
          [&node](const std::vector<std::string>& argv) { return raise_if_error(node->command(argv, false)); }, options,
          "redis " + node->endpoint(), result, seen);
      if (!result.complete) break;
    }
    return result;
  }

  Subscription subscribe(std::string_view channel, PubSubHandler handler) override {
    return Subscription(this, subscriptions_.subscribe(channel, std::move(handler)));
  }

  Subscription subscribe_within(std::string_view channel, PubSubHandler handler,
                                const SubscribeOptions& options) override {
    return Subscription(
        this, subscriptions_.subscribe(channel, std::move(handler), callers_deadline_after(options.confirm_within)));
  }

  std::string describe() const override { return options_.describe(); }
  BackendCounters counters() const override { return counters_->read(); }
  RestartWatch watch_restarts(ServerRestartHandler handler) override {
    return counters_->identities->watch(std::move(handler));
  }
  RestartWatch watch_reconnects(ServerRestartHandler handler) override {
    return counters_->identities->watch_reconnects(std::move(handler));
  }

  std::string_view publish_command() const override { return router_.sharded_pubsub() ? "SPUBLISH" : "PUBLISH"; }
  std::optional<int> cluster_slot(std::string_view key) const override { return key_slot(key); }

 protected:
  void unsubscribe(std::uint64_t id) noexcept override { subscriptions_.unsubscribe(id); }

 private:
  // `sent` (the call `request` to the owner of `slot`), its redirection
  // followed through route() when the reply is read.
  std::unique_ptr<PendingReply> follow_redirections(std::unique_ptr<PendingReply> sent,
                                                    std::shared_ptr<const EvalRequest> request, int slot,
                                                    EvalSync sync) {
    return std::make_unique<ClusterPendingEval>(
        std::move(sent), [this] { router_.request_refresh(); },
        [this, request = std::move(request), slot, sync] {
          const std::string what = describe_call(*request->script, request->keys);
          return router_.route(slot, what, [&](Node& node, bool asking) {
            if (sync == EvalSync::replicas)
              return node.eval_synced(*request->script, request->keys, request->args, asking);
            return SyncedReply{node.eval(*request->script, request->keys, request->args, asking), ReplicaAck{}};
          });
        });
  }

  const RedisOptions options_;
  const std::shared_ptr<Counters> counters_;
  // Declared before the router: the router's refresh thread calls rehome()
  // and must stop first.
  SubscriptionRouter subscriptions_;
  mutable ClusterRouter router_;
};

}  // namespace

std::unique_ptr<Backend> make_cluster_backend(const RedisOptions& options) {
  return std::make_unique<ClusterBackend>(options);
}

}  // namespace turnstile::redis
