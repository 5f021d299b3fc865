// turnstile/errors.h
//
// Every failure turnstile reports is an exception derived from
// turnstile::Error. There are three families:
//
//   * transport: ConnectionError, TimeoutError, ProtocolError. The message
//     names the endpoint (host:port or socket path), never a password.
//   * server error replies: ServerError and its subclasses, one per Redis
//     error code that a caller may want to react to. server_message() keeps
//     the server's text verbatim ("WRONGTYPE Operation against a key ...").
//   * lock semantics: NotOwnerError (unlock by a caller that does not hold
//     the lock; PermitNotHeldError for a semaphore permit), LockLostError,
//     InvalidArgumentError, ConfigurationMismatch; UnsafeServerError for a
//     Redis that may evict lock keys.
//
// Programmer errors (calling an accessor on the wrong Reply type, destroying a
// backend with live subscriptions) are assertions, not exceptions.

#ifndef TURNSTILE_ERRORS_H_
#define TURNSTILE_ERRORS_H_

#include <stdexcept>
#include <string>
#include <string_view>

#include "turnstile/export.h"

namespace turnstile {

class TURNSTILE_EXPORT Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---- transport -------------------------------------------------------------

// Could not connect, or the connection broke. The message names host:port.
class TURNSTILE_EXPORT ConnectionError : public Error {
 public:
  using Error::Error;
};

// A connect or command did not complete within its configured timeout.
class TURNSTILE_EXPORT TimeoutError : public ConnectionError {
 public:
  using ConnectionError::ConnectionError;
};

// Every pooled connection stayed busy while a call waited its turn for one
// (RedisOptions::pool_size, command_timeout_ms), or a Client's server check,
// the handshake of a connection opened for the call or finding a Sentinel
// master did not finish by the caller's deadline (EvalOptions::send_within,
// SubscribeOptions::confirm_within): nothing was sent, so it can be resent. Transient, and no sign of an
// unreachable server: a waiting acquisition never sees it (it queues again
// within its own deadline, and its timeout is its usual result), nor does
// the watchdog count it as a failed renewal while the renewal period
// allows another try.
class TURNSTILE_EXPORT PoolExhaustedError : public TimeoutError {
 public:
  using TimeoutError::TimeoutError;
};

// rediss://: the server's certificate failed verification (an untrusted
// CA, an expired certificate, a host name it does not cover). Not
// transient: a waiting acquire throws it at once rather than riding it out
// as a broken connection. The message names the endpoint and OpenSSL's
// verification error.
class TURNSTILE_EXPORT TlsVerificationError : public ConnectionError {
 public:
  using ConnectionError::ConnectionError;
};

// A Redis Cluster call was still redirected (MOVED, ASK), refused as
// unstable (TRYAGAIN) or refused as down (CLUSTERDOWN) after
// kMaxClusterAttempts sends. The message names the keys' slot and the last
// answer.
class TURNSTILE_EXPORT ClusterRedirectError : public ConnectionError {
 public:
  using ConnectionError::ConnectionError;
};

// The server sent something that is not valid RESP, or a reply of a shape
// the caller cannot have asked for.
class TURNSTILE_EXPORT ProtocolError : public Error {
 public:
  using Error::Error;
};

// ---- server error replies --------------------------------------------------

// An error reply. what() and server_message() are the server's text.
class TURNSTILE_EXPORT ServerError : public Error {
 public:
  explicit ServerError(std::string server_message);
  const std::string& server_message() const { return server_message_; }
  // The first word of the message: "ERR", "WRONGTYPE", "NOSCRIPT", ...;
  // for an error raised inside a script that Redis 6.2 wraps ("ERR Error
  // running script (call to f_...): @user_script:1: WRONGTYPE ..."), the
  // inner error's code, as Redis 7 gives it first. Typed errors are chosen
  // by this code (throw_server_error()), never by the rest of the text.
  std::string_view code() const;

 private:
  std::string server_message_;
};

// NOAUTH, WRONGPASS: missing or bad credentials.
class TURNSTILE_EXPORT AuthenticationError : public ServerError {
 public:
  using ServerError::ServerError;
};
// NOPERM: the ACL user may not run this command or touch this key.
class TURNSTILE_EXPORT PermissionError : public ServerError {
 public:
  using ServerError::ServerError;
};
// WRONGTYPE: the key holds another kind of value (for a lock name: another
// kind of lock, or unrelated data). Nothing was overwritten.
class TURNSTILE_EXPORT WrongTypeError : public ServerError {
 public:
  using ServerError::ServerError;
};
// READONLY: the connection reached a replica.
class TURNSTILE_EXPORT ReadOnlyError : public ServerError {
 public:
  using ServerError::ServerError;
};
// NOREPLICAS: a master with min-replicas-to-write has too few good
// replicas (one lost or lagging, or promoted away in a failover); the
// write was refused and did not run. Transient: an acquisition retries it
// within its wait, and the Sentinel backend finds the master again and
// retries there (a failover in progress), as after READONLY.
class TURNSTILE_EXPORT NoReplicasError : public ServerError {
 public:
  using ServerError::ServerError;
};
// OOM: maxmemory reached and the command would use more.
class TURNSTILE_EXPORT OutOfMemoryError : public ServerError {
 public:
  using ServerError::ServerError;
};
// CROSSSLOT: keys of one call hash to different cluster slots.
class TURNSTILE_EXPORT CrossSlotError : public ServerError {
 public:
  using ServerError::ServerError;
};
// NOSCRIPT: EVALSHA of a script the server does not have. Backends handle
// it themselves (load and retry once); callers see it only if that fails.
class TURNSTILE_EXPORT NoScriptError : public ServerError {
 public:
  using ServerError::ServerError;
};
// BUSY: another script is running past lua-time-limit.
class TURNSTILE_EXPORT BusyError : public ServerError {
 public:
  using ServerError::ServerError;
};
// LOADING (the server is loading its dataset, after a restart) or
// MASTERDOWN (a replica that lost its master and serves no stale data):
// the server answers but cannot serve yet. Transient: a waiting acquire
// and the watchdog ride it out as they ride out a broken connection.
class TURNSTILE_EXPORT ServerNotReadyError : public ServerError {
 public:
  using ServerError::ServerError;
};
// SELECT of the database a URL names was refused when connecting ("ERR DB
// index is out of range"; Redis Cluster has only database 0).
class TURNSTILE_EXPORT DatabaseSelectError : public ServerError {
 public:
  using ServerError::ServerError;
};
// A script failed to compile or raised an error at run time (including
// errors raised by redis.call inside it that are not one of the above).
class TURNSTILE_EXPORT ScriptError : public ServerError {
 public:
  using ServerError::ServerError;
};

// `text` (a lock name, a key) between single quotes, fit for a one-line
// message: printable ASCII and well-formed UTF-8 as they are; backslash,
// quote, tab, CR and LF as \\ \' \t \r \n; every other byte (controls, NUL,
// DEL, bytes that are not UTF-8) as \xHH. Names are binary-safe in Redis;
// messages are not. in_quotes("a\nb") == "'a\\nb'".
TURNSTILE_EXPORT std::string in_quotes(std::string_view text);

// Throws the ServerError subclass that matches the code of `message` (the
// text of a Redis error reply, without the leading '-').
[[noreturn]] TURNSTILE_EXPORT void throw_server_error(std::string_view message);

// ---- lock semantics --------------------------------------------------------

// unlock() by a caller that does not hold the lock (the analogue of Java's
// IllegalMonitorStateException). Also raised when the lease ran out before
// the unlock: the lock is no longer the caller's to release.
class TURNSTILE_EXPORT NotOwnerError : public Error {
 public:
  using Error::Error;
};

// release() of a semaphore permit id that is not held: it expired (and went
// back to the pool), was released already, or never existed.
class TURNSTILE_EXPORT PermitNotHeldError : public NotOwnerError {
 public:
  using NotOwnerError::NotOwnerError;
};

// A held lock or permit was lost: its lease ran out or it was force-unlocked
// while the holder still believed it held it.
class TURNSTILE_EXPORT LockLostError : public Error {
 public:
  using Error::Error;
};

// A lock was acquired on a master with replicas, but no replica
// acknowledged the write within the replica-sync timeout: a failover could
// lose it. The acquisition was undone (or, if even that failed, the lock
// runs out with its lease); nothing is held. A waiting acquisition tries
// again until its deadline (ClientOptions::unreachable_limit at most), as
// through any transient failure, and throws this only then.
class TURNSTILE_EXPORT ReplicaSyncError : public Error {
 public:
  using Error::Error;
};

// The same for the master's own append-only file (RedisOptions::aof_sync):
// it did not confirm the grant's fsync within aof_sync_timeout_ms, so a
// restart could forget it. Undone, retried and told as ReplicaSyncError.
class TURNSTILE_EXPORT AofSyncError : public ReplicaSyncError {
 public:
  using ReplicaSyncError::ReplicaSyncError;
};

// A name is used with another setting than its other users': a semaphore
// whose total permits differ from the total the caller requires
// (HoldableOptions::permits, flavor.h).
class TURNSTILE_EXPORT MismatchError : public Error {
 public:
  using Error::Error;
};

// The Redis the locks live on may evict lock keys (an evicting
// maxmemory-policy with a memory limit: turnstile/server_check.h). Reported
// through ClientOptions::on_background_error by a client's own check; its
// text is unsafe_server_message()'s. Also thrown by an acquisition, nothing
// held, when the server cannot give the safety asked for
// (RedisOptions::aof_sync on a server older than 7.2 or without
// appendonly).
class TURNSTILE_EXPORT UnsafeServerError : public Error {
 public:
  using Error::Error;
};

// An acquisition refused because ClientOptions::max_waiting acquisitions of
// its client wait already. Nothing was sent; the others wait on.
class TURNSTILE_EXPORT TooManyWaitersError : public Error {
 public:
  using Error::Error;
};

// Bad input from the caller: negative permit counts, empty names, ...
class TURNSTILE_EXPORT InvalidArgumentError : public Error {
 public:
  using Error::Error;
};

}  // namespace turnstile

#endif  // TURNSTILE_ERRORS_H_
