// cli/holder_identity.h
//
// Who holds a lock, as the CLI writes it and shows it (key_layout.h, "The
// holder's identity"). `turnstile run` stores its command line, redacted:
// each argument as typed (argv only, never the environment), except
//   - the value of an option whose name has "pass", "pw", "secret",
//     "token", "auth", "credential" or "apikey"/"api-key"/"api_key" in it
//     (any case): "--password=X", "--pw=X", "--auth-token X" (the next
//     argument), "-a X" (redis-cli's password), and whatever is glued to
//     "-p" ("-pX", mysql's password; "-print" too: the safe side);
//   - the value of NAME=VALUE when NAME has one of those words
//     ("PGPASSWORD=X", "AWS_SECRET_ACCESS_KEY=X");
//   - the user and password of a URL ("redis://user:pw@host" ->
//     "redis://***@host");
// each becomes "***". Arguments with spaces are single-quoted, and the
// line is cut to kMaxHolderCommandBytes ("..." at the end).

#ifndef TURNSTILE_CLI_HOLDER_IDENTITY_H_
#define TURNSTILE_CLI_HOLDER_IDENTITY_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/inspection.h"

namespace turnstile::cli {

inline constexpr std::string_view kRedacted = "***";

// The command line as stored (the file comment).
std::string redacted_command_line(const std::vector<std::string>& argv);

// A string from Redis as the CLI prints it for people: as it is when it
// has nothing to escape, else in_quotes() (turnstile/errors.h: control
// characters, C1 included, and invalid UTF-8 as \xHH), so a name, owner,
// host, command or label written by anyone cannot drive the terminal.
std::string printable(std::string_view text);

// "host:pid", or "?" for a holder (a reader, a permit) without an identity.
std::string holder_host_pid(const std::optional<HolderIdentity>& identity);

// For people: 'host:pid, command "...", since <local time>[, label "x"]', or
// why there is none (a foreign or older client).
std::string holder_identity_text(const std::optional<HolderIdentity>& identity);

inline constexpr std::string_view kNoIdentity = "(no identity: foreign or older client)";

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_HOLDER_IDENTITY_H_
