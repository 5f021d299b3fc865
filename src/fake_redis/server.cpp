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

bool arity_ok(const CommandSpec& spec, std::size_t argc) {
  auto count = static_cast<long long>(argc);
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

Server::Server(const VirtualClock& clock) : clock_(clock), keyspace_(std::make_unique<Keyspace>(clock)) {}

Server::~Server() { TURNSTILE_CHECK_MSG(subscribers_.empty(), "sessions must be destroyed before their server"); }

std::unique_ptr<Session> Server::connect(Session::MessageSink sink) {
  const std::uint64_t id = next_session_id_++;
  TURNSTILE_CHECK_MSG(next_session_id_ > id, "session ids never wrap");
  return std::unique_ptr<Session>(new Session(this, id, std::move(sink)));
}

Reply Server::execute(Session& session, const std::vector<std::string>& argv) {
  TURNSTILE_CHECK(session.server_ == this);
  ++work_.commands;
  const CommandSpec* spec = argv.empty() ? nullptr : command_table().find(argv[0]);
  if (spec == nullptr) return Reply::error(redis_errors::unknown_command(argv));
  if (!arity_ok(*spec, argv.size())) return Reply::error(redis_errors::wrong_arity(spec->name));
  if (!session.channels_.empty() && (spec->flags & kCommandPubSub) == 0) {
    return Reply::error(redis_errors::not_allowed_when_subscribed(spec->name));
  }
  if (spec->name == "eval" || spec->name == "evalsha") ++work_.scripts;
  CommandContext context{*this, session, *keyspace_, argv, false};
  TURNSTILE_CHECK(spec->handler != nullptr);
  Reply reply = spec->handler(context);
  if (is_effect(*spec)) {
    ++write_count_;
    if (effect_hook_) effect_hook_(argv);
  }
  if (command_hook_) command_hook_();
  return reply;
}

Reply Server::execute_from_script(Session& session, const std::vector<std::string>& argv) {
  TURNSTILE_CHECK(session.server_ == this);
  const CommandSpec* spec = argv.empty() ? nullptr : command_table().find(argv[0]);
  if (spec == nullptr) return error_reply(redis_errors::kScriptUnknownCommand);
  if (!arity_ok(*spec, argv.size())) return error_reply(redis_errors::kScriptWrongArity);
  if ((spec->flags & kCommandNoScript) != 0) return error_reply(redis_errors::kScriptNotAllowed);
  CommandContext context{*this, session, *keyspace_, argv, true};
  TURNSTILE_CHECK(spec->handler != nullptr && session.channels_.empty());  // a subscriber runs no script
  Reply reply = spec->handler(context);
  ++work_.script_commands;
  work_.script_words += argv.size() + words_of(reply);
  if (is_effect(*spec)) {
    ++write_count_;
    if (effect_hook_) effect_hook_(argv);
  }
  return reply;
}

void Server::restart() {
  keyspace_->clear();
  lua_.restart();  // script cache and Lua's random generator, as a real restart
  for (auto& [channel, sessions] : subscribers_) {
    for (auto& [id, session] : sessions) session->channels_.clear();
  }
  subscribers_.clear();
}

std::int64_t Server::publish(std::string_view channel, std::string_view message) {
  auto found = subscribers_.find(channel);
  if (found == subscribers_.end()) return 0;
  // BUGGIFY: lost on the way to every subscriber; the publisher cannot tell.
  if (fault("fake.publish_lost")) return static_cast<std::int64_t>(found->second.size());
  // A sink may subscribe, unsubscribe or disconnect sessions while we
  // deliver: walk a snapshot of ids and look each one up again.
  std::vector<std::uint64_t> ids;
  ids.reserve(found->second.size());
  for (const auto& [id, session] : found->second) ids.push_back(id);
  std::int64_t received = 0;
  for (std::uint64_t id : ids) {
    auto sessions = subscribers_.find(channel);
    if (sessions == subscribers_.end()) break;
    auto subscriber = sessions->second.find(id);
    if (subscriber == sessions->second.end()) continue;
    ++received;
    TURNSTILE_CHECK(subscriber->second->server_ == this && subscriber->second->id() == id);
    if (subscriber->second->sink_) subscriber->second->sink_(channel, message);
  }
  return received;
}

void Server::subscribe(Session& session, const std::string& channel) {
  TURNSTILE_CHECK(session.server_ == this);
  session.channels_.insert(channel);
  subscribers_[channel][session.id()] = &session;
}

void Server::unsubscribe(Session& session, const std::string& channel) {
  session.channels_.erase(channel);
  auto found = subscribers_.find(channel);
  if (found == subscribers_.end()) return;
  found->second.erase(session.id());
  if (found->second.empty()) subscribers_.erase(found);
}

std::vector<std::string> Server::active_channels() const {
  std::vector<std::string> channels;
  channels.reserve(subscribers_.size());
  for (const auto& [channel, sessions] : subscribers_) channels.push_back(channel);
  return channels;
}

std::int64_t Server::subscriber_count(std::string_view channel) const {
  auto found = subscribers_.find(channel);
  return found == subscribers_.end() ? 0 : static_cast<std::int64_t>(found->second.size());
}

void Server::forget(Session& session) {
  // Copy: unsubscribe() edits the set we would be iterating.
  std::set<std::string> channels = session.channels_;
  for (const std::string& channel : channels) unsubscribe(session, channel);
  TURNSTILE_CHECK(session.channels_.empty());
}

}  // namespace turnstile::sim
