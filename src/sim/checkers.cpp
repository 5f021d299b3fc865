#include "turnstile/sim/checkers.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <utility>

#include "core/check.h"
#include "fake_redis/keyspace.h"
#include "sim/scheduler.h"
#include "fake_redis/server.h"
#include "turnstile/errors.h"
#include "turnstile/key_layout.h"
#include "turnstile/semaphore.h"

namespace turnstile::sim {
namespace {

// A crash-safe semaphore's permit id as stored: 16 raw bytes.
constexpr std::size_t kPermitIdBytes = 16;

// Checkers::Resource::epochs_at_grant: a server that did not list the holder.
constexpr std::uint64_t kNotBacking = std::numeric_limits<std::uint64_t>::max();

constexpr std::string_view kViolationNames[kViolationKinds] = {
    "mutual exclusion", "fifo", "permit conservation", "fencing order", "liveness", "belief overlap", "lock delay"};

std::size_t index_of(ViolationKind kind) { return static_cast<std::size_t>(kind); }

std::int64_t to_ms(Duration duration) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
}

// Checkers::expect(ExpectedViolation): a bound on the list.
constexpr std::size_t kMaxExpectationsPerKind = 16;

// A key's deadline in the world's ms (grants are judged in world time; a
// server whose clock drifts keeps deadlines by its own).
std::optional<std::int64_t> world_deadline_ms(Server& server, std::string_view key) {
  const std::optional<std::int64_t> deadline = server.keyspace().deadline_ms(key);
  if (!deadline) return deadline;
  return server.server_clock().world_ms(*deadline);
}

void add_hash_holders(Server& server, const std::string& key, ResourceState& state) {
  const Typed<Hash> hash = server.keyspace().find_as<Hash>(key);
  if (hash.value == nullptr) return;
  const std::optional<std::int64_t> deadline = world_deadline_ms(server, key);
  for (const auto& [owner, count] : hash.value->entries()) state.grants.push_back(Grant{owner, deadline});
}

// fair_lock_reader()'s reader, a type of its own so that Checkers finds it
// in a StateReader (std::function::target) and reads the queue into
// vectors it recycles: a FIFO watch reads the whole queue after every
// write, and a fresh copy cost an allocation per waiter each time.
struct FairLockReader {
  std::string key;
  std::string queue_key;
  std::string alive_key;  // empty: liveness deadlines not read
  // The queue of two observations ago, its strings kept for their
  // capacity (Checkers::observe_resource).
  std::vector<std::string> spare_queue;

  // Fills `state`'s grants and queue, reusing the queue's strings.
  void read_into(Server& server, ResourceState& state) const {
    Keyspace& keyspace = server.keyspace();
    state.grants.clear();
    add_hash_holders(server, key, state);
    const Typed<List> queue = keyspace.find_as<List>(queue_key);
    state.queue.resize(queue.value != nullptr ? queue.value->size() : 0);
    if (queue.value == nullptr) return;
    // By iterator: a deque's operator[] divides for every element.
    auto entry = queue.value->begin();
    for (std::string& copy : state.queue) copy.assign(*entry++);
    if (alive_key.empty()) return;
    const Typed<SortedSet> alive = keyspace.find_as<SortedSet>(alive_key);
    state.queue_alive_ms.assign(state.queue.size(), std::nullopt);
    if (alive.value == nullptr) return;
    // Unix ms by the clients' wall clocks (FairLock passes its own).
    const std::int64_t unix_ms_at_zero = server.server_clock().world().unix_ms_at_zero();
    for (std::size_t i = 0; i < state.queue.size(); ++i) {
      const std::optional<double> score = alive.value->score(state.queue[i]);
      if (score) state.queue_alive_ms[i] = static_cast<std::int64_t>(*score) - unix_ms_at_zero;
    }
  }

  ResourceState operator()(Server& server) const {
    ResourceState state;
    read_into(server, state);
    return state;
  }
};

std::string join_names(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) {
    if (!text.empty()) text += ", ";
    text += name;
  }
  return text;
}

}  // namespace

std::string_view violation_name(ViolationKind kind) { return kViolationNames[index_of(kind)]; }

std::string Violation::report() const {
  std::string text =
      std::string(violation_name(kind)) + " violated at " + std::to_string(virtual_ms) + " ms on '" + resource + "'";
  if (!clients.empty()) text += " (" + join_names(clients) + ")";
  text += ": " + what;
  if (state_lost_ms) text += " (after a server lost its state at " + std::to_string(*state_lost_ms) + " ms)";
  text += "; replay with seed " + std::to_string(seed);
  if (expected) text += " (expected by this scenario)";
  return text;
}

// A reentrant lock's hash (Redisson's RLock layout): a named type, so that
// Checkers::observe_resource knows its holders leave it only by a release.
struct HashLockReader {
  std::string key;

  ResourceState operator()(Server& server) const {
    ResourceState state;
    add_hash_holders(server, key, state);
    return state;
  }
};

StateReader hash_lock_reader(std::string key) { return HashLockReader{std::move(key)}; }

StateReader string_lock_reader(std::string key) {
  return [key = std::move(key)](Server& server) {
    ResourceState state;
    Keyspace& keyspace = server.keyspace();
    const Typed<std::string> value = keyspace.find_as<std::string>(key);
    if (value.value == nullptr) return state;
    // A token lock's holder is its token: a waiter marking it
    // (kTokenWaitersMark) is no new grant.
    const std::string& held = *value.value;
    state.grants.push_back(
        Grant{is_lock_token(held) ? std::string(token_of(held)) : held, world_deadline_ms(server, key)});
    return state;
  };
}

StateReader fair_lock_reader(std::string key, std::string queue_key, std::string alive_key) {
  return FairLockReader{std::move(key), std::move(queue_key), std::move(alive_key), {}};
}

StateReader counting_semaphore_reader(std::string key) {
  return [key = std::move(key)](Server& server) {
    ResourceState state;
    const Typed<std::string> value = server.keyspace().find_as<std::string>(key);
    if (value.value != nullptr) {
      std::int64_t permits = 0;
      const char* begin = value.value->data();
      const auto [end, error] = std::from_chars(begin, begin + value.value->size(), permits);
      if (error == std::errc() && end == begin + value.value->size()) state.free_permits = permits;
    }
    return state;
  };
}

StateReader permit_semaphore_reader(std::string key) {
  const StateReader count = counting_semaphore_reader(key);
  return [count, timeout_key = key_layout(Flavor::semaphore, key).permit_timeouts](Server& server) {
    ResourceState state = count(server);
    Keyspace& keyspace = server.keyspace();
    const Typed<SortedSet> permits = keyspace.find_as<SortedSet>(timeout_key);
    if (permits.value == nullptr) return state;
    // Scores are Unix ms by the acquirer's clock; grants use virtual ms. A
    // permit is expired at its score (<=), a key only past its deadline (<):
    // the grant's last live millisecond is the score's previous one.
    const std::int64_t unix_offset_ms = server.clock().unix_ms_at_zero();
    for (const auto& [score, member] : permits.value->by_score()) {
      const auto expiry_ms = static_cast<std::int64_t>(score);
      // Ids are stored as 16 raw bytes: shown as the 32 hex digits users see,
      // so reports and traces carry no raw bytes (a foreign member as is).
      std::string holder = member.size() == kPermitIdBytes ? PermitId(member).hex() : member;
      state.grants.push_back(Grant{std::move(holder), expiry_ms - unix_offset_ms - 1});
    }
    return state;
  };
}

StateReader read_write_lock_reader(std::string key) {
  return [key = std::move(key)](Server& server) {
    ResourceState state;
    Keyspace& keyspace = server.keyspace();
    const Typed<Hash> hash = keyspace.find_as<Hash>(key);
    if (hash.value == nullptr) return state;
    const std::optional<std::int64_t> deadline = world_deadline_ms(server, key);
    const KeyLayout layout = key_layout(Flavor::read_write, key);
    for (const auto& [name, count] : hash.value->entries()) {
      const KeyLayout::Field field = layout.parse_field(name);
      if (field.mode) continue;
      const bool writes = field.writes;
      std::string holder(field.owner);
      const auto listed = std::find_if(state.grants.begin(), state.grants.end(),
                                       [&](const Grant& grant) { return grant.holder == holder; });
      if (listed != state.grants.end()) {
        listed->shared = listed->shared && !writes;  // a downgrading writer: its write
      } else {
        state.grants.push_back(Grant{std::move(holder), deadline, !writes});
      }
    }
    return state;
  };
}

StateReader state_reader(Flavor flavor, std::string key) {
  // By what the flavor keeps at the name (flavor.h), its side keys telling
  // a fair lock's queue and a crash-safe semaphore's permits.
  const KeyLayout layout = key_layout(flavor, key);
  switch (flavor_traits(flavor).status_kind) {
    case StatusKind::read_write_hash:
      return read_write_lock_reader(std::move(key));
    case StatusKind::token:
      return string_lock_reader(std::move(key));
    case StatusKind::lock_hash:
      if (!layout.fair_queue.empty()) return fair_lock_reader(std::move(key), layout.fair_queue, layout.fair_waiters);
      return hash_lock_reader(std::move(key));
    case StatusKind::permit_count:
      if (!layout.permit_timeouts.empty()) return permit_semaphore_reader(std::move(key));
      return counting_semaphore_reader(std::move(key));
  }
  TURNSTILE_UNREACHABLE("every status kind has a reader");
  return hash_lock_reader(std::move(key));
}

// ---- Checkers ----

Checkers::Checkers(World& world) : world_(world) {
  world_.set_command_observer([this](std::size_t server_index) { observe(server_index); });
}

Checkers::~Checkers() { world_.set_command_observer(nullptr); }

void Checkers::watch(WatchOptions options) {
  if (!options.reader) throw InvalidArgumentError("a watched resource needs a state reader");
  if (options.capacity < 1) throw InvalidArgumentError("a watched resource's capacity must be at least 1");
  if (resources_.size() >= kMaxResources) throw InvalidArgumentError("too many watched resources");
  Resource resource;
  resource.options = std::move(options);
  resources_.push_back(std::move(resource));
}

void Checkers::expect(ViolationKind kind) { expected_.insert(kind); }

void Checkers::expect(ExpectedViolation expectation) {
  if (expectation.within && *expectation.within < Duration::zero()) {
    throw InvalidArgumentError("an expected violation's window cannot be negative");
  }
  if (expected_after_loss_.size() >= kViolationKinds * kMaxExpectationsPerKind) {
    throw InvalidArgumentError("too many expected violations");
  }
  expected_after_loss_.push_back(expectation);
}

bool Checkers::is_expected(ViolationKind kind, std::optional<std::int64_t> state_lost_ms) const {
  if (expected_.count(kind) != 0) return true;
  if (!state_lost_ms) return false;
  const std::int64_t after_ms = world_.now_ms() - *state_lost_ms;
  return std::any_of(expected_after_loss_.begin(), expected_after_loss_.end(), [&](const ExpectedViolation& expected) {
    return expected.kind == kind && (!expected.within || after_ms <= to_ms(*expected.within));
  });
}

std::optional<std::int64_t> Checkers::grant_lost_ms(const Resource& resource, const std::string& holder,
                                                    const LiveGrant& grant) const {
  const auto lost_at = [this](std::size_t server, std::uint64_t epoch) -> std::optional<std::int64_t> {
    if (world_.server_epoch(server) == epoch) return std::nullopt;
    return to_ms(world_.server_epoch_began(server, epoch + 1) - Instant{});
  };
  if (resource.options.quorum <= 1) return lost_at(grant.server, grant.epoch);
  const auto epochs = resource.epochs_at_grant.find(holder);
  if (epochs == resource.epochs_at_grant.end()) return std::nullopt;
  std::optional<std::int64_t> first;
  for (std::size_t server = 0; server < epochs->second.size(); ++server) {
    if (epochs->second[server] == kNotBacking) continue;
    const std::optional<std::int64_t> lost = lost_at(server, epochs->second[server]);
    if (lost && (!first || *lost < *first)) first = lost;
  }
  return first;
}

std::optional<std::int64_t> Checkers::latest_state_loss() const {
  std::optional<std::int64_t> latest;
  for (std::size_t server = 0; server < world_.server_count(); ++server) {
    const std::uint64_t epoch = world_.server_epoch(server);
    if (epoch < 2) continue;
    const std::int64_t began_ms = to_ms(world_.server_epoch_began(server, epoch) - Instant{});
    latest = std::max(latest.value_or(began_ms), began_ms);
  }
  return latest;
}

std::optional<std::int64_t> Checkers::state_lost_since(std::int64_t since_ms) const {
  std::optional<std::int64_t> first;
  for (std::size_t server = 0; server < world_.server_count(); ++server) {
    for (std::uint64_t epoch = 2; epoch <= world_.server_epoch(server); ++epoch) {
      const std::int64_t began_ms = to_ms(world_.server_epoch_began(server, epoch) - Instant{});
      if (began_ms < since_ms) continue;
      if (!first || began_ms < *first) first = began_ms;
      break;
    }
  }
  return first;
}

void Checkers::name_holder(std::string_view owner_prefix, std::string name) {
  holder_names_.emplace_back(std::string(owner_prefix), std::move(name));
}

std::string Checkers::name_of_holder(const std::string& holder) const {
  for (const auto& [prefix, name] : holder_names_) {
    if (holder.compare(0, prefix.size(), prefix) == 0) return name;
  }
  return holder;
}

Checkers::Resource* Checkers::find(std::string_view name) {
  for (Resource& resource : resources_) {
    if (resource.options.resource == name) return &resource;
  }
  return nullptr;
}

std::uint64_t Checkers::count(ViolationKind kind) const { return counts_[index_of(kind)]; }

void Checkers::observe(std::size_t server_index) {
  const std::uint64_t epoch = world_.server_epoch(server_index);
  // A command that wrote nothing changed no state: nothing to judge (lease
  // expiries are judged at the next write, before any new grant).
  const std::uint64_t writes = world_.server(server_index).write_count();
  Seen& seen = seen_[server_index];
  if (seen.writes == writes && seen.epoch == epoch) return;
  seen = Seen{writes, epoch};
  for (Resource& resource : resources_) observe_resource(resource, server_index, epoch);
}

void Checkers::judge_readers_writers_grant(Resource& resource, const std::string& holder, const LiveGrant& grant) {
  std::vector<std::string> others;
  bool writer_among_others = false;
  // Stands on a lost state when every grant it collides with was lost.
  std::optional<std::int64_t> state_lost_ms;
  bool all_lost = true;
  for (const auto& [earlier, live] : resource.grants) {
    if (earlier == holder || (grant.shared && live.shared)) continue;
    others.push_back(name_of_holder(earlier));
    writer_among_others = writer_among_others || !live.shared;
    const std::optional<std::int64_t> lost = grant_lost_ms(resource, earlier, live);
    all_lost = all_lost && lost.has_value();
    if (lost) state_lost_ms = std::max(state_lost_ms.value_or(*lost), *lost);
  }
  if (others.empty()) return;
  if (!all_lost) state_lost_ms.reset();
  std::string what = "server-" + std::to_string(grant.server) + " granted a " + (grant.shared ? "read" : "write") +
                     " hold to " + name_of_holder(holder) + " while " + join_names(others) + " held " +
                     (writer_among_others ? "a write hold" : "read holds") + " (a writer excludes everyone)";
  others.insert(others.begin(), name_of_holder(holder));
  report(ViolationKind::mutual_exclusion, resource.options.resource, std::move(others), std::move(what), state_lost_ms);
}

void Checkers::record_grant(Resource& resource, const std::string& holder, const LiveGrant& grant) {
  ++grants_observed_;
  if (resource.options.readers_writers) {
    judge_readers_writers_grant(resource, holder, grant);
    resource.grants.emplace(holder, grant);
    return;
  }
  // A grant whose server has lost it since (a failover, a restart) while
  // its client still waits for the answer is not judged now: with replica
  // sync that acquisition is undone (withdrawn() ends it), and if it
  // succeeds after all, acquired() judges the overlap then.
  const auto undecided = [&](const std::string& earlier, const LiveGrant& live) {
    if (world_.server_epoch(live.server) == live.epoch) return false;
    const std::string name = name_of_holder(earlier);
    if (name == earlier) return false;  // no simulated client: its word never comes
    const auto belief = beliefs_.find(std::pair(world_.client(name).id(), resource.options.resource));
    return belief != beliefs_.end() && belief->second.waiting_since_ms.has_value();
  };
  std::vector<std::string> others;
  // Stands on a lost state when the grants still held would leave room.
  std::optional<std::int64_t> state_lost_ms;
  std::int64_t still_held = 0;
  for (const auto& [earlier, live] : resource.grants) {
    if (undecided(earlier, live)) continue;
    others.push_back(name_of_holder(earlier));
    const std::optional<std::int64_t> lost = grant_lost_ms(resource, earlier, live);
    if (lost) {
      state_lost_ms = std::max(state_lost_ms.value_or(*lost), *lost);
    } else {
      ++still_held;
    }
  }
  if (static_cast<std::int64_t>(others.size()) >= resource.options.capacity) {
    if (still_held >= resource.options.capacity) state_lost_ms.reset();
    std::string what = "server-" + std::to_string(grant.server) + " granted it to " + name_of_holder(holder) +
                       " while " + std::to_string(others.size()) + " earlier grant(s) were live (capacity " +
                       std::to_string(resource.options.capacity) + ")";
    others.insert(others.begin(), name_of_holder(holder));
    report(ViolationKind::mutual_exclusion, resource.options.resource, std::move(others), std::move(what),
           state_lost_ms);
  }
  resource.grants.emplace(holder, grant);
}

bool Checkers::listing_current(const Resource& resource, std::size_t server) const {
  const auto found = resource.listed_epochs.find(server);
  return found != resource.listed_epochs.end() && found->second == world_.server_epoch(server);
}

std::optional<std::optional<std::int64_t>> Checkers::majority_deadline(const Resource& resource,
                                                                       const std::string& holder,
                                                                       std::int64_t now_ms) const {
  // Live listings of `holder` on every server; its majority lasts until
  // the quorum-th latest of their deadlines. A listing read before its
  // server lost its state, or past its deadline, holds nothing now.
  std::vector<std::int64_t> deadlines;
  for (const auto& [server, holders] : resource.listed) {
    if (!listing_current(resource, server)) continue;
    const auto found = holders.find(holder);
    if (found == holders.end()) continue;
    if (found->second && *found->second < now_ms) continue;
    deadlines.push_back(found->second.value_or(std::numeric_limits<std::int64_t>::max()));
  }
  if (deadlines.size() < resource.options.quorum) return std::nullopt;
  std::sort(deadlines.begin(), deadlines.end(), std::greater<>());
  const std::int64_t last = deadlines[resource.options.quorum - 1];
  if (last == std::numeric_limits<std::int64_t>::max()) return std::optional<std::int64_t>();
  return std::optional<std::int64_t>(last);
}

void Checkers::observe_quorum(Resource& resource, std::size_t server_index, std::uint64_t epoch) {
  const ResourceState state = resource.options.reader(world_.server(server_index));
  const std::int64_t now_ms = world_.now_ms();
  auto& listed = resource.listed[server_index];
  listed.clear();
  resource.listed_epochs[server_index] = epoch;
  for (const Grant& grant : state.grants) listed[name_of_holder(grant.holder)] = grant.deadline_ms;
  // Every majority is timed again from the listings as they now stand: a
  // release on one server (or a renewal) moves the deadline of a majority
  // that other servers still back, e.g. a holder whose release reached
  // only some of them keeps the rest until their own leases run out.
  for (auto& [holder, grant] : resource.grants) {
    if (const auto deadline = majority_deadline(resource, holder, now_ms)) grant.deadline_ms = *deadline;
  }
  std::int64_t expired_ms = -1;
  std::erase_if(resource.grants, [now_ms, &expired_ms](const auto& entry) {
    const bool expired = entry.second.deadline_ms && *entry.second.deadline_ms < now_ms;
    if (expired) expired_ms = std::max(expired_ms, *entry.second.deadline_ms);
    return expired;
  });
  begin_free_by_expiry(resource, expired_ms);
  judge_free_spell(resource, now_ms);
  for (const auto& [holder, unused] : listed) {
    if (resource.grants.count(holder) != 0) continue;
    const auto deadline = majority_deadline(resource, holder, now_ms);
    if (!deadline) continue;
    record_grant(resource, holder, LiveGrant{server_index, epoch, *deadline, now_ms});
    std::vector<std::uint64_t>& epochs = resource.epochs_at_grant[holder];
    epochs.clear();
    for (std::size_t server = 0; server < world_.server_count(); ++server) {
      const auto holders = resource.listed.find(server);
      const bool backs =
          holders != resource.listed.end() && listing_current(resource, server) && holders->second.count(holder) != 0;
      epochs.push_back(backs ? world_.server_epoch(server) : kNotBacking);
    }
  }
  // A grant released (or run out) on enough servers ends; a server that
  // listed it and lost its state since (restart, failover) still backs
  // it: the holder rightly believes. A server that never listed it backs
  // nothing.
  std::erase_if(resource.grants, [&](const auto& entry) {
    const std::vector<std::uint64_t>& epochs = resource.epochs_at_grant[entry.first];
    std::size_t backing = 0;
    for (std::size_t server = 0; server < epochs.size(); ++server) {
      const auto holders = resource.listed.find(server);
      bool listed_there = false;
      if (holders != resource.listed.end() && listing_current(resource, server)) {
        const auto found = holders->second.find(entry.first);
        listed_there = found != holders->second.end() && (!found->second || *found->second >= now_ms);
      }
      const bool lost_there = epochs[server] != kNotBacking && world_.server_epoch(server) != epochs[server];
      if (listed_there || lost_there) ++backing;
    }
    return backing < resource.options.quorum;
  });
  update_free_spell(resource, resource.grants.empty(), now_ms);
}

void Checkers::begin_free_by_expiry(Resource& resource, std::int64_t ended_ms) {
  if (ended_ms < 0) return;
  resource.last_end_ms = std::max(resource.last_end_ms.value_or(ended_ms), ended_ms);
  const bool free =
      static_cast<std::int64_t>(resource.grants.size()) < resource.options.capacity && !resource.options.permits;
  if (free && !resource.free_since_ms) resource.free_since_ms = ended_ms;
}

void Checkers::judge_free_spell(Resource& resource, std::int64_t now_ms) {
  if (!resource.options.liveness_bound || !resource.free_since_ms || resource.free_reported) return;
  const std::int64_t bound_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(*resource.options.liveness_bound).count();
  for (const auto& [key, belief] : beliefs_) {
    const auto& [id, name_of_resource] = key;
    if (name_of_resource != resource.options.resource || !belief.waiting_since_ms) continue;
    // The time first: it rules most waiters out without a client lookup.
    const std::int64_t since_ms = std::max(*resource.free_since_ms, *belief.waiting_since_ms);
    if (now_ms - since_ms <= bound_ms) continue;
    const std::string& name = world_.client_name(id);
    if (world_.client(name).crashed() || world_.scheduler().client_paused(id)) continue;
    resource.free_reported = true;
    report(ViolationKind::liveness, resource.options.resource, {name},
           name + " has waited since " + std::to_string(*belief.waiting_since_ms) + " ms while it was free since " +
               std::to_string(*resource.free_since_ms) + " ms, longer than the bound of " + std::to_string(bound_ms) +
               " ms");
    return;
  }
}

void Checkers::update_free_spell(Resource& resource, bool free, std::int64_t now_ms) {
  if (!free) {
    if (resource.free_since_ms) resource.last_end_ms.reset();
    resource.free_since_ms.reset();
    resource.free_reported = false;
    return;
  }
  if (!resource.free_since_ms) resource.free_since_ms = now_ms;
}

// A fair lock granted to `holder`, judged against the state before this
// command (`before`) and after it (`state`): nobody still queued may have
// queued ahead of it; and a release (the lock was held before) hands it to
// no waiter past its liveness deadline (gone, or frozen while still
// subscribed) while a live waiter queues behind it: the lock would sit
// with nobody who uses it for a lease. A waiter's own try is not judged
// so: it is alive, and its script reads its clock as of the send (a
// request delayed in transit is judged by an older `now`).
void Checkers::judge_fifo_grant(const Resource& resource, const std::string& holder, const QueueBefore& before,
                                const ResourceState& state, std::int64_t now_ms) {
  const std::vector<std::string>& queue_before = before.queue;
  const std::vector<std::optional<std::int64_t>>& alive_before = before.alive_ms;
  const auto position = std::find(queue_before.begin(), queue_before.end(), holder);
  const auto still_queued = [&state](const std::string& waiter) {
    return std::find(state.queue.begin(), state.queue.end(), waiter) != state.queue.end();
  };
  std::vector<std::string> skipped;
  for (auto waiter = queue_before.begin(); waiter != position; ++waiter) {
    if (still_queued(*waiter)) skipped.push_back(name_of_holder(*waiter));
  }
  if (!skipped.empty()) {
    std::string what = name_of_holder(holder) + " was granted the lock ahead of " + join_names(skipped) +
                       ", who queued earlier and still wait";
    skipped.insert(skipped.begin(), name_of_holder(holder));
    report(ViolationKind::fifo, resource.options.resource, std::move(skipped), std::move(what));
    return;
  }
  const std::optional<Duration>& tolerance = resource.options.waiter_deadline_tolerance;
  if (!before.held || !tolerance || position == queue_before.end() || alive_before.size() != queue_before.size()) {
    return;
  }
  const std::optional<std::int64_t>& alive_ms = alive_before[static_cast<std::size_t>(position - queue_before.begin())];
  // Past it by any client's clock; live by every client's.
  const std::int64_t tolerance_ms = to_ms(*tolerance);
  if (!alive_ms || *alive_ms + tolerance_ms >= now_ms) return;
  std::vector<std::string> live_behind;
  for (std::size_t i = 0; i < state.queue.size(); ++i) {
    const bool live = i >= state.queue_alive_ms.size() || !state.queue_alive_ms[i] ||
                      *state.queue_alive_ms[i] - tolerance_ms > now_ms;
    if (live && state.queue[i] != holder) live_behind.push_back(name_of_holder(state.queue[i]));
  }
  if (live_behind.empty()) return;
  std::string what = name_of_holder(holder) + " was granted the lock " + std::to_string(now_ms - *alive_ms) +
                     " ms past its liveness deadline while " + join_names(live_behind) + ", live, still wait";
  live_behind.insert(live_behind.begin(), name_of_holder(holder));
  report(ViolationKind::fifo, resource.options.resource, std::move(live_behind), std::move(what));
}

void Checkers::observe_resource(Resource& resource, std::size_t server_index, std::uint64_t epoch) {
  if (resource.options.quorum > 1) {
    observe_quorum(resource, server_index, epoch);
    return;
  }
  FairLockReader* const fair_reader = resource.options.reader.target<FairLockReader>();
  ResourceState state;
  if (fair_reader != nullptr) {
    state.queue = std::move(fair_reader->spare_queue);
    fair_reader->read_into(world_.server(server_index), state);
  } else {
    state = resource.options.reader(world_.server(server_index));
  }
  const std::int64_t now_ms = world_.now_ms();
  auto& grants = resource.grants;
  // Grants whose lease ran out ended then, wherever they were granted.
  const std::int64_t tolerance_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(resource.options.deadline_tolerance).count();
  const auto ended = [now_ms, tolerance_ms](const std::optional<std::int64_t>& deadline_ms) {
    return deadline_ms && *deadline_ms - tolerance_ms < now_ms;
  };
  std::int64_t expired_ms = -1;
  std::erase_if(grants, [&ended, &expired_ms](const auto& entry) {
    const bool expired = ended(entry.second.deadline_ms);
    if (expired) expired_ms = std::max(expired_ms, *entry.second.deadline_ms);
    return expired;
  });
  begin_free_by_expiry(resource, expired_ms);
  judge_free_spell(resource, now_ms);

  // A grant still listed stands in this epoch (it survived a restart that
  // lost other writes): refreshed before any new grant is judged.
  for (const Grant& grant : state.grants) {
    const auto found = grants.find(grant.holder);
    if (found != grants.end() && found->second.server == server_index) found->second.epoch = epoch;
  }
  // The first reading of a new epoch (World observes a server as it loses
  // its state): a grant listed now that was not live is one the lost writes
  // had ended (an unlock lost with the last second of an append-only file,
  // or with a lagging replica). Its key blocks others again, but no server
  // granted it now: live from here, judged neither as a double grant nor
  // for FIFO.
  const auto read_epoch = resource.read_epochs.find(server_index);
  const bool kept_by_loss = read_epoch != resource.read_epochs.end() && read_epoch->second != epoch;
  resource.read_epochs[server_index] = epoch;
  // Grants of this server's current epoch that it no longer lists were
  // released (or expired just now).
  // At most `limit` of them.
  const auto erase_released = [&](std::int64_t limit = std::numeric_limits<std::int64_t>::max()) {
    std::erase_if(grants, [&](const auto& entry) {
      if (limit <= 0 || entry.second.server != server_index || entry.second.epoch != epoch) return false;
      const bool gone = std::none_of(state.grants.begin(), state.grants.end(),
                                     [&](const Grant& grant) { return grant.holder == entry.first; });
      if (gone) --limit;
      return gone;
    });
  };
  // Whether this server's state before the command had a holder: a grant
  // now is then a handoff by the release, not a free lock's taking.
  const bool held_before = std::any_of(grants.begin(), grants.end(), [&](const auto& entry) {
    return entry.second.server == server_index && entry.second.epoch == epoch;
  });
  // A lock hash's holder (fair or reentrant) leaves it only by a release
  // (its own, a give-up's, a force unlock), which may hand the lock on in
  // the same script (direct handoff: the fair head, a registered
  // process's offer): released before the new grant is judged. Elsewhere
  // a holder may be replaced in one command that releases nothing (a
  // forced SET of a token: a double grant), and a permit may leave its
  // listing by another client's reclaim, judged by that client's clock:
  // judged with the new grant.
  if (fair_reader != nullptr || resource.options.reader.target<HashLockReader>() != nullptr) {
    erase_released();
  } else if (resource.options.permits) {
    // A crash-safe semaphore's release may grant the permits it frees to
    // registered processes' offers in the same script (direct handoff): as
    // many permits gone as their holders announced releasing (releasing())
    // were released before the new grants are judged. One gone by a
    // reclaim is judged with them, as above.
    std::int64_t announced = 0;
    for (const auto& [key, belief] : beliefs_) {
      if (key.second == resource.options.resource) announced += belief.permits_releasing;
    }
    if (announced > 0) erase_released(announced);
  }
  // Only a FIFO check needs the queue as it was before this command.
  std::vector<std::string> queue_before;
  std::vector<std::optional<std::int64_t>> alive_before;
  if (resource.options.fifo) {
    queue_before = std::move(resource.last_queue[server_index]);
    alive_before = std::move(resource.last_queue_alive_ms[server_index]);
  }
  for (const Grant& grant : state.grants) {
    // Listed past its deadline (a permit not reclaimed yet): no grant.
    if (ended(grant.deadline_ms)) continue;
    const auto found = grants.find(grant.holder);
    if (found != grants.end()) {
      const bool became_writer =
          resource.options.readers_writers && found->second.shared && !grant.shared && !kept_by_loss;
      found->second = LiveGrant{server_index, epoch, grant.deadline_ms, found->second.granted_ms, grant.shared};
      if (became_writer) judge_readers_writers_grant(resource, grant.holder, found->second);
      continue;
    }
    if (kept_by_loss) {
      grants.emplace(grant.holder, LiveGrant{server_index, epoch, grant.deadline_ms, now_ms, grant.shared});
      continue;
    }
    record_grant(resource, grant.holder, LiveGrant{server_index, epoch, grant.deadline_ms, now_ms, grant.shared});

    if (resource.options.fifo && !queue_before.empty()) {
      judge_fifo_grant(resource, grant.holder, {queue_before, alive_before, held_before}, state, now_ms);
    }
  }
  erase_released();
  if (resource.options.fifo) {
    resource.last_queue[server_index] = std::move(state.queue);
    resource.last_queue_alive_ms[server_index] = std::move(state.queue_alive_ms);
  }
  if (fair_reader != nullptr) fair_reader->spare_queue = std::move(resource.options.fifo ? queue_before : state.queue);
  if (resource.options.permits && state.free_permits) {
    // Permits whose lease ran out are free: they return at the next call.
    std::int64_t available = *state.free_permits;
    for (const Grant& grant : state.grants) available += grant.deadline_ms && *grant.deadline_ms < now_ms ? 1 : 0;
    update_free_spell(resource, available > 0, now_ms);
  } else {
    update_free_spell(resource, static_cast<std::int64_t>(grants.size()) < resource.options.capacity, now_ms);
  }

  if (resource.options.permits && state.free_permits) {
    const std::int64_t free = *state.free_permits;
    const std::int64_t capacity = resource.options.capacity;
    const bool listed = !state.grants.empty();
    const std::int64_t granted = static_cast<std::int64_t>(state.grants.size());
    if (free < 0 || free > capacity || (listed && free + granted != capacity)) {
      report(ViolationKind::permit_conservation, resource.options.resource, {},
             "server-" + std::to_string(server_index) + " has " + std::to_string(free) + " free and " +
                 std::to_string(granted) + " granted permit(s) of " + std::to_string(capacity));
    }
  }
}

void Checkers::waiting(const SimClient& client, std::string_view resource) {
  Belief& belief = beliefs_[{client.id(), std::string(resource)}];
  if (!belief.waiting_since_ms) belief.waiting_since_ms = world_.now_ms();
}

void Checkers::acquired(const SimClient& client, std::string_view resource_name,
                        std::optional<std::int64_t> fencing_token, std::int64_t permits, bool shared) {
  Belief& belief = beliefs_[{client.id(), std::string(resource_name)}];
  const std::optional<std::int64_t> waited_since_ms = belief.waiting_since_ms;
  belief.waiting_since_ms.reset();
  belief.permits_held += permits;
  belief.lost_deadline.reset();  // a new hold: whatever kept it closed has ended
  Resource* resource = find(resource_name);
  if (resource != nullptr) judge_lock_delay(*resource, client);
  open_belief(client, resource_name, permits, shared, waited_since_ms.value_or(world_.now_ms()));
  if (resource != nullptr && waited_since_ms) judge_undecided_grant(*resource, client, *waited_since_ms);
  if (!fencing_token || resource == nullptr) return;
  if (resource->last_token && *fencing_token <= *resource->last_token) {
    report(ViolationKind::fencing_order, std::string(resource_name), {client.name(), resource->last_token_holder},
           client.name() + " drew fencing token " + std::to_string(*fencing_token) + " after " +
               resource->last_token_holder + " drew " + std::to_string(*resource->last_token),
           state_lost_since(resource->last_token_ms));
  }
  if (!resource->last_token || *fencing_token > *resource->last_token) {
    // Drawn during the call: before a loss its answer may have come after.
    resource->last_token = *fencing_token;
    resource->last_token_ms = waited_since_ms.value_or(world_.now_ms());
  }
  resource->last_token_holder = client.name();
}

void Checkers::judge_undecided_grant(Resource& resource, const SimClient& client, std::int64_t waited_since_ms) {
  if (resource.options.quorum > 1 || resource.options.readers_writers) return;
  const std::int64_t now_ms = world_.now_ms();
  const auto own = std::find_if(resource.grants.begin(), resource.grants.end(),
                                [&](const auto& entry) { return name_of_holder(entry.first) == client.name(); });
  if (own == resource.grants.end() || world_.server_epoch(own->second.server) == own->second.epoch) return;
  // record_grant() left this grant out of the grants made while its client
  // waited: judged now that the client believes it holds.
  std::vector<std::string> others;
  for (const auto& [holder, live] : resource.grants) {
    if (holder == own->first || live.granted_ms < waited_since_ms) continue;
    if (live.deadline_ms && *live.deadline_ms < now_ms) continue;
    others.push_back(name_of_holder(holder));
  }
  if (static_cast<std::int64_t>(others.size()) < resource.options.capacity) return;
  std::string what = client.name() + " learned it was granted it by server-" + std::to_string(own->second.server) +
                     " before a failover or restart lost the grant, while " + std::to_string(others.size()) +
                     " later grant(s) were live (capacity " + std::to_string(resource.options.capacity) + ")";
  others.insert(others.begin(), client.name());
  report(ViolationKind::mutual_exclusion, resource.options.resource, std::move(others), std::move(what),
         grant_lost_ms(resource, own->first, own->second));
}

void Checkers::judge_lock_delay(const Resource& resource, const SimClient& client) {
  const WatchOptions& options = resource.options;
  if (options.lock_delay <= Duration::zero() || options.capacity != 1 || options.quorum > 1 ||
      options.readers_writers) {
    return;
  }
  const Instant now = world_.now();
  for (const auto& [key, belief] : beliefs_) {
    const auto& [id, name] = key;
    if (id == client.id() || name != options.resource) continue;
    const std::string holder = world_.client_name(id);
    std::optional<Instant> ended_deadline = belief.lost_deadline;
    std::int64_t told_ms = belief.lost_told_ms;
    if (!ended_deadline && belief.permits_held > 0 && belief.told_deadline && world_.client(holder).crashed()) {
      ended_deadline = belief.told_deadline;
      told_ms = belief.told_ms;
    }
    if (!ended_deadline) continue;
    const Instant closed_until = *ended_deadline + options.lock_delay - options.lock_delay / 100;
    if (now >= closed_until) continue;
    report(ViolationKind::lock_delay, options.resource, {client.name(), holder},
           client.name() + " began to hold it " + std::to_string(to_ms(closed_until - now)) + " ms before " + holder +
               "'s hold, ended without a release at its deadline " +
               std::to_string(to_ms(ended_deadline->time_since_epoch())) +
               " ms, stopped keeping it closed (lock-delay " + std::to_string(to_ms(options.lock_delay)) + " ms)",
           state_lost_since(told_ms));
  }
}

void Checkers::lease_deadline(const SimClient& client, std::string_view resource, Instant deadline) {
  Belief& belief = beliefs_[{client.id(), std::string(resource)}];
  belief.told_deadline = deadline;
  belief.told_ms = world_.now_ms();
}

void Checkers::released(const SimClient& client, std::string_view resource, std::int64_t permits, bool shared) {
  Belief& belief = beliefs_[{client.id(), std::string(resource)}];
  belief.lost_deadline.reset();  // released: a key it left ends now
  belief.permits_held -= permits;
  // The belief ended at releasing(); without it, it ends now.
  const std::int64_t announced = std::min(permits, belief.permits_releasing);
  belief.permits_releasing -= announced;
  end_belief(client, resource, permits - announced, shared);
  if (Resource* watched = find(resource)) end_claims(*watched, client);
}

void Checkers::gave_up(const SimClient& client, std::string_view resource) {
  beliefs_[{client.id(), std::string(resource)}].waiting_since_ms.reset();
}

void Checkers::withdrawn(const SimClient& client, std::string_view resource) {
  gave_up(client, resource);
  if (Resource* watched = find(resource)) end_claims(*watched, client);
}

void Checkers::end_claims(Resource& resource, const SimClient& client) {
  const std::int64_t now_ms = world_.now_ms();
  std::erase_if(resource.grants, [&](const auto& entry) {
    if (name_of_holder(entry.first) != client.name()) return false;
    const LiveGrant& grant = entry.second;
    if (resource.options.quorum > 1 || world_.server_epoch(grant.server) != grant.epoch) return true;
    const ResourceState state = resource.options.reader(world_.server(grant.server));
    return std::none_of(state.grants.begin(), state.grants.end(), [&](const Grant& listed) {
      return listed.holder == entry.first && !(listed.deadline_ms && *listed.deadline_ms < now_ms);
    });
  });
}

void Checkers::expire_beliefs(OpenBeliefs& beliefs) {
  const Instant now = world_.now();
  std::erase_if(beliefs, [now](const auto& entry) {
    const OpenBelief& belief = entry.second;
    const std::optional<Instant> crashed_at = belief.client->crashed_at();
    return (crashed_at && *crashed_at <= now) || (belief.until && *belief.until <= now);
  });
}

void Checkers::judge_readers_writers_belief(const SimClient& client, const std::string& resource,
                                            const OpenBeliefs& beliefs, bool shared) {
  std::vector<std::string> others;
  bool running = false, writer_among_others = false;
  std::int64_t earliest_ms = world_.now_ms(), latest_ms = 0;
  for (const auto& [id, belief] : beliefs) {
    const bool writes = belief.permits > belief.shared;
    if (id == client.id() || (shared && !writes)) continue;
    others.push_back(belief.client->name());
    running = running || !world_.scheduler().client_paused(id);
    writer_among_others = writer_among_others || writes;
    earliest_ms = std::min(earliest_ms, belief.since_ms);
    latest_ms = std::max(latest_ms, belief.asked_ms);
  }
  // Stands on a lost state when every belief it overlaps was asked for
  // before it.
  std::optional<std::int64_t> state_lost_ms = latest_state_loss();
  if (state_lost_ms && latest_ms > *state_lost_ms) state_lost_ms.reset();
  if (others.empty()) return;
  if (!running) {
    ++overlaps_while_paused_;
    world_.note("belief overlap on " + resource + " with a paused holder (" + join_names(others) + ")");
    return;
  }
  std::string what = client.name() + " began to " + (shared ? "read" : "write") + " while " + join_names(others) +
                     " still believed " + (others.size() == 1 ? "it " : "they ") +
                     (writer_among_others ? "held a write hold" : "held read holds") + " (since " +
                     std::to_string(earliest_ms) + " ms; a writer excludes everyone)";
  others.insert(others.begin(), client.name());
  report(ViolationKind::belief_overlap, resource, std::move(others), std::move(what), state_lost_ms);
}

void Checkers::open_belief(const SimClient& client, std::string_view resource_name, std::int64_t permits, bool shared,
                           std::int64_t asked_ms) {
  const Resource* resource = find(resource_name);
  if (resource == nullptr || permits <= 0) return;
  ++beliefs_opened_;
  auto found = open_beliefs_.find(resource_name);
  if (found == open_beliefs_.end()) found = open_beliefs_.emplace(std::string(resource_name), OpenBeliefs()).first;
  OpenBeliefs& beliefs = found->second;
  expire_beliefs(beliefs);
  if (resource->options.readers_writers) {
    judge_readers_writers_belief(client, found->first, beliefs, shared);
    OpenBelief& mine = beliefs[client.id()];
    if (mine.client == nullptr) mine = OpenBelief{&client, 0, 0, world_.now_ms(), std::nullopt, asked_ms};
    mine.permits += permits;
    if (shared) mine.shared += permits;
    return;
  }
  std::int64_t held = 0, held_by_running = 0;
  std::vector<std::string> others;
  std::int64_t earliest_ms = world_.now_ms();
  // Stands on a lost state when the beliefs asked for since it leave room.
  std::optional<std::int64_t> state_lost_ms = latest_state_loss();
  std::int64_t held_since_loss = 0;
  for (const auto& [id, belief] : beliefs) {
    held += belief.permits;
    if (id == client.id() || !state_lost_ms || belief.asked_ms > *state_lost_ms) held_since_loss += belief.permits;
    if (id == client.id()) {
      held_by_running += belief.permits;
      continue;
    }
    if (!world_.scheduler().client_paused(id)) held_by_running += belief.permits;
    others.push_back(belief.client->name());
    earliest_ms = std::min(earliest_ms, belief.since_ms);
  }
  const std::int64_t capacity = resource->options.capacity;
  OpenBelief& mine = beliefs[client.id()];
  if (mine.client == nullptr) mine = OpenBelief{&client, 0, 0, world_.now_ms(), std::nullopt, asked_ms};
  mine.permits += permits;
  if (held + permits <= capacity) return;
  if (held_by_running + permits <= capacity) {
    ++overlaps_while_paused_;
    world_.note("belief overlap on " + std::string(resource_name) + " with a paused holder (" + join_names(others) +
                ")");
    return;
  }
  std::string what = client.name() + " began to hold it while " + join_names(others) + " still believed " +
                     (others.size() == 1 ? "it held" : "they held") + " " + std::to_string(held) +
                     " permit(s) (since " + std::to_string(earliest_ms) + " ms; capacity " + std::to_string(capacity) +
                     ")";
  if (held_since_loss + permits > capacity) state_lost_ms.reset();
  others.insert(others.begin(), client.name());
  report(ViolationKind::belief_overlap, std::string(resource_name), std::move(others), std::move(what), state_lost_ms);
}

void Checkers::end_belief(const SimClient& client, std::string_view resource, std::int64_t permits, bool shared) {
  if (permits <= 0) return;
  const auto beliefs = open_beliefs_.find(resource);
  if (beliefs == open_beliefs_.end()) return;
  const auto found = beliefs->second.find(client.id());
  if (found == beliefs->second.end()) return;
  found->second.permits -= permits;
  if (shared) found->second.shared = std::max<std::int64_t>(0, found->second.shared - permits);
  if (found->second.permits <= 0) beliefs->second.erase(found);
}

void Checkers::believes_until(const SimClient& client, std::string_view resource, Instant deadline) {
  const auto beliefs = open_beliefs_.find(resource);
  if (beliefs == open_beliefs_.end()) return;
  const auto found = beliefs->second.find(client.id());
  if (found == beliefs->second.end()) return;
  OpenBelief& belief = found->second;
  belief.until = belief.until ? std::min(*belief.until, deadline) : deadline;
}

void Checkers::lost(const SimClient& client, std::string_view resource, bool shared) {
  Belief& belief = beliefs_[{client.id(), std::string(resource)}];
  // Only a hold it still believed in: one it began to release left no
  // delay (its release may have failed, and the loss be told after it).
  if (belief.told_deadline && belief.permits_held - belief.permits_releasing > 0) {
    belief.lost_deadline = belief.told_deadline;
    belief.lost_told_ms = belief.told_ms;
  }
  end_belief(client, resource, 1, shared);
}

void Checkers::releasing(const SimClient& client, std::string_view resource, std::int64_t permits, bool shared) {
  Belief& belief = beliefs_[{client.id(), std::string(resource)}];
  belief.permits_releasing += permits;
  belief.lost_deadline.reset();  // its release ends any delay it left
  end_belief(client, resource, permits, shared);
}

void Checkers::check_liveness() {
  for (Resource& resource : resources_) judge_free_spell(resource, world_.now_ms());
  std::map<std::string, std::int64_t, std::less<>> believed_permits;
  for (const auto& [key, belief] : beliefs_) {
    const auto& [id, resource] = key;
    const Resource* watched = find(resource);
    const bool returned =
        watched != nullptr && watched->options.permits_expire && world_.client(world_.client_name(id)).crashed();
    if (!returned) believed_permits[resource] += belief.permits_held;
    if (!belief.waiting_since_ms) continue;
    const std::string& name = world_.client_name(id);
    if (world_.client(name).crashed() || world_.scheduler().client_paused(id)) continue;
    report(ViolationKind::liveness, resource, {name},
           name + " has waited since " + std::to_string(*belief.waiting_since_ms) + " ms and never acquired");
  }
  for (Resource& resource : resources_) {
    if (!resource.options.permits) continue;
    const ResourceState state = resource.options.reader(world_.server(0));
    if (!state.free_permits) continue;
    // Expired grants are free: they return at the semaphore's next call
    // (lazily, as in Redisson), which may simply not have come yet. A
    // grant nobody believes in (its holder crashed before hearing of it)
    // ends up here too.
    std::int64_t free = *state.free_permits;
    const std::int64_t now_ms = world_.now_ms();
    for (const Grant& grant : state.grants) free += grant.deadline_ms && *grant.deadline_ms < now_ms ? 1 : 0;
    const std::int64_t held = believed_permits[resource.options.resource];
    if (free + held != resource.options.capacity) {
      report(ViolationKind::permit_conservation, resource.options.resource, {},
             std::to_string(free) + " free permit(s) and " + std::to_string(held) + " believed held do not add up to " +
                 std::to_string(resource.options.capacity));
    }
  }
}

void Checkers::report(ViolationKind kind, const std::string& resource, std::vector<std::string> clients,
                      std::string what, std::optional<std::int64_t> state_lost_ms) {
  Violation violation;
  violation.kind = kind;
  violation.virtual_ms = world_.now_ms();
  violation.resource = resource;
  violation.clients = std::move(clients);
  violation.what = std::move(what);
  violation.seed = world_.seed();
  violation.state_lost_ms = state_lost_ms;
  violation.expected = is_expected(kind, state_lost_ms);
  ++counts_[index_of(kind)];
  world_.note("VIOLATION " + std::string(violation_name(kind)) + " on " + resource + ": " + violation.what);
  if (!violation.expected) {
    ++unexpected_;
    world_.stop();
  }
  if (violations_.size() < kMaxViolationsKept) violations_.push_back(std::move(violation));
}

}  // namespace turnstile::sim
