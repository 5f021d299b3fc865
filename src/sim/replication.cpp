#include "sim/replication.h"

#include <cassert>
#include <chrono>

#include <cctype>

namespace turnstile::sim {
namespace {

std::int64_t to_ms(Duration duration) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
}

bool same_name(const std::string& argument, std::string_view name) {
  if (argument.size() != name.size()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(argument[i])) != name[i]) return false;
  }
  return true;
}

}  // namespace

Replication::Replication(Server& master, const VirtualClock& clock, Duration lag)
    : master_(master), clock_(clock), lag_(lag), replica_(std::make_unique<Server>(clock)) {
  assert(lag >= Duration::zero());
  for (const std::string& key : master_.keyspace().keys()) {
    snapshot(key);
    apply(backlog_.back());
    backlog_.pop_back();
  }
  master_.set_effect_hook([this](const std::vector<std::string>& argv) { record(argv); });
}

Replication::~Replication() {
  if (replica_ != nullptr) master_.set_effect_hook(nullptr);
}

void Replication::record(const std::vector<std::string>& argv) {
  assert(!argv.empty());
  if (same_name(argv[0], "flushall")) {
    Snapshot flush;
    flush.written_ms = master_.keyspace().now_ms();
    flush.flush_all = true;
    backlog_.push_back(std::move(flush));
  } else if (same_name(argv[0], "del")) {
    for (std::size_t i = 1; i < argv.size(); ++i) snapshot(argv[i]);
  } else if (argv.size() > 1) {
    snapshot(argv[1]);  // every other write command here has one key, first
  }
  while (backlog_.size() > kMaxBacklog) {
    apply(backlog_.front());
    backlog_.pop_front();
  }
}

void Replication::snapshot(const std::string& key) {
  Keyspace& keyspace = master_.keyspace();
  Snapshot entry;
  entry.written_ms = keyspace.now_ms();
  entry.key = key;
  if (const Value* value = keyspace.find(key)) {
    entry.value = *value;
    entry.deadline_ms = keyspace.deadline_ms(key);
  }
  backlog_.push_back(std::move(entry));
}

void Replication::apply(const Snapshot& entry) {
  Keyspace& keyspace = replica_->keyspace();
  if (entry.flush_all) {
    keyspace.clear();
  } else if (!entry.value) {
    keyspace.erase(entry.key);
  } else {
    keyspace.set(entry.key, *entry.value);
    if (entry.deadline_ms) keyspace.set_deadline_ms(entry.key, entry.deadline_ms);
  }
}

void Replication::catch_up() {
  const std::int64_t horizon_ms = replica_->keyspace().now_ms() - to_ms(lag_);
  while (!backlog_.empty() && backlog_.front().written_ms <= horizon_ms) {
    apply(backlog_.front());
    backlog_.pop_front();
  }
}

std::size_t Replication::promote(std::unique_ptr<Server>& replica_out) {
  assert(replica_ != nullptr);
  catch_up();
  master_.set_effect_hook(nullptr);
  const std::size_t lost = backlog_.size();
  backlog_.clear();
  replica_out = std::move(replica_);
  return lost;
}

}  // namespace turnstile::sim
