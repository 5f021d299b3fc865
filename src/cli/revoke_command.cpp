// `turnstile revoke`: ask the holders of a name to release it.

#include "cli/revoke_command.h"

#include <cstdio>
#include <memory>

#include "cli/exit_status.h"
#include "turnstile/client.h"
#include "turnstile/revocation.h"

namespace turnstile::cli {

CLI::App* add_revoke_command(CLI::App& app, RevokeOptions& options) {
  CLI::App* revoke = app.add_subcommand(
      "revoke",
      "turnstile revoke [OPTIONS] NAME\n"
      "Ask the holders of NAME to release it: `turnstile run --on-revoke SIGNAL` (and `elect`) send SIGNAL to\n"
      "their command; a library holder's watch is told. Advice, not force: a holder that does not listen keeps\n"
      "the lock (unlock --force breaks it). Exit 0 when some process listened, 1 when nobody did.");
  add_redis_option(*revoke, options.redis);
  add_name_argument(*revoke, options.name);
  revoke
      ->add_option("--reason", options.reason,
                   "what the holder is told (at most " + std::to_string(kMaxReleaseReasonBytes) +
                       " bytes; anyone who reads Redis's traffic sees it)")
      ->type_name("TEXT");
  return revoke;
}

int revoke_command(const RevokeOptions& options) {
  ErrorContext context{.redis = {}, .name = options.name};
  try {
    check_name(options.name);
    std::shared_ptr<Backend> backend = make_backend(options.redis);
    context.redis = backend->describe();
    Client client(backend, ClientOptions{.server_check = ServerCheck::off});
    const std::int64_t listening = client.request_release(options.name, options.reason);
    if (listening == 0) {
      std::fprintf(stderr,
                   "turnstile: nobody listens for release requests of '%s' (Redis at %s): a holder that does not "
                   "watch keeps it (turnstile run --on-revoke SIGNAL listens)\n",
                   options.name.c_str(), context.redis.c_str());
      return kExitDefaultConflict;
    }
    std::printf("asked the holders of '%s' to release it: %lld process%s listening\n", options.name.c_str(),
                static_cast<long long>(listening), listening == 1 ? "" : "es");
    return kExitSuccess;
  } catch (...) {
    return report_error(std::current_exception(), context);
  }
}

}  // namespace turnstile::cli
