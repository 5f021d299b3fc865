// The fake's AOF model: see append_only_file.h.

#include "fake_redis/append_only_file.h"

#include "core/check.h"
#include "fake_redis/command_args.h"

namespace turnstile::sim {

std::string_view persistence_name(Persistence persistence) {
  switch (persistence) {
    case Persistence::none:
      return "none";
    case Persistence::everysec:
      return "everysec";
    case Persistence::always:
      return "always";
  }
  return "none";
}

WriteEffect write_effect(const std::vector<std::string>& argv) {
  TURNSTILE_CHECK(!argv.empty());
  WriteEffect effect;
  if (option_is(argv[0], "flushall") || option_is(argv[0], "flushdb")) {
    effect.flush_all = true;
  } else if (option_is(argv[0], "del")) {
    effect.keys.assign(argv.begin() + 1, argv.end());
  } else if (argv.size() > 1) {
    effect.keys.push_back(argv[1]);
  }
  return effect;
}

void KeySnapshot::take(Keyspace& keyspace, const WriteEffect& effect, std::deque<KeySnapshot>& out) {
  if (effect.flush_all) {
    out.push_back(KeySnapshot{.written_ms = keyspace.now_ms(), .flush_all = true});
    return;
  }
  for (const std::string& key : effect.keys) {
    KeySnapshot entry{.written_ms = keyspace.now_ms(), .key = key};
    if (const Value* value = keyspace.find(key)) {
      entry.value = *value;
      entry.deadline_ms = keyspace.deadline_ms(key);
    }
    out.push_back(std::move(entry));
  }
}

void KeySnapshot::apply_to(Keyspace& keyspace) const {
  if (flush_all) {
    keyspace.clear();
  } else if (!value) {
    keyspace.erase(key);
  } else {
    keyspace.set(key, *value);
    if (deadline_ms) keyspace.set_deadline_ms(key, deadline_ms);
  }
}

void AppendOnlyFile::record(Keyspace& live, const std::vector<std::string>& argv) {
  if (persistence_ != Persistence::everysec) return;
  fsync_through(live.now_ms());
  KeySnapshot::take(live, write_effect(argv), unsynced_);
  while (unsynced_.size() > kMaxUnsynced) {
    unsynced_.front().apply_to(durable_);
    unsynced_.pop_front();
  }
}

void AppendOnlyFile::fsync_through(std::int64_t now_ms) {
  const std::int64_t last_fsync_ms = now_ms - now_ms % kFsyncPeriodMs;
  while (!unsynced_.empty() && unsynced_.front().written_ms < last_fsync_ms) {
    unsynced_.front().apply_to(durable_);
    unsynced_.pop_front();
  }
}

bool AppendOnlyFile::recover(Keyspace& live) {
  switch (persistence_) {
    case Persistence::none:
      live.clear();
      return true;  // whatever there was
    case Persistence::always:
      return false;  // every acknowledged write is on disk
    case Persistence::everysec:
      break;
  }
  fsync_through(live.now_ms());
  const bool lost = !unsynced_.empty();
  unsynced_.clear();  // written, never fsynced: lost
  copy(durable_, live);
  return lost;
}

void AppendOnlyFile::start(Persistence persistence, Keyspace& live) {
  persistence_ = persistence;
  unsynced_.clear();
  durable_.clear();
  if (persistence == Persistence::everysec) copy(live, durable_);
}

void AppendOnlyFile::copy(Keyspace& from, Keyspace& to) {
  to.clear();
  for (const std::string& key : from.keys()) {
    const Value* value = from.find(key);
    TURNSTILE_CHECK(value != nullptr);
    to.set(key, *value);
    if (const std::optional<std::int64_t> deadline = from.deadline_ms(key)) to.set_deadline_ms(key, deadline);
  }
}

}  // namespace turnstile::sim
