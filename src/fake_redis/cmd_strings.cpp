// String commands: GET STRLEN SET INCR INCRBY DECR DECRBY.

#include <limits>

#include "fake_redis/command_args.h"
#include "fake_redis/server.h"

namespace turnstile::sim {
namespace {

constexpr std::int64_t kMsPerSecond = 1000;

Reply get(CommandContext& context) {
  Typed<std::string> found = context.keyspace.find_as<std::string>(context.argv[1]);
  if (found.wrong_type) return wrong_type_reply();
  return found.value ? Reply::bulk(*found.value) : Reply::nil();
}

Reply string_length(CommandContext& context) {
  Typed<std::string> found = context.keyspace.find_as<std::string>(context.argv[1]);
  if (found.wrong_type) return wrong_type_reply();
  return Reply::integer(found.value ? static_cast<std::int64_t>(found.value->size()) : 0);
}

// SET's options, parsed with Redis's rules: NX/XX exclude each other, at
// most one of EX/PX/EXAT/PXAT/KEEPTTL (the same one may repeat; the last
// value wins), anything else is a syntax error. Before 7.0, NX and GET
// exclude each other too.
struct SetOptions {
  bool nx = false, xx = false, get = false, keepttl = false;
  enum class Expiry { none, ex, px, exat, pxat } expiry = Expiry::none;
  const std::string* expiry_argument = nullptr;
};

std::optional<SetOptions::Expiry> expiry_option(std::string_view option) {
  using Expiry = SetOptions::Expiry;
  static constexpr std::pair<std::string_view, Expiry> kOptions[] = {
      {"ex", Expiry::ex}, {"px", Expiry::px}, {"exat", Expiry::exat}, {"pxat", Expiry::pxat}};
  for (const auto& [name, kind] : kOptions) {
    if (option_is(option, name)) return kind;
  }
  return std::nullopt;
}

std::optional<SetOptions> parse_set_options(const ServerProfile& profile, const std::vector<std::string>& argv) {
  using Expiry = SetOptions::Expiry;
  const bool nx_with_get = profile.set_nx_get_allowed;
  SetOptions options;
  for (std::size_t i = 3; i < argv.size(); ++i) {
    const std::string& option = argv[i];
    const bool has_next = i + 1 < argv.size();
    auto expiry_allowed = [&](Expiry kind) {
      return has_next && !options.keepttl && (options.expiry == Expiry::none || options.expiry == kind);
    };
    if (option_is(option, "nx") && !options.xx && (nx_with_get || !options.get)) {
      options.nx = true;
    } else if (option_is(option, "xx") && !options.nx) {
      options.xx = true;
    } else if (option_is(option, "get") && (nx_with_get || !options.nx)) {
      options.get = true;
    } else if (option_is(option, "keepttl") && options.expiry == Expiry::none) {
      options.keepttl = true;
    } else if (std::optional<Expiry> kind = expiry_option(option); kind && expiry_allowed(*kind)) {
      options.expiry = *kind;
      options.expiry_argument = &argv[++i];
    } else {
      return std::nullopt;
    }
  }
  return options;
}

Reply set(CommandContext& context) {
  using Expiry = SetOptions::Expiry;
  const auto& argv = context.argv;
  const ServerProfile& profile = context.server.profile();
  std::optional<SetOptions> options = parse_set_options(profile, argv);
  if (!options) return syntax_error_reply();

  // The deadline in Unix ms, checked as Redis's getExpireMillisecondsOrReply.
  std::optional<std::int64_t> deadline_unix_ms;
  const std::int64_t unix_now_ms = context.server.server_clock().unix_time_ms();
  if (options->expiry != Expiry::none) {
    std::optional<std::int64_t> amount = parse_integer(*options->expiry_argument);
    if (!amount) return not_integer_reply();
    const bool seconds = options->expiry == Expiry::ex || options->expiry == Expiry::exat;
    const bool relative = options->expiry == Expiry::ex || options->expiry == Expiry::px;
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    if (*amount <= 0 || (seconds && *amount > kMax / kMsPerSecond)) {
      return Reply::error(redis_errors::invalid_expire_time(profile, "set"));
    }
    std::int64_t ms = seconds ? *amount * kMsPerSecond : *amount;
    std::optional<std::int64_t> absolute = relative ? checked_add(ms, unix_now_ms) : ms;
    if (!absolute) return Reply::error(redis_errors::invalid_expire_time(profile, "set"));
    deadline_unix_ms = absolute;
  }

  Keyspace& keyspace = context.keyspace;
  Reply old_value;
  if (options->get) {
    old_value = get(context);
    if (old_value.is_error()) return old_value;
  }
  const bool found = keyspace.find(argv[1]) != nullptr;
  if ((options->nx && found) || (options->xx && !found)) return options->get ? old_value : Reply::nil();

  if (options->keepttl) {
    keyspace.replace_keep_deadline(argv[1], argv[2]);
  } else {
    keyspace.set(argv[1], argv[2]);
  }
  if (deadline_unix_ms) {
    // A deadline in the past (EXAT/PXAT) leaves a key that is already gone.
    const std::int64_t unix_offset_ms = unix_now_ms - keyspace.now_ms();
    if (*deadline_unix_ms <= unix_now_ms) {
      keyspace.erase(argv[1]);
    } else {
      keyspace.set_deadline_ms(argv[1], *deadline_unix_ms - unix_offset_ms);
    }
  }
  return options->get ? old_value : ok_reply();
}

// INCR, INCRBY, DECR, DECRBY: the key's string as an int64 plus `increment`,
// keeping the key's expiry.
Reply add_to_integer(CommandContext& context, std::int64_t increment) {
  Keyspace& keyspace = context.keyspace;
  Typed<std::string> found = keyspace.find_as<std::string>(context.argv[1]);
  if (found.wrong_type) return wrong_type_reply();
  std::optional<std::int64_t> value = found.value ? parse_integer(*found.value) : 0;
  if (!value) return not_integer_reply();
  std::optional<std::int64_t> sum = checked_add(*value, increment);
  if (!sum) return error_reply(redis_errors::kIncrDecrOverflow);
  keyspace.replace_keep_deadline(context.argv[1], std::to_string(*sum));
  return Reply::integer(*sum);
}

Reply incr(CommandContext& context) { return add_to_integer(context, 1); }
Reply decr(CommandContext& context) { return add_to_integer(context, -1); }

Reply incrby(CommandContext& context) {
  std::optional<std::int64_t> increment = parse_integer(context.argv[2]);
  if (!increment) return not_integer_reply();
  return add_to_integer(context, *increment);
}

Reply decrby(CommandContext& context) {
  std::optional<std::int64_t> decrement = parse_integer(context.argv[2]);
  if (!decrement) return not_integer_reply();
  if (*decrement == std::numeric_limits<std::int64_t>::min()) {
    // Redis 6.2 negates it unchecked, which leaves it -2^63 (x86), and adds that.
    if (!context.server.profile().decrby_checks_minimum) return add_to_integer(context, *decrement);
    return error_reply(redis_errors::kDecrementOverflow);
  }
  return add_to_integer(context, -*decrement);
}

}  // namespace

void register_string_commands(CommandTable& table) {
  table.add({"get", 2, kCommandReadOnly, get});
  table.add({"strlen", 2, kCommandReadOnly, string_length});
  table.add({"set", -3, kCommandWrite, set});
  table.add({"incr", 2, kCommandWrite, incr});
  table.add({"decr", 2, kCommandWrite, decr});
  table.add({"incrby", 3, kCommandWrite, incrby});
  table.add({"decrby", 3, kCommandWrite, decrby});
}

}  // namespace turnstile::sim
