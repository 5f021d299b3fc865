#include "locks/engine/wipe_check.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include "core/check.h"
#include "core/pending_reply.h"
#include "lua_scripts.h"
#include "turnstile/errors.h"
#include "turnstile/key_layout.h"

namespace turnstile::detail {
namespace {

// A presence key outlives the last check that re-armed it by at least this
// long, so a check that runs late does not find it missing.
constexpr Duration kMinPresenceTtl = std::chrono::seconds(60);
constexpr int kPresenceTtlPeriods = 4;

std::string milliseconds_text(Duration duration) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(duration).count());
}

}  // namespace

WipeCheck::WipeCheck(Backend& backend, Runtime& runtime, std::string client_id, Duration period,
                     std::function<void(std::exception_ptr)> on_error)
    : backend_(backend),
      runtime_(runtime),
      client_id_(std::move(client_id)),
      period_(period),
      on_error_(std::move(on_error)) {
  TURNSTILE_CHECK(!client_id_.empty());
  TURNSTILE_CHECK(period_ > Duration::zero());
  TURNSTILE_CHECK(on_error_ != nullptr);
}

Duration WipeCheck::presence_ttl(Duration period, std::size_t slots) {
  const auto rounds =
      static_cast<Duration::rep>((std::max<std::size_t>(slots, 1) + kMaxSlotsPerCheck - 1) / kMaxSlotsPerCheck);
  return std::max(kMinPresenceTtl, period * kPresenceTtlPeriods * rounds);
}

std::optional<std::string> WipeCheck::presence_key(std::optional<int> slot) {
  if (!slot) return turnstile::presence_key("0", client_id_);
  TURNSTILE_CHECK(*slot >= 0 && *slot < kMaxSlot);
  const auto index = static_cast<std::size_t>(*slot);
  if (tag_by_slot_.size() <= index) tag_by_slot_.resize(index + 1, -1);
  // Each number is tried once, whichever slot asked: every slot it hashes
  // to is recorded, so the slots met on the way cost nothing later.
  while (tag_by_slot_[index] < 0 && next_tag_ < kMaxTagSearch) {
    const int tag = next_tag_++;
    const std::optional<int> met = backend_.cluster_slot(turnstile::presence_key(std::to_string(tag), client_id_));
    if (!met || *met < 0 || *met >= kMaxSlot) continue;
    const auto met_index = static_cast<std::size_t>(*met);
    if (tag_by_slot_.size() <= met_index) tag_by_slot_.resize(met_index + 1, -1);
    if (tag_by_slot_[met_index] < 0) tag_by_slot_[met_index] = tag;
  }
  if (tag_by_slot_[index] < 0) return std::nullopt;
  return turnstile::presence_key(std::to_string(tag_by_slot_[index]), client_id_);
}

bool WipeCheck::run(const std::vector<std::optional<int>>& slots) {
  if (!enabled_ || slots.empty()) return false;
  const Duration ttl = presence_ttl(period_, slots.size());
  const bool rotating = slots.size() > kMaxSlotsPerCheck;
  const std::vector<std::string> args{milliseconds_text(ttl), milliseconds_text(ttl / 2)};

  // This check's share of the slots: all of them, or kMaxSlotsPerCheck
  // from where the last one stopped.
  std::vector<std::string> keys;
  const std::size_t count = std::min(slots.size(), kMaxSlotsPerCheck);
  const std::size_t start = slots.size() <= kMaxSlotsPerCheck ? 0 : next_ % slots.size();
  for (std::size_t i = 0; i < count; ++i) {
    if (std::optional<std::string> key = presence_key(slots[(start + i) % slots.size()])) keys.push_back(*key);
  }
  next_ = start + count;

  struct Call {
    std::string key;
    int sends = 0;
    std::unique_ptr<PendingReply> pending;
  };
  const auto send = [this, &args](Call& call) {
    ++call.sends;
    try {
      call.pending = backend_.send_eval(scripts::wipe_check, {call.key}, args, EvalSync::none);
    } catch (const std::exception&) {
      call.pending = std::make_unique<CompletedReply>(std::current_exception());
    }
  };
  // Pipelined, kMaxCallsInFlight at a time: the next call goes out as the
  // oldest one's reply is read.
  std::vector<Call> calls;
  calls.reserve(keys.size());
  for (std::string& key : keys) calls.push_back(Call{.key = std::move(key)});
  std::size_t sent = 0;
  const auto fill_window = [&](std::size_t read) {
    while (sent < calls.size() && sent - read < kMaxCallsInFlight) send(calls[sent++]);
  };
  const Instant deadline = runtime_.now() + period_;
  bool wiped = false;
  for (std::size_t read = 0; read < calls.size(); ++read) {
    if (runtime_.now() >= deadline) break;  // slow: the next check tries the rest
    fill_window(read);
    TURNSTILE_CHECK(read < sent);
    Call& call = calls[read];
    // Each call is read at most kAttempts times (sent again only on a
    // closed connection).
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      try {
        const Duration left = deadline - runtime_.now();
        if (left <= Duration::zero() || !call.pending->wait_for(left)) break;  // slow: the next check tries
        const Reply reply = call.pending->get().reply;
        // Missing: wiped. With more slots in use than one check reads, a
        // key this check never wrote is a slot newly in use instead (else
        // each check finding new slots would renew every holding, every
        // period, while the first round lasts).
        const bool first_visit = written_.insert(call.key).second;
        if (reply.is_integer() && reply.as_integer() == 0 && !(first_visit && rotating)) wiped = true;
        break;
      } catch (const PermissionError&) {
        enabled_ = false;
        on_error_(std::make_exception_ptr(
            PermissionError("the wipe check was refused (" + call.key +
                            "): grant the Client's user ~turnstile_presence:* (docs/deployment.md); until then a "
                            "holder learns that its server lost its keys at its next renewal")));
        return wiped;
      } catch (const TimeoutError&) {
        break;  // slow or a busy pool (PoolExhaustedError): the next check tries
      } catch (const ConnectionError&) {
        // Closed or refused: after a restart the pooled connection is dead.
        // Once more, on a new connection whose handshake finds the restart.
        if (call.sends < kAttempts) {
          send(call);
          continue;
        }
        break;
      } catch (const Error&) {
        break;  // a server error: the next check tries
      }
    }
  }
  return wiped;
}

}  // namespace turnstile::detail
