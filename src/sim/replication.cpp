#include "sim/replication.h"

#include <chrono>

#include "core/check.h"

namespace turnstile::sim {
namespace {

std::int64_t to_ms(Duration duration) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
}

}  // namespace

Replication::Replication(Server& master, const VirtualClock& clock, Duration lag)
    : master_(master), clock_(clock), lag_(lag), replica_(std::make_unique<Server>(clock, master.options())) {
  TURNSTILE_CHECK(lag >= Duration::zero());
  std::deque<KeySnapshot> copy;
  KeySnapshot::take(master_.keyspace(), WriteEffect{.keys = master_.keyspace().keys()}, copy);
  for (const KeySnapshot& entry : copy) entry.apply_to(replica_->keyspace());
  master_.set_effect_hook([this](const std::vector<std::string>& argv) { record(argv); });
}

Replication::~Replication() {
  if (replica_ != nullptr) master_.set_effect_hook(nullptr);
}

void Replication::record(const std::vector<std::string>& argv) {
  KeySnapshot::take(master_.keyspace(), write_effect(argv), backlog_);
  while (backlog_.size() > kMaxBacklog) {
    backlog_.front().apply_to(replica_->keyspace());
    backlog_.pop_front();
  }
}

void Replication::catch_up() {
  const std::int64_t horizon_ms = replica_->keyspace().now_ms() - to_ms(lag_);
  while (!backlog_.empty() && backlog_.front().written_ms <= horizon_ms) {
    backlog_.front().apply_to(replica_->keyspace());
    backlog_.pop_front();
  }
}

std::size_t Replication::promote(std::unique_ptr<Server>& replica_out) {
  TURNSTILE_CHECK(replica_ != nullptr);
  catch_up();
  master_.set_effect_hook(nullptr);
  const std::size_t lost = backlog_.size();
  backlog_.clear();
  replica_out = std::move(replica_);
  return lost;
}

}  // namespace turnstile::sim
