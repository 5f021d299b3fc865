#include "redis/cluster_router.h"

#include <charconv>
#include <utility>

#include "core/check.h"
#include "core/script_call.h"
#include "redis/counters.h"

namespace turnstile::redis {
namespace {

bool valid_slot(int slot) { return slot >= 0 && slot < kClusterSlotCount; }

std::string key_of(const RedisEndpoint& endpoint) { return endpoint.host + ":" + std::to_string(endpoint.port); }

[[noreturn]] void bad_slots(const Reply& reply) {
  throw ProtocolError("redis cluster: unexpected CLUSTER SLOTS reply " + reply.to_string());
}

// A node of CLUSTER SLOTS, [host, port, id, ...]: its id ("" before Redis
// 4.0, which gives none).
std::string node_id(const Reply& node) {
  const auto& fields = node.as_array();
  if (fields.size() < 3 || !fields[2].is_bulk()) return {};
  return fields[2].as_string();
}

}  // namespace

std::vector<SlotRange> parse_cluster_slots(const Reply& reply, const RedisEndpoint& asked) {
  if (!reply.is_array()) bad_slots(reply);
  std::vector<SlotRange> ranges;
  for (const Reply& entry : reply.as_array()) {
    // [first, last, [host, port, id, ...], replicas...]
    if (!entry.is_array() || entry.as_array().size() < 3) bad_slots(reply);
    const auto& parts = entry.as_array();
    if (!parts[0].is_integer() || !parts[1].is_integer() || !parts[2].is_array() || parts[2].as_array().size() < 2 ||
        !parts[2].as_array()[0].is_bulk() || !parts[2].as_array()[1].is_integer()) {
      bad_slots(reply);
    }
    SlotRange range{static_cast<int>(parts[0].as_integer()), static_cast<int>(parts[1].as_integer()), {}};
    if (range.first < 0 || range.last >= kClusterSlotCount || range.first > range.last) bad_slots(reply);
    const std::string& host = parts[2].as_array()[0].as_string();
    range.master.host = host.empty() || host == "?" ? asked.host : host;
    range.master.port = static_cast<int>(parts[2].as_array()[1].as_integer());
    range.master_id = node_id(parts[2]);
    for (std::size_t replica = 3; replica < parts.size(); ++replica) {
      if (!parts[replica].is_array()) bad_slots(reply);
      std::string id = node_id(parts[replica]);
      if (!id.empty()) range.replica_ids.push_back(std::move(id));
    }
    ranges.push_back(std::move(range));
  }
  return ranges;
}

Redirect parse_redirect(std::string_view message) {
  // "MOVED 3999 127.0.0.1:6381"
  const auto bad = [&] { return ProtocolError("redis cluster: malformed redirection '" + std::string(message) + "'"); };
  const std::size_t first_space = message.find(' ');
  const std::size_t second_space = message.find(' ', first_space + 1);
  if (first_space == std::string_view::npos || second_space == std::string_view::npos) throw bad();
  const std::string_view slot_text = message.substr(first_space + 1, second_space - first_space - 1);
  const std::string_view address = message.substr(second_space + 1);
  const std::size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) throw bad();
  Redirect redirect;
  const std::string_view port_text = address.substr(colon + 1);
  if (std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), redirect.slot).ec != std::errc() ||
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), redirect.target.port).ec != std::errc() ||
      redirect.slot < 0 || redirect.slot >= kClusterSlotCount) {
    throw bad();
  }
  std::string_view host = address.substr(0, colon);
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  redirect.target.host = std::string(host);
  return redirect;
}

std::optional<int> common_slot(std::string_view what, const std::vector<std::string>& keys) {
  if (keys.empty()) return std::nullopt;
  const int slot = key_slot(keys[0]);
  TURNSTILE_CHECK(valid_slot(slot));
  for (const std::string& key : keys) {
    const int other = key_slot(key);
    if (other != slot) {
      throw InvalidArgumentError("redis cluster: " + std::string(what) + ": keys '" + keys[0] + "' (slot " +
                                 std::to_string(slot) + ") and '" + key + "' (slot " + std::to_string(other) +
                                 ") hash to different slots; keys of one call must share a hash tag {...}");
    }
  }
  return slot;
}

ClusterRouter::ClusterRouter(const RedisOptions& options, std::function<void()> on_topology_changed,
                             std::shared_ptr<Counters> counters)
    : options_(options),
      counters_(std::move(counters)),
      on_topology_changed_(std::move(on_topology_changed)),
      owners_(kClusterSlotCount),
      refresher_([this] {
        refresh();
        if (on_topology_changed_) on_topology_changed_();
      }) {
  TURNSTILE_CHECK(owners_.size() == static_cast<std::size_t>(kClusterSlotCount));
  TURNSTILE_CHECK(counters_ != nullptr);
}

ClusterRouter::~ClusterRouter() = default;

RedisOptions ClusterRouter::node_options(const RedisEndpoint& endpoint) const {
  return options_for_endpoint(options_, endpoint);
}

std::shared_ptr<Node> ClusterRouter::node_at_locked(const RedisEndpoint& endpoint) {
  std::shared_ptr<Node>& node = nodes_[key_of(endpoint)];
  if (node == nullptr) {
    node = std::make_shared<Node>(
        node_options(endpoint), sharded_.load() == 1, [this] { refresher_.request(); }, counters_);
  }
  TURNSTILE_CHECK(node != nullptr);
  return node;
}

bool ClusterRouter::load_from(const RedisEndpoint& endpoint) {
  std::vector<SlotRange> ranges;
  try {
    const std::unique_ptr<Connection> connection = Connection::open(node_options(endpoint));
    if (sharded_.load() < 0) {
      // COMMAND INFO answers [nil] for a command the server does not know.
      const Reply info = raise_if_error(connection->command({"COMMAND", "INFO", "SPUBLISH"}));
      const bool known = info.is_array() && !info.as_array().empty() && info.as_array()[0].is_array();
      sharded_.store(known ? 1 : 0);
    }
    ranges = parse_cluster_slots(raise_if_error(connection->command({"CLUSTER", "SLOTS"})), endpoint);
  } catch (const TlsVerificationError&) {
    throw;
  } catch (const Error&) {
    return false;
  }
  if (ranges.empty()) return false;   // a node not (yet) part of a formed cluster
  std::vector<std::string> promoted;  // endpoints of masters that were replicas of their slots' masters
  {
    const MutexLock lock(mutex_);
    std::vector<std::shared_ptr<Node>> owners(kClusterSlotCount);
    std::vector<std::string> owner_ids(kClusterSlotCount);
    std::map<std::string, std::string> replica_of;
    for (const SlotRange& range : ranges) {
      // parse_cluster_slots refused any other range.
      TURNSTILE_CHECK(valid_slot(range.first) && valid_slot(range.last) && range.first <= range.last);
      const std::shared_ptr<Node> node = node_at_locked(range.master);
      bool promoted_here = false;
      for (int slot = range.first; slot <= range.last; ++slot) {
        const auto at = static_cast<std::size_t>(slot);
        owners[at] = node;
        owner_ids[at] = range.master_id;
        promoted_here =
            promoted_here || was_replica_of_locked(range.master_id, owner_ids_.empty() ? "" : owner_ids_[at]);
      }
      if (promoted_here) promoted.push_back(key_of(range.master));
      for (const std::string& replica : range.replica_ids) replica_of[replica] = range.master_id;
    }
    owners_.swap(owners);
    owner_ids_.swap(owner_ids);
    replica_of_.swap(replica_of);
    TURNSTILE_CHECK(owners_.size() == static_cast<std::size_t>(kClusterSlotCount));
    TURNSTILE_CHECK(owner_ids_.size() == owners_.size());
    loaded_ = true;
  }
  // Outside the lock: the handlers may call in (a Client renewing).
  for (const std::string& endpoint : promoted) counters_->identities->restarted(endpoint);
  return true;
}

bool ClusterRouter::was_replica_of_locked(const std::string& node_id, const std::string& master_id) const {
  if (node_id.empty() || master_id.empty() || node_id == master_id) return false;
  const auto found = replica_of_.find(node_id);
  return found != replica_of_.end() && found->second == master_id;
}

void ClusterRouter::refresh() {
  const MutexLock load_lock(load_mutex_);
  std::vector<RedisEndpoint> candidates = options_.seeds;
  {
    const MutexLock lock(mutex_);
    for (const auto& [name, node] : nodes_) {
      candidates.push_back(RedisEndpoint{node->options().host, node->options().port});
    }
  }
  std::optional<TlsVerificationError> refused;
  for (const RedisEndpoint& candidate : candidates) {
    try {
      if (load_from(candidate)) return;
    } catch (const TlsVerificationError& error) {
      if (!refused) refused = error;
    }
  }
  // A certificate that fails verification does not fix itself: the caller
  // gets that (not retried) rather than "no node answered".
  if (refused) throw *refused;
  throw ConnectionError("redis cluster " + options_.endpoint() +
                        ": no node answered CLUSTER SLOTS with a slot map (seeds and known nodes tried)");
}

void ClusterRouter::ensure_loaded() {
  {
    const MutexLock lock(mutex_);
    if (loaded_) return;
  }
  refresh();
}

std::shared_ptr<Node> ClusterRouter::owner(int slot) {
  TURNSTILE_CHECK_MSG(valid_slot(slot), "slots come from key_slot() or a parsed redirection");
  ensure_loaded();
  const MutexLock lock(mutex_);
  TURNSTILE_CHECK(loaded_);
  std::shared_ptr<Node> node = owners_[static_cast<std::size_t>(slot)];
  if (node == nullptr) {
    refresher_.request();
    throw ClusterRedirectError("redis cluster " + options_.endpoint() + ": slot " + std::to_string(slot) +
                               " is not served by any master");
  }
  return node;
}

std::shared_ptr<Node> ClusterRouter::any_master() {
  ensure_loaded();
  const MutexLock lock(mutex_);
  for (const std::shared_ptr<Node>& node : owners_) {
    if (node != nullptr) return node;
  }
  throw ClusterRedirectError("redis cluster " + options_.endpoint() + ": no slot is served by any master");
}

std::vector<std::shared_ptr<Node>> ClusterRouter::masters() {
  ensure_loaded();
  const MutexLock lock(mutex_);
  std::vector<std::shared_ptr<Node>> masters;
  for (const std::shared_ptr<Node>& node : owners_) {
    if (node != nullptr && (masters.empty() || masters.back() != node)) {
      bool seen = false;
      for (const auto& known : masters) seen = seen || known == node;
      if (!seen) masters.push_back(node);
    }
  }
  return masters;
}

bool ClusterRouter::sharded_pubsub() {
  TURNSTILE_CHECK(sharded_.load() >= -1 && sharded_.load() <= 1);  // unknown, no, yes
  if (sharded_.load() < 0) {
    try {
      ensure_loaded();
    } catch (const Error&) {
      return false;
    }
  }
  return sharded_.load() == 1;
}

bool ClusterRouter::follow(const ServerError& error, const RedisOptions& from, std::shared_ptr<Node>& ask_target,
                           Backoff& backoff) {
  const std::string_view code = error.code();
  if (code == "MOVED" || code == "ASK") {
    Redirect redirect = parse_redirect(error.server_message());
    if (redirect.target.host.empty()) redirect.target.host = from.host;
    TURNSTILE_CHECK(valid_slot(redirect.slot));  // parse_redirect refused any other
    const MutexLock lock(mutex_);
    std::shared_ptr<Node> target = node_at_locked(redirect.target);
    if (code == "ASK") {
      ask_target = std::move(target);
    } else {
      owners_[static_cast<std::size_t>(redirect.slot)] = std::move(target);
      refresher_.request();  // other slots and subscriptions moved too
    }
    return true;
  }
  if (code == "TRYAGAIN" || code == "CLUSTERDOWN") {
    // A slot in the middle of a migration, or a failover in progress.
    if (code == "CLUSTERDOWN") refresher_.request();
    std::this_thread::sleep_for(backoff.next());
    return true;
  }
  return false;
}

}  // namespace turnstile::redis
