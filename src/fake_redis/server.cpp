// The fake server's command path: lookup, arity, subscribed-mode and script
// restrictions in the order redis-server 7.0 checks them, then the handler.
//
// SUBSCRIBE and UNSUBSCRIBE answer one confirmation per channel, which RESP2
// sends as separate replies; execute() returns the confirmation itself for a
// single channel and an array of them otherwise (see cmd_pubsub.cpp).

#include "fake_redis/server.h"

#include "core/check.h"
#include "fake_redis/command_args.h"
#include "fake_redis/command_table.h"
#include "fake_redis/keyspace.h"
#include "fake_redis/redis_errors.h"

namespace turnstile::sim {
namespace {

// Two arguments and the name: the EXPIRE family before its options.
constexpr int kExpireArityWithoutOptions = 3;

// The command `name` names in `profile`'s release: nullptr if unknown there.
const CommandSpec* find_command(const ServerProfile& profile, std::string_view name) {
  const CommandSpec* spec = command_table().find(name);
  if (spec != nullptr && (spec->flags & kCommandShardedPubSub) != 0 && !profile.has_sharded_pubsub) return nullptr;
  return spec;
}

bool arity_ok(const ServerProfile& profile, const CommandSpec& spec, std::size_t argc) {
  auto count = static_cast<long long>(argc);
  if ((spec.flags & kCommandExpireOptions) != 0 && !profile.has_expire_options) {
    return count == kExpireArityWithoutOptions;
  }
  return spec.arity > 0 ? count == spec.arity : count >= -spec.arity;
}

// A write whose effect a replica must see. Scripts are replicated by their
// effects (each redis.call write), so EVAL/EVALSHA/SCRIPT are not.
bool is_effect(const CommandSpec& spec) {
  if ((spec.flags & kCommandWrite) == 0) return false;
  return spec.name != "eval" && spec.name != "evalsha" && spec.name != "script";
}

// The elements of `reply`: an array's, nested ones included; 1 otherwise.
std::uint64_t words_of(const Reply& reply) {
  if (!reply.is_array()) return 1;
  std::uint64_t words = 0;
  for (const Reply& element : reply.as_array()) words += words_of(element);
  return words;
}

}  // namespace

Session::~Session() { server_->forget(*this); }

Server::Server(const VirtualClock& clock, ServerOptions options, const ServerProfile& profile)
    : clock_(clock),
      options_(options),
      profile_(profile),
      server_clock_(clock),
      keyspace_(std::make_unique<Keyspace>(server_clock_)),
      append_only_file_(options.persistence, server_clock_),
      lua_(profile) {
  TURNSTILE_CHECK_MSG(options.command_cost >= Duration::zero() && options.script_base_cost >= Duration::zero() &&
                          options.script_cost_per_call >= Duration::zero(),
                      "costs are not negative");
  TURNSTILE_CHECK_MSG(options.busy_script_threshold > Duration::zero(), "the BUSY threshold is positive");
  set_clock_skew(options.clock_offset, options.clock_drift_ppm);
}

Server::~Server() {
  TURNSTILE_CHECK_MSG(subscribers_.empty() && shard_subscribers_.empty(),
                      "sessions must be destroyed before their server");
}

void Server::set_clock_skew(Duration offset, std::int64_t drift_ppm) {
  options_.clock_offset = offset;
  options_.clock_drift_ppm = drift_ppm;
  server_clock_.set_offset(offset);
  server_clock_.set_drift_ppm(drift_ppm);
  keyspace_->set_clock(server_clock_);
  append_only_file_.set_clock(server_clock_);
}

std::optional<Duration> Server::aof_fsync_wait() const {
  switch (options_.persistence) {
    case Persistence::none:
      return std::nullopt;
    case Persistence::always:
      return Duration::zero();
    case Persistence::everysec: {
      const std::int64_t now_ms = server_clock_.now_ms();
      TURNSTILE_CHECK(now_ms >= 0);
      return std::chrono::milliseconds(AppendOnlyFile::kFsyncPeriodMs - now_ms % AppendOnlyFile::kFsyncPeriodMs);
    }
  }
  return std::nullopt;
}

void Server::set_persistence(Persistence persistence) {
  options_.persistence = persistence;
  append_only_file_.start(persistence, *keyspace_);
}

bool Server::busy_with_script() const {
  const Instant now = clock_.now();
  return busy_replies_from_ <= now && now < busy_replies_until_;
}

Instant Server::answers_at() const {
  const Instant now = clock_.now();
  if (busy_until_ <= now) return now;
  // A script past the threshold: refused at the threshold, not queued.
  if (now < busy_replies_until_) return std::max(now, busy_replies_from_);
  return busy_until_;
}

void Server::record_effect(const std::vector<std::string>& argv) {
  ++write_count_;
  append_only_file_.record(*keyspace_, argv);
  if (effect_hook_) effect_hook_(argv);
}

std::unique_ptr<Session> Server::connect(Session::MessageSink sink) {
  const std::uint64_t id = next_session_id_++;
  TURNSTILE_CHECK_MSG(next_session_id_ > id, "session ids never wrap");
  return std::unique_ptr<Session>(new Session(this, id, std::move(sink)));
}

Reply Server::execute(Session& session, const std::vector<std::string>& argv) {
  TURNSTILE_CHECK(session.server_ == this);
  ++work_.commands;
  const Instant now = clock_.now();
  completed_at_ = now;  // a refused command is answered at once
  const CommandSpec* spec = argv.empty() ? nullptr : find_command(profile_, argv[0]);
  if (spec == nullptr) return Reply::error(redis_errors::unknown_command(profile_, argv));
  if (!arity_ok(profile_, *spec, argv.size())) return Reply::error(redis_errors::wrong_arity(spec->name));
  if (session.subscribed() && (spec->flags & kCommandPubSub) == 0) {
    return Reply::error(redis_errors::not_allowed_when_subscribed(profile_, spec->name));
  }
  if (busy_with_script()) return error_reply(redis_errors::kBusyScript);
  const bool script = spec->name == "eval" || spec->name == "evalsha";
  if (script) ++work_.scripts;
  count_call(*spec);
  // The service starts now, or when the work let in before it ends.
  const Instant started = std::max(now, busy_until_);
  busy_until_ = started;
  busy_for(script ? options_.script_base_cost : options_.command_cost);
  CommandContext context{*this, session, *keyspace_, argv, false};
  TURNSTILE_CHECK(spec->handler != nullptr);
  Reply reply = spec->handler(context);
  completed_at_ = busy_until_;
  if (script && completed_at_ - started > options_.busy_script_threshold) {
    busy_replies_from_ = started + options_.busy_script_threshold;
    busy_replies_until_ = completed_at_;
  }
  if (is_effect(*spec)) record_effect(argv);
  if (command_hook_) command_hook_();
  return reply;
}

Reply Server::execute_from_script(Session& session, const std::vector<std::string>& argv) {
  TURNSTILE_CHECK(session.server_ == this);
  const CommandSpec* spec = argv.empty() ? nullptr : find_command(profile_, argv[0]);
  if (spec == nullptr) return error_reply(redis_errors::script_unknown_command(profile_));
  if (!arity_ok(profile_, *spec, argv.size())) return error_reply(redis_errors::script_wrong_arity(profile_));
  if ((spec->flags & kCommandNoScript) != 0) return error_reply(redis_errors::script_not_allowed(profile_));
  CommandContext context{*this, session, *keyspace_, argv, true};
  TURNSTILE_CHECK(spec->handler != nullptr && !session.subscribed());  // a subscriber runs no script
  Reply reply = spec->handler(context);
  ++work_.script_commands;
  count_call(*spec);
  work_.script_words += argv.size() + words_of(reply);
  busy_for(options_.script_cost_per_call);
  if (is_effect(*spec)) record_effect(argv);
  return reply;
}

void Server::count_call(const CommandSpec& spec) {
  auto found = work_.calls.find(spec.name);
  if (found == work_.calls.end()) found = work_.calls.emplace(std::string(spec.name), 0).first;
  ++found->second;
}

bool Server::restart() {
  const bool lost = append_only_file_.recover(*keyspace_);
  lua_.restart();  // script cache and Lua's random generator, as a real restart
  for (ChannelScope scope : {ChannelScope::classic, ChannelScope::shard}) {
    for (auto& [channel, sessions] : subscribers(scope)) {
      for (auto& [id, session] : sessions) {
        session->channels_.clear();
        session->shard_channels_.clear();
      }
    }
    subscribers(scope).clear();
  }
  // A new process: idle, whatever the old one was running.
  busy_until_ = completed_at_ = busy_replies_from_ = busy_replies_until_ = clock_.now();
  return lost;
}

std::int64_t Server::publish(std::string_view channel, std::string_view message, ChannelScope scope) {
  Subscribers& by_channel = subscribers(scope);
  auto found = by_channel.find(channel);
  if (found == by_channel.end()) return 0;
  // BUGGIFY: lost on the way to every subscriber; the publisher cannot tell.
  if (fault("fake.publish_lost")) return static_cast<std::int64_t>(found->second.size());
  // A sink may subscribe, unsubscribe or disconnect sessions while we
  // deliver: walk a snapshot of ids and look each one up again.
  std::vector<std::uint64_t> ids;
  ids.reserve(found->second.size());
  for (const auto& [id, session] : found->second) ids.push_back(id);
  std::int64_t received = 0;
  for (std::uint64_t id : ids) {
    auto sessions = by_channel.find(channel);
    if (sessions == by_channel.end()) break;
    auto subscriber = sessions->second.find(id);
    if (subscriber == sessions->second.end()) continue;
    ++received;
    TURNSTILE_CHECK(subscriber->second->server_ == this && subscriber->second->id() == id);
    if (subscriber->second->sink_) subscriber->second->sink_(channel, message);
  }
  return received;
}

void Server::subscribe(Session& session, const std::string& channel, ChannelScope scope) {
  TURNSTILE_CHECK(session.server_ == this);
  (scope == ChannelScope::classic ? session.channels_ : session.shard_channels_).insert(channel);
  subscribers(scope)[channel][session.id()] = &session;
}

void Server::unsubscribe(Session& session, const std::string& channel, ChannelScope scope) {
  (scope == ChannelScope::classic ? session.channels_ : session.shard_channels_).erase(channel);
  Subscribers& by_channel = subscribers(scope);
  auto found = by_channel.find(channel);
  if (found == by_channel.end()) return;
  found->second.erase(session.id());
  if (found->second.empty()) by_channel.erase(found);
}

std::vector<std::string> Server::active_channels(ChannelScope scope) const {
  std::vector<std::string> channels;
  channels.reserve(subscribers(scope).size());
  for (const auto& [channel, sessions] : subscribers(scope)) channels.push_back(channel);
  return channels;
}

std::int64_t Server::subscriber_count(std::string_view channel, ChannelScope scope) const {
  auto found = subscribers(scope).find(channel);
  return found == subscribers(scope).end() ? 0 : static_cast<std::int64_t>(found->second.size());
}

void Server::forget(Session& session) {
  for (ChannelScope scope : {ChannelScope::classic, ChannelScope::shard}) {
    // Copy: unsubscribe() edits the set we would be iterating.
    std::set<std::string> channels = session.channels(scope);
    for (const std::string& channel : channels) unsubscribe(session, channel, scope);
  }
  TURNSTILE_CHECK(!session.subscribed());
}

}  // namespace turnstile::sim
