// redis/server_identity.h
//
// Which server process each endpoint of a backend was last seen to be, and
// who is told when that changes (Backend::watch_restarts).
//
// Every connection learns its server's run_id in its handshake
// (Connection::open: INFO server, after AUTH and SELECT). Whoever opened it
// (a pool, a subscriber) reports it with observe(): the first run_id seen
// for an endpoint is remembered; a different one later is a restart, told
// to every registered handler. A connection whose server refused INFO has
// no run_id and is not reported (such a server is never found restarted).
// A backend may also report a restart it learned otherwise (a Sentinel
// switch to another master) with restarted(). A connection opened again
// after one broke that found no restart is reported with reconnected(),
// told to the reconnect handlers (Backend::watch_reconnects).
//
// Thread-safe. Handlers run on the reporting thread, one at a time; once a
// RestartWatch's removal returned, its handler is not running and never
// runs again (so a handler must not drop a watch itself).

#ifndef TURNSTILE_REDIS_SERVER_IDENTITY_H_
#define TURNSTILE_REDIS_SERVER_IDENTITY_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "turnstile/backend.h"
#include "turnstile/mutex.h"

namespace turnstile::redis {

// The run_id line of an INFO (server section) reply; nullopt if it has none.
std::optional<std::string> run_id_from_info(std::string_view info);

class ServerIdentities : public std::enable_shared_from_this<ServerIdentities> {
 public:
  // Registers `handler` until the returned watch is dropped. The watch may
  // outlive this registry (it then removes nothing).
  RestartWatch watch(ServerRestartHandler handler);
  // Registers a reconnect handler likewise.
  RestartWatch watch_reconnects(ServerRestartHandler handler);

  // A connection to `endpoint` reached the server process `run_id`. Tells
  // the restart handlers if the endpoint was last seen as another process,
  // and returns whether it did.
  bool observe(const std::string& endpoint, const std::string& run_id);
  // `endpoint` is a server other than before (e.g. a new master): tells the
  // restart handlers.
  void restarted(std::string_view endpoint);
  // A connection to `endpoint` was opened again after one broke, and
  // observe() found no restart: tells the reconnect handlers.
  void reconnected(std::string_view endpoint);

  // Restarts found so far.
  std::uint64_t restarts() const { return restarts_.load(std::memory_order_relaxed); }

 private:
  using Handlers = std::map<std::uint64_t, ServerRestartHandler>;
  RestartWatch add(Handlers ServerIdentities::*handlers, ServerRestartHandler handler);
  void remove(Handlers ServerIdentities::*handlers, std::uint64_t id);
  void tell(const Handlers ServerIdentities::*handlers, std::string_view endpoint);

  // Held while handlers run, and by remove(): a removal waits for them.
  Mutex dispatch_mutex_;
  Mutex mutex_;                                                                           // never held across a handler
  Handlers handlers_ TURNSTILE_GUARDED_BY(mutex_);                                        // restarts
  Handlers reconnect_handlers_ TURNSTILE_GUARDED_BY(mutex_);                              // reconnects
  std::map<std::string, std::string, std::less<>> run_ids_ TURNSTILE_GUARDED_BY(mutex_);  // by endpoint
  std::uint64_t next_id_ TURNSTILE_GUARDED_BY(mutex_) = 0;
  std::atomic<std::uint64_t> restarts_{0};
};

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_SERVER_IDENTITY_H_
