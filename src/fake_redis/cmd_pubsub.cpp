// Pub/sub commands: SUBSCRIBE UNSUBSCRIBE PUBLISH, their sharded twins
// SSUBSCRIBE SUNSUBSCRIBE SPUBLISH (Redis 7: a namespace of their own, the
// confirmations counting shard channels only, messages pushed as
// "smessage"; not in Redis 6.2's profile), and PUBSUB CHANNELS / NUMSUB /
// SHARDCHANNELS / SHARDNUMSUB / NUMPAT (no pattern subscriptions exist in the fake, so NUMPAT is 0). The
// fake is one node: a shard channel of any slot is served (a Cluster node
// would answer MOVED), and several channels in one SSUBSCRIBE need not share
// a slot (a Cluster would answer CROSSSLOT).
//
// RESP2 answers SUBSCRIBE and UNSUBSCRIBE with one confirmation
// [kind, channel, subscription count] per channel, as separate replies. One
// execute() returns one Reply: the confirmation itself when there is one,
// else an array of the confirmations in order.

#include <fnmatch.h>

#include "core/check.h"
#include "fake_redis/command_args.h"
#include "fake_redis/redis_errors.h"
#include "fake_redis/server.h"

namespace turnstile::sim {
namespace {

// "subscribe" / "ssubscribe", "unsubscribe" / "sunsubscribe".
std::string kind_of(std::string_view kind, ChannelScope scope) {
  return scope == ChannelScope::shard ? "s" + std::string(kind) : std::string(kind);
}

Reply confirmation(std::string_view kind, Reply channel, const Session& session, ChannelScope scope) {
  return Reply::array({Reply::bulk(kind_of(kind, scope)), std::move(channel),
                       Reply::integer(static_cast<std::int64_t>(session.channels(scope).size()))});
}

Reply one_or_many(std::vector<Reply> confirmations) {
  TURNSTILE_CHECK(!confirmations.empty());
  if (confirmations.size() == 1) return std::move(confirmations.front());
  return Reply::array(std::move(confirmations));
}

Reply subscribe_in(CommandContext& context, ChannelScope scope) {
  TURNSTILE_CHECK_MSG(!context.from_script, "(S)SUBSCRIBE is flagged noscript");
  std::vector<Reply> confirmations;
  for (std::size_t i = 1; i < context.argv.size(); ++i) {
    context.server.subscribe(context.session, context.argv[i], scope);
    TURNSTILE_CHECK(context.session.channels(scope).contains(context.argv[i]));
    confirmations.push_back(confirmation("subscribe", Reply::bulk(context.argv[i]), context.session, scope));
  }
  return one_or_many(std::move(confirmations));
}

Reply unsubscribe_in(CommandContext& context, ChannelScope scope) {
  TURNSTILE_CHECK_MSG(!context.from_script, "(S)UNSUBSCRIBE is flagged noscript");
  std::vector<std::string> channels(context.argv.begin() + 1, context.argv.end());
  // Without arguments: every channel, or one confirmation with a nil channel.
  if (channels.empty()) {
    channels.assign(context.session.channels(scope).begin(), context.session.channels(scope).end());
    if (channels.empty()) return confirmation("unsubscribe", Reply::nil(), context.session, scope);
  }
  std::vector<Reply> confirmations;
  for (const std::string& channel : channels) {
    context.server.unsubscribe(context.session, channel, scope);
    TURNSTILE_CHECK(!context.session.channels(scope).contains(channel));
    confirmations.push_back(confirmation("unsubscribe", Reply::bulk(channel), context.session, scope));
  }
  return one_or_many(std::move(confirmations));
}

Reply subscribe(CommandContext& context) { return subscribe_in(context, ChannelScope::classic); }
Reply unsubscribe(CommandContext& context) { return unsubscribe_in(context, ChannelScope::classic); }
Reply ssubscribe(CommandContext& context) { return subscribe_in(context, ChannelScope::shard); }
Reply sunsubscribe(CommandContext& context) { return unsubscribe_in(context, ChannelScope::shard); }

Reply publish(CommandContext& context) {
  return Reply::integer(context.server.publish(context.argv[1], context.argv[2]));
}

Reply spublish(CommandContext& context) {
  return Reply::integer(context.server.publish(context.argv[1], context.argv[2], ChannelScope::shard));
}

Reply active_channels(CommandContext& context, ChannelScope scope) {
  const std::vector<std::string>& argv = context.argv;
  std::vector<Reply> channels;
  for (const std::string& channel : context.server.active_channels(scope)) {
    // Glob as Redis's stringmatch; channel names with NUL bytes compare up to it.
    if (argv.size() == 3 && fnmatch(argv[2].c_str(), channel.c_str(), 0) != 0) continue;
    channels.push_back(Reply::bulk(channel));
  }
  return Reply::array(std::move(channels));
}

Reply subscriber_counts(CommandContext& context, ChannelScope scope) {
  const std::vector<std::string>& argv = context.argv;
  std::vector<Reply> counts;
  for (std::size_t i = 2; i < argv.size(); ++i) {
    counts.push_back(Reply::bulk(argv[i]));
    counts.push_back(Reply::integer(context.server.subscriber_count(argv[i], scope)));
  }
  return Reply::array(std::move(counts));
}

// PUBSUB CHANNELS [pattern] | NUMSUB [channel ...] | NUMPAT.
Reply pubsub(CommandContext& context) {
  const std::vector<std::string>& argv = context.argv;
  const std::string subcommand = lower_case(argv[1]);
  const ServerProfile& profile = context.server.profile();
  const bool sharded = profile.has_sharded_pubsub;
  if (subcommand == "channels" && argv.size() <= 3) return active_channels(context, ChannelScope::classic);
  if (sharded && subcommand == "shardchannels" && argv.size() <= 3) {
    return active_channels(context, ChannelScope::shard);
  }
  if (subcommand == "numsub") return subscriber_counts(context, ChannelScope::classic);
  if (sharded && subcommand == "shardnumsub") return subscriber_counts(context, ChannelScope::shard);
  if (subcommand == "numpat" && argv.size() == 2) return Reply::integer(0);
  // Before 7.0 one text for every subcommand PUBSUB does not take so.
  if (!profile.subcommands_are_commands) return error_reply(redis_errors::subcommand_syntax_error(argv[1], "PUBSUB"));
  // Redis 7 checks NUMPAT's arity as a subcommand of its own, while CHANNELS
  // counts its arguments itself (hence two different texts).
  if (subcommand == "numpat") return error_reply(redis_errors::wrong_arity("pubsub|numpat"));
  if (subcommand == "channels" || subcommand == "shardchannels") {
    return error_reply(redis_errors::subcommand_wrong_arity(argv[1], "PUBSUB"));
  }
  return error_reply(redis_errors::unknown_subcommand(argv[1], "PUBSUB"));
}

}  // namespace

void register_pubsub_commands(CommandTable& table) {
  table.add({"subscribe", -2, kCommandPubSub | kCommandNoScript, subscribe});
  table.add({"unsubscribe", -1, kCommandPubSub | kCommandNoScript, unsubscribe});
  table.add({"publish", 3, 0, publish});
  table.add({"ssubscribe", -2, kCommandPubSub | kCommandNoScript | kCommandShardedPubSub, ssubscribe});
  table.add({"sunsubscribe", -1, kCommandPubSub | kCommandNoScript | kCommandShardedPubSub, sunsubscribe});
  table.add({"spublish", 3, kCommandShardedPubSub, spublish});
  table.add({"pubsub", -2, kCommandReadOnly, pubsub});
}

}  // namespace turnstile::sim
