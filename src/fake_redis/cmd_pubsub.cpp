// Pub/sub commands: SUBSCRIBE UNSUBSCRIBE PUBLISH, and PUBSUB CHANNELS /
// NUMSUB / NUMPAT (no pattern subscriptions exist in the fake, so NUMPAT is 0).
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

Reply confirmation(std::string_view kind, Reply channel, const Session& session) {
  return Reply::array({Reply::bulk(std::string(kind)), std::move(channel),
                       Reply::integer(static_cast<std::int64_t>(session.channels().size()))});
}

Reply one_or_many(std::vector<Reply> confirmations) {
  TURNSTILE_CHECK(!confirmations.empty());
  if (confirmations.size() == 1) return std::move(confirmations.front());
  return Reply::array(std::move(confirmations));
}

Reply subscribe(CommandContext& context) {
  TURNSTILE_CHECK_MSG(!context.from_script, "SUBSCRIBE is flagged noscript");
  std::vector<Reply> confirmations;
  for (std::size_t i = 1; i < context.argv.size(); ++i) {
    context.server.subscribe(context.session, context.argv[i]);
    TURNSTILE_CHECK(context.session.channels().contains(context.argv[i]));
    confirmations.push_back(confirmation("subscribe", Reply::bulk(context.argv[i]), context.session));
  }
  return one_or_many(std::move(confirmations));
}

Reply unsubscribe(CommandContext& context) {
  TURNSTILE_CHECK_MSG(!context.from_script, "UNSUBSCRIBE is flagged noscript");
  std::vector<std::string> channels(context.argv.begin() + 1, context.argv.end());
  // Without arguments: every channel, or one confirmation with a nil channel.
  if (channels.empty()) {
    channels.assign(context.session.channels().begin(), context.session.channels().end());
    if (channels.empty()) return confirmation("unsubscribe", Reply::nil(), context.session);
  }
  std::vector<Reply> confirmations;
  for (const std::string& channel : channels) {
    context.server.unsubscribe(context.session, channel);
    TURNSTILE_CHECK(!context.session.channels().contains(channel));
    confirmations.push_back(confirmation("unsubscribe", Reply::bulk(channel), context.session));
  }
  return one_or_many(std::move(confirmations));
}

Reply publish(CommandContext& context) {
  return Reply::integer(context.server.publish(context.argv[1], context.argv[2]));
}

// PUBSUB CHANNELS [pattern] | NUMSUB [channel ...] | NUMPAT.
Reply pubsub(CommandContext& context) {
  const std::vector<std::string>& argv = context.argv;
  const std::string subcommand = lower_case(argv[1]);
  if (subcommand == "channels" && argv.size() <= 3) {
    std::vector<Reply> channels;
    for (const std::string& channel : context.server.active_channels()) {
      // Glob as Redis's stringmatch; channel names with NUL bytes compare up to it.
      if (argv.size() == 3 && fnmatch(argv[2].c_str(), channel.c_str(), 0) != 0) continue;
      channels.push_back(Reply::bulk(channel));
    }
    return Reply::array(std::move(channels));
  }
  if (subcommand == "numsub") {
    std::vector<Reply> counts;
    for (std::size_t i = 2; i < argv.size(); ++i) {
      counts.push_back(Reply::bulk(argv[i]));
      counts.push_back(Reply::integer(context.server.subscriber_count(argv[i])));
    }
    return Reply::array(std::move(counts));
  }
  if (subcommand == "numpat" && argv.size() == 2) return Reply::integer(0);
  // Redis 7 checks NUMPAT's arity as a subcommand of its own, while CHANNELS
  // counts its arguments itself (hence two different texts).
  if (subcommand == "numpat") return error_reply(redis_errors::wrong_arity("pubsub|numpat"));
  if (subcommand == "channels") return error_reply(redis_errors::subcommand_wrong_arity(argv[1], "PUBSUB"));
  return error_reply(redis_errors::unknown_subcommand(argv[1], "PUBSUB"));
}

}  // namespace

void register_pubsub_commands(CommandTable& table) {
  table.add({"subscribe", -2, kCommandPubSub | kCommandNoScript, subscribe});
  table.add({"unsubscribe", -1, kCommandPubSub | kCommandNoScript, unsubscribe});
  table.add({"publish", 3, 0, publish});
  table.add({"pubsub", -2, kCommandReadOnly, pubsub});
}

}  // namespace turnstile::sim
