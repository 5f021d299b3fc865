// fake_redis/append_only_file.h
//
// What a fake server keeps across a restart (ServerOptions::persistence,
// turnstile/sim/server_options.h), as Redis's append-only file does:
//
//   * none: nothing (no AOF, no snapshots: the keyspace is lost).
//   * everysec (appendfsync everysec): every write up to the last fsync,
//     which happens once a second on the server's clock, at each whole
//     second; the writes after it are lost. This is a machine crash (power,
//     kernel): a process crash alone keeps what write(2) handed to the
//     kernel, which the `always` option models.
//   * always (appendfsync always): every write acknowledged.
//
// For everysec the file keeps a durable copy of the keyspace and the write
// effects since the last fsync as key snapshots (value and absolute
// deadline after the write, as sim/replication.h does), applied to the
// copy once their second is fsynced. Scripts are replicated by their
// effects, so a script's writes are recorded one by one. The script cache
// is never persisted (Redis 7 keeps no scripts in the AOF).
//
// Not thread-safe: one server's.

#ifndef TURNSTILE_FAKE_REDIS_APPEND_ONLY_FILE_H_
#define TURNSTILE_FAKE_REDIS_APPEND_ONLY_FILE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fake_redis/keyspace.h"
#include "turnstile/sim/server_options.h"

namespace turnstile::sim {

// "none", "everysec", "always".
std::string_view persistence_name(Persistence persistence);

// The keys a write command's effect changes (every write command of the
// fake names its key first, DEL all of its arguments), or all of them.
struct WriteEffect {
  bool flush_all = false;
  std::vector<std::string> keys;
};
WriteEffect write_effect(const std::vector<std::string>& argv);

// One key after a write: its value and deadline, or gone.
struct KeySnapshot {
  std::int64_t written_ms = 0;  // the server's ms
  bool flush_all = false;
  std::string key;
  std::optional<Value> value;  // nullopt: the key is gone
  std::optional<std::int64_t> deadline_ms;

  // The snapshots of `effect` as `keyspace` holds it now.
  static void take(Keyspace& keyspace, const WriteEffect& effect, std::deque<KeySnapshot>& out);
  void apply_to(Keyspace& keyspace) const;
};

class AppendOnlyFile {
 public:
  // Effects not yet fsynced; beyond it the oldest are fsynced early.
  static constexpr std::size_t kMaxUnsynced = 1'000'000;
  static constexpr std::int64_t kFsyncPeriodMs = 1'000;

  AppendOnlyFile(Persistence persistence, const ServerClock& clock) : persistence_(persistence), durable_(clock) {}

  Persistence persistence() const { return persistence_; }
  void set_clock(const ServerClock& clock) { durable_.set_clock(clock); }

  // Starts over with `persistence`, `live` as it is counting as fsynced.
  void start(Persistence persistence, Keyspace& live);
  // After every write effect on `live` (a no-op unless everysec).
  void record(Keyspace& live, const std::vector<std::string>& argv);
  // A restart: replaces `live` by what survives, by the persistence; true
  // when writes may have been lost (none: always; everysec: a write not
  // yet fsynced; always: never).
  bool recover(Keyspace& live);
  // Effects written but not yet fsynced (everysec).
  std::size_t unsynced() const { return unsynced_.size(); }

 private:
  // Applies to the durable copy every effect of a second already fsynced
  // at the server's `now_ms`.
  void fsync_through(std::int64_t now_ms);
  // Makes `to` hold what `from` holds (values and deadlines).
  static void copy(Keyspace& from, Keyspace& to);

  Persistence persistence_;
  Keyspace durable_;
  std::deque<KeySnapshot> unsynced_;
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_APPEND_ONLY_FILE_H_
