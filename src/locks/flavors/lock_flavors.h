// locks/flavors/lock_flavors.h
//
// The lock flavors as LockEngine subclasses (lock_engine.h): each supplies
// the engine's hooks for its scripts and keys. The public handles
// (ReentrantLock, TokenLock, FairLock, ReadLock, WriteLock) are made by
// Client on one of these. One .cpp per flavor:
//   ReentrantEngine  reentrant_lock.cpp   Redisson RLock / RFencedLock
//   TokenEngine      token_lock.cpp       SET NX PX, compare-and-delete
//   FairEngine       fair_lock.cpp        Redisson RFairLock (fair_lock.h)
//   ReadEngine,      read_write_lock.cpp  Redisson RReadWriteLock halves
//   WriteEngine

#ifndef TURNSTILE_LOCKS_FLAVORS_LOCK_FLAVORS_H_
#define TURNSTILE_LOCKS_FLAVORS_LOCK_FLAVORS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "locks/engine/lock_engine.h"
#include "turnstile/fair_lock.h"

namespace turnstile::detail {

class ReentrantEngine final : public LockEngine {
 public:
  ReentrantEngine(std::shared_ptr<ClientCore> client, std::string_view name, bool fenced, const LockOptions& options);

  bool fenced() const { return fenced_; }
  Flavor flavor() const override { return Flavor::reentrant; }

 private:
  ScriptCall attempt_call(const std::string& owner, Duration lease, Holding& holding) override;
  Attempt attempt_result(const Reply& reply, const Holding& holding) override;
  std::optional<ScriptCall> release_call(const std::string& owner, const Holding& holding) override;
  ReleaseResult release_result(const Reply& reply) override;
  bool release_retriable() const override { return true; }
  Status status(const std::string& owner, const Holding* holding) override;
  std::string_view key_type() const override { return "hash"; }
  const Script& renew_script() const override;
  std::string renew_holder(const std::string& owner, const Holding& holding) const override;
  bool reentrant() const override { return true; }
  // Direct handoff to registered processes (lua/lib/wake_registry.lua):
  // a waiting try leaves its process's offer, a release grants the lock to
  // the oldest registered process's, the grant is taken from the message.
  bool takes_process_grants() const override;
  std::optional<Attempt> take_grant(const std::string& owner, Duration lease, Holding& scratch) override;
  void abandon(const std::string& owner, const Holding& scratch) override;

  bool fenced_;
};

// Not reentrant: lock() by a task that already holds it throws
// InvalidArgumentError rather than deadlocking.
class TokenEngine final : public LockEngine {
 public:
  TokenEngine(std::shared_ptr<ClientCore> client, std::string_view name, const LockOptions& options);

  Flavor flavor() const override { return Flavor::token; }

 private:
  ScriptCall attempt_call(const std::string& owner, Duration lease, Holding& holding) override;
  Attempt attempt_result(const Reply& reply, const Holding& holding) override;
  std::optional<ScriptCall> release_call(const std::string& owner, const Holding& holding) override;
  ReleaseResult release_result(const Reply& reply) override;
  bool release_retriable() const override;
  Status status(const std::string& owner, const Holding* holding) override;
  std::string_view key_type() const override { return "string"; }
  const Script& renew_script() const override;
  std::string renew_holder(const std::string& owner, const Holding& holding) const override;
  bool reentrant() const override { return false; }
  WakeOptions wake_options() const override;
};

class FairEngine final : public LockEngine {
 public:
  FairEngine(std::shared_ptr<ClientCore> client, std::string_view name, const FairLockOptions& options);

  const FairLockOptions& options() const { return options_; }
  Flavor flavor() const override { return Flavor::fair; }

  // FairLock::queue_length() / queue_position() (fair_lock.h).
  std::int64_t queue_length();
  std::optional<std::int64_t> queue_position(const std::string& owner);

 private:
  struct QueueStatus {
    Status lock;
    std::int64_t queue_length = 0;
    std::int64_t position = -1;
  };

  ScriptCall attempt_call(const std::string& owner, Duration lease, Holding& holding) override;
  Attempt attempt_result(const Reply& reply, const Holding& holding) override;
  std::optional<ScriptCall> release_call(const std::string& owner, const Holding& holding) override;
  ReleaseResult release_result(const Reply& reply) override;
  bool release_retriable() const override { return true; }
  Status status(const std::string& owner, const Holding* holding) override;
  std::string_view key_type() const override { return "hash"; }
  const Script& renew_script() const override;
  std::string renew_holder(const std::string& owner, const Holding& holding) const override;
  bool reentrant() const override { return true; }
  std::string wait_channel(const std::string& owner) const override;
  void abandon(const std::string& owner, const Holding& scratch) override;
  std::optional<Attempt> take_grant(const std::string& owner, Duration lease, Holding& scratch) override;
  // Whether this lock's waiters offer to take grants (Handoff::direct, not fenced).
  bool direct_handoff() const;
  bool force_delete() override;
  std::optional<std::int64_t> queue_position_for_event(const std::string& owner) override;

  QueueStatus queue_status(const std::string& owner);

  FairLockOptions options_;
};

// The read half: shared with other readers, excluded by a writer (but for
// the writer's own reads).
class ReadEngine final : public LockEngine {
 public:
  ReadEngine(std::shared_ptr<ClientCore> client, std::string_view name, const LockOptions& options);

  Flavor flavor() const override { return Flavor::read_write; }

 private:
  ScriptCall attempt_call(const std::string& owner, Duration lease, Holding& holding) override;
  Attempt attempt_result(const Reply& reply, const Holding& holding) override;
  std::optional<ScriptCall> release_call(const std::string& owner, const Holding& holding) override;
  ReleaseResult release_result(const Reply& reply) override;
  bool release_retriable() const override { return true; }
  Status status(const std::string& owner, const Holding* holding) override;
  std::string_view key_type() const override { return "hash"; }
  const Script& renew_script() const override;
  std::string renew_holder(const std::string& owner, const Holding& holding) const override;
  bool reentrant() const override { return true; }
  bool force_delete() override;
  WakeOptions wake_options() const override;

  // The write half's local records at the same name: a task reads through
  // its write hold (downgrade) only while it believes it has one.
  std::shared_ptr<LockCore> write_core_;
};

// The write half: alone, excluding every reader and other writers.
class WriteEngine final : public LockEngine {
 public:
  WriteEngine(std::shared_ptr<ClientCore> client, std::string_view name, const LockOptions& options);

  Flavor flavor() const override { return Flavor::read_write; }

 private:
  ScriptCall attempt_call(const std::string& owner, Duration lease, Holding& holding) override;
  Attempt attempt_result(const Reply& reply, const Holding& holding) override;
  std::optional<ScriptCall> release_call(const std::string& owner, const Holding& holding) override;
  ReleaseResult release_result(const Reply& reply) override;
  bool release_retriable() const override { return true; }
  Status status(const std::string& owner, const Holding* holding) override;
  std::string_view key_type() const override { return "hash"; }
  const Script& renew_script() const override;
  std::string renew_holder(const std::string& owner, const Holding& holding) const override;
  bool reentrant() const override { return true; }
  bool force_delete() override;
  WakeOptions wake_options() const override;
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_FLAVORS_LOCK_FLAVORS_H_
