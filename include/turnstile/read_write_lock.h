// turnstile/read_write_lock.h
//
// The read-write lock (Redisson RReadWriteLock layout): many readers or one
// writer. A C++ reader and a Java Redisson writer on the same name exclude
// each other.
//
//   turnstile::ReadWriteLock lock = client.read_write_lock("catalog");
//   {
//     std::scoped_lock reading(lock.read());    // with other readers
//     ...
//   }
//   {
//     std::scoped_lock writing(lock.write());   // alone
//     ...
//   }
//
// Both halves are Locks (lock.h: the whole contract, leases, the local
// deadline, the watchdog, waiting without polling, async forms, Holdable)
// and both are reentrant per task.
//   * Downgrade: a task holding the write lock may take the read lock too;
//     releasing the write lock then leaves it reading.
//   * Upgrade: the write lock asked for by a task that holds the read lock
//     is refused with InvalidArgumentError at once (Redisson waits forever:
//     the writer waits for its own read to end).
//   * Writers do not queue ahead of readers: under a steady stream of
//     overlapping readers a writer can wait for as long as the stream lasts,
//     as in Redisson. A reader waits only while a writer holds the lock.
//
// Keys (key_layout.h, Flavor::read_write):
//   <name>                                   hash: 'mode' = read | write,
//                                            '<owner id>' = read holds,
//                                            '<owner id>:write' = write holds
//   {<name>}:<owner id>:rwlock_timeout:<k>   one key per read hold k, with
//                                            that hold's lease; the hash
//                                            lives as long as the longest
//   redisson_rwlock:{<name>}                 releases: "0" (the last reader
//                                            left: wakes one waiter), "1"
//                                            (a writer left: wakes all)
//   redisson_unlock_latch:{<name>}:<id>      one unlock's first result
// Where Redisson can shorten the lock's ttl below a holder's lease (a read
// release during a downgrade, a watchdog renewal), turnstile never does:
// the layout is Redisson's, the lock outlives every lease it granted.

#ifndef TURNSTILE_READ_WRITE_LOCK_H_
#define TURNSTILE_READ_WRITE_LOCK_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "turnstile/export.h"
#include "turnstile/flavor.h"
#include "turnstile/lock.h"

namespace turnstile {

// The read half: shared with other readers, excluded by a writer (but
// for the writer's own reads).
class TURNSTILE_EXPORT ReadLock final : public Lock {
 private:
  friend class Client;
  TURNSTILE_HIDDEN explicit ReadLock(Lock lock) : Lock(std::move(lock)) {}
};

// The write half: alone, excluding every reader and other writers.
class TURNSTILE_EXPORT WriteLock final : public Lock {
 private:
  friend class Client;
  TURNSTILE_HIDDEN explicit WriteLock(Lock lock) : Lock(std::move(lock)) {}
};

// Both halves of one name.
class TURNSTILE_EXPORT ReadWriteLock {
 public:
  // The key of the lock hash (the client's key prefix included).
  const std::string& name() const { return read_.name(); }
  ReadLock& read() { return read_; }
  WriteLock& write() { return write_; }

  // Deletes the lock in whatever mode, whoever holds it, and wakes every
  // waiter. Returns whether there was a lock to delete. (The halves'
  // force_unlock() delete it only in their own mode, as Redisson's.)
  bool force_unlock();

 private:
  friend class Client;
  ReadWriteLock(ReadLock read, WriteLock write);

  ReadLock read_;
  WriteLock write_;
};

}  // namespace turnstile

#endif  // TURNSTILE_READ_WRITE_LOCK_H_
