// turnstile/revocation.h
//
// Revocation (Curator's makeRevocable): anyone may ask the holders of a
// name to give it up; a holder that listens decides. For long holds (batch
// jobs, leaders) where waiting out a lease is too slow and a force-unlock
// too blunt.
//
//   // The holder: listens while it holds.
//   turnstile::LockHold hold = lock.acquire_hold();
//   turnstile::RevocationWatch asked = client.watch_release_requests(lock.name());
//   while (!hold.loss_token().stop_requested() && !asked.token().stop_requested()) do_a_step();
//   hold.release();
//
//   // Anyone, from any process (turnstile revoke NAME):
//   const std::int64_t told = client.request_release("nightly-import", "deploy 4.2 needs it");
//
// How: a request is a message on "turnstile_revoke__channel:{<name>}"
// (key_layout.h), published by a script on the name's node
// (lua/revocation_request.lua); a watch is a subscription to it. Nothing is
// stored: a request reaches the watches open when it is published, and no
// later one.
//
// Contract:
//   * Advice, not force: a holder that does not watch, or ignores the
//     request, keeps the lock. The lock itself is untouched; only its
//     holder's release (or its lease) frees it.
//   * Every flavor with named holders on one server: the reentrant, fenced,
//     fair, token and read-write locks, both semaphores, and an election's
//     leader (Election's name). Every watch of the name hears every request:
//     a semaphore's or read lock's several holders each decide (a request
//     may name one: ReleaseRequest::reason is free text). RedLock and
//     MultiLock: watch each node's client; a request goes to one node's.
//   * request_release() answers how many connections were subscribed to
//     the name's channel (PUBLISH's count, SPUBLISH's on a sharded
//     Cluster): one per process watching, 0 when nobody could hear it. A
//     process whose last watch of the name ended within kChannelLingerMs
//     (backend.h) is still counted, though no watch is told.
//   * A watch's handler runs on the backend's pub/sub thread (a simulated
//     task in simulation); it must not block. Its token is requested at the
//     first request and stays requested.

#ifndef TURNSTILE_REVOCATION_H_
#define TURNSTILE_REVOCATION_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>

#include "turnstile/export.h"

namespace turnstile {

namespace detail {
class RevocationCore;
}  // namespace detail

// The longest reason a request carries: 1 KiB (a longer one is refused
// with InvalidArgumentError before anything is sent).
inline constexpr std::size_t kMaxReleaseReasonBytes = 1024;

// What a watch is told.
struct TURNSTILE_EXPORT ReleaseRequest {
  std::string_view name;    // the lock's key, the client's prefix included
  std::string_view reason;  // what the requester said; may be empty
};

using ReleaseRequestHandler = std::function<void(const ReleaseRequest&)>;

// An open watch (Client::watch_release_requests()). Move-only; destroying
// it (or stop()) ends it, and once that returns the handler is never
// called again.
class TURNSTILE_EXPORT RevocationWatch {
 public:
  RevocationWatch() noexcept;
  RevocationWatch(RevocationWatch&& other) noexcept;
  RevocationWatch& operator=(RevocationWatch&& other) noexcept;
  RevocationWatch(const RevocationWatch&) = delete;
  RevocationWatch& operator=(const RevocationWatch&) = delete;
  ~RevocationWatch();

  bool active() const noexcept { return core_ != nullptr; }
  // Requested at the first request this watch heard; never for an empty
  // watch.
  std::stop_token token() const;
  void stop() noexcept;

 private:
  friend class Client;
  TURNSTILE_HIDDEN explicit RevocationWatch(std::shared_ptr<detail::RevocationCore> core) noexcept;
  std::shared_ptr<detail::RevocationCore> core_;
};

}  // namespace turnstile

#endif  // TURNSTILE_REVOCATION_H_
