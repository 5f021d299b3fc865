// redis/pipelined_evals.h
//
// A batch of script calls pipelined on one leased pooled connection: what
// Node::send_evals() returns, one pending reply per call. Every EVALSHA is
// written in one flush; the server reads them in as few reads and answers
// them in as few writes, where send_eval() pays a write, a read and a
// connection per call. The replies come back in order, so each pending
// reply reads (and keeps) those before its own.
//
// A call answered NOSCRIPT (SCRIPT FLUSH, a restarted server) is sent again
// behind the others on the same connection, after one SCRIPT LOAD of its
// script per batch, as eval_with_reload does (core/script_call.h). Error
// replies are the calls' own outcomes (raised by get()); a transport error
// is the outcome of every call not answered yet.
//
// The connection: given back to the pool once every reply sent for is
// read; dropped if the last pending reply is destroyed earlier (a stale
// reply must never reach the next lessee).
//
// The pending replies of one batch may be used from different threads
// (the batch locks itself); each one, like any PendingReply, by one thread
// at a time.

#ifndef TURNSTILE_REDIS_PIPELINED_EVALS_H_
#define TURNSTILE_REDIS_PIPELINED_EVALS_H_

#include <memory>
#include <vector>

#include "redis/connection_pool.h"
#include "redis/counters.h"
#include "turnstile/backend.h"

namespace turnstile::redis {

// Calls pipelined on one connection at most: a longer batch is cut into
// several, each on its own leased connection (a bound on what one
// connection has in flight, and on the replies the server buffers for it).
inline constexpr std::size_t kMaxPipelinedEvals = 256;

// Sends `calls` (at most kMaxPipelinedEvals, none empty of its script) on
// `lease`'s connection, which has nothing in flight, and returns their
// pending replies in order. A failure to send is the outcome of each. A
// reload is counted in `counters`.
std::vector<std::unique_ptr<PendingReply>> pipeline_evals(ConnectionPool::Lease lease, std::vector<EvalRequest> calls,
                                                          std::shared_ptr<Counters> counters);

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_PIPELINED_EVALS_H_
