// locks/handles/identity_writer.h
//
// The holder identity a process writes with every acquisition
// (holder_identity_value(), turnstile/key_layout.h): its fixed lines (host,
// pid, command, label) made once per client, the owner, the start and the
// lock-delay added per call. holder_identity_value() is made by it too, so
// the bytes are the same by construction.

#ifndef TURNSTILE_LOCKS_HANDLES_IDENTITY_WRITER_H_
#define TURNSTILE_LOCKS_HANDLES_IDENTITY_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "turnstile/key_layout.h"

namespace turnstile::detail {

class IdentityWriter {
 public:
  // `process`'s host, pid, command and label; its owner, start and
  // lock-delay are ignored (value() takes them).
  explicit IdentityWriter(const HolderIdentity& process);

  // holder_identity_value() of `process` with these three fields.
  [[nodiscard]] std::string value(std::string_view owner, std::int64_t started_at_epoch_ms,
                                  std::int64_t lock_delay_ms) const;

 private:
  std::string host_and_pid_;       // "\nhost=<host>\npid=<pid>"
  std::string command_and_label_;  // "\ncommand=<command>\nlabel=<label>"
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_HANDLES_IDENTITY_WRITER_H_
