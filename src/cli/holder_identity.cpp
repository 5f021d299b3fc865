// Who holds a lock, as the CLI writes and shows it (cli/holder_identity.h).

#include "cli/holder_identity.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "cli/duration.h"
#include "turnstile/errors.h"
#include "turnstile/key_layout.h"

namespace turnstile::cli {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Whether an option or variable of this name carries a secret.
bool is_secret_name(std::string_view name) {
  static constexpr std::array<std::string_view, 9> kWords = {"pass",   "pw",      "secret",  "token",     "auth",
                                                             "apikey", "api-key", "api_key", "credential"};
  const std::string folded = lower(name);
  return std::any_of(kWords.begin(), kWords.end(),
                     [&folded](std::string_view word) { return folded.find(word) != std::string::npos; });
}

// "scheme://user:pw@host..." -> "scheme://***@host...".
std::string without_url_credentials(std::string_view argument) {
  std::string out;
  std::size_t from = 0;
  // Bounded: each step moves past one "://".
  for (std::size_t scheme = argument.find("://"); scheme != std::string_view::npos;
       scheme = argument.find("://", from)) {
    const std::size_t start = scheme + 3;
    const std::size_t end = std::min(argument.find_first_of("/?# ", start), argument.size());
    const std::size_t at = argument.rfind('@', end == 0 ? 0 : end - 1);
    out += argument.substr(from, start - from);
    if (at != std::string_view::npos && at >= start && at < end) {
      out += kRedacted;
      from = at;
    } else {
      from = start;
    }
  }
  out += argument.substr(from);
  return out;
}

std::string quoted(const std::string& argument) {
  if (!argument.empty() && argument.find_first_of(" \t'\"") == std::string::npos) return argument;
  const char quote = argument.find('\'') == std::string::npos ? '\'' : '"';
  return quote + argument + quote;
}

// One word with the rules of the file comment; `secret_next` carries an
// option's claim on the word after it.
std::string redacted_word(std::string_view word, bool& secret_next) {
  if (secret_next) {
    secret_next = false;
    return std::string(kRedacted);
  }
  const std::size_t equals = word.find('=');
  // mysql's glued password, -pSECRET (and whatever else is glued to -p:
  // redacting too much is the safe side).
  if (word.starts_with("-p") && word.size() > 2 && word[2] != '-') return "-p" + std::string(kRedacted);
  if (word.starts_with('-')) {
    const std::string_view name = word.substr(0, equals);
    if (!is_secret_name(name)) {
      secret_next = word == "-a";
      return without_url_credentials(word);
    }
    if (equals == std::string_view::npos) {
      secret_next = true;
      return std::string(word);
    }
    return std::string(name) + "=" + std::string(kRedacted);
  }
  if (equals != std::string_view::npos && equals > 0 && is_secret_name(word.substr(0, equals))) {
    return std::string(word.substr(0, equals)) + "=" + std::string(kRedacted);
  }
  return without_url_credentials(word);
}

}  // namespace

std::string redacted_command_line(const std::vector<std::string>& argv) {
  std::string line;
  bool secret_next = false;
  for (const std::string& argument : argv) {
    // A shell string (`run -c '...'`) is read word by word as well.
    std::string shown;
    std::size_t from = 0;
    // Bounded: each step moves past one space.
    for (std::size_t space = argument.find(' '); from <= argument.size(); space = argument.find(' ', from)) {
      const std::size_t end = space == std::string::npos ? argument.size() : space;
      if (from > 0) shown += ' ';
      shown += redacted_word(std::string_view(argument).substr(from, end - from), secret_next);
      from = end + 1;
    }
    if (!line.empty()) line += ' ';
    line += quoted(shown);
    if (line.size() > kMaxHolderCommandBytes) break;
  }
  return holder_text(line, kMaxHolderCommandBytes);
}

std::string printable(std::string_view text) {
  std::string quoted = in_quotes(text);
  return quoted.size() == text.size() + 2 ? std::string(text) : quoted;
}

std::string holder_host_pid(const std::optional<HolderIdentity>& identity) {
  if (!identity) return "?";
  return printable(identity->host) + ":" + std::to_string(identity->pid);
}

std::string holder_identity_text(const std::optional<HolderIdentity>& seen) {
  if (!seen) return std::string(kNoIdentity);
  const HolderIdentity& identity = *seen;
  std::string text = holder_host_pid(seen) + ", command \"" + printable(identity.command) + "\", since " +
                     local_time_text(identity.started_at_epoch_ms);
  if (!identity.label.empty()) text += ", label \"" + printable(identity.label) + "\"";
  if (identity.lock_delay_ms > 0)
    text += ", lock-delay " + format_duration(std::chrono::milliseconds(identity.lock_delay_ms));
  return text;
}

}  // namespace turnstile::cli
