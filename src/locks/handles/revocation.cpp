// Revocation: release requests on a lock's revocation channel
// (turnstile/revocation.h; lua/revocation_request.lua).

#include "turnstile/revocation.h"

#include <utility>

#include "locks/engine/reply_shape.h"
#include "locks/handles/client_core.h"
#include "lua_scripts.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/key_layout.h"
#include "turnstile/mutex.h"

namespace turnstile {
namespace detail {

class RevocationCore {
 public:
  RevocationCore(std::string name, ReleaseRequestHandler handler)
      : name_(std::move(name)), handler_(std::move(handler)) {}

  void heard(const PubSubEvent& event) {
    if (event.kind != PubSubEvent::Kind::message) return;  // a request missed meanwhile is not replayed
    asked_.request_stop();
    if (handler_) handler_(ReleaseRequest{.name = name_, .reason = event.payload});
  }

  void open(Subscription subscription) {
    MutexLock guard(mutex_);
    subscription_ = std::move(subscription);
  }
  void stop() noexcept {
    Subscription subscription;
    {
      MutexLock guard(mutex_);
      subscription = std::move(subscription_);
    }
    subscription.reset();  // waits for a handler call under way
  }
  std::stop_token token() const { return asked_.get_token(); }

 private:
  const std::string name_;
  const ReleaseRequestHandler handler_;
  std::stop_source asked_;
  Mutex mutex_;
  Subscription subscription_ TURNSTILE_GUARDED_BY(mutex_);
};

}  // namespace detail

RevocationWatch::RevocationWatch() noexcept = default;
RevocationWatch::RevocationWatch(std::shared_ptr<detail::RevocationCore> core) noexcept : core_(std::move(core)) {}
RevocationWatch::RevocationWatch(RevocationWatch&& other) noexcept : core_(std::move(other.core_)) {}
RevocationWatch& RevocationWatch::operator=(RevocationWatch&& other) noexcept {
  if (this != &other) {
    stop();
    core_ = std::move(other.core_);
  }
  return *this;
}
RevocationWatch::~RevocationWatch() { stop(); }

std::stop_token RevocationWatch::token() const { return core_ ? core_->token() : std::stop_token(); }

void RevocationWatch::stop() noexcept {
  if (!core_) return;
  core_->stop();
  core_.reset();
}

std::int64_t Client::request_release(std::string_view name, std::string_view reason) {
  const std::string key = options().key_prefix + std::string(name);
  check_lock_name(name, key, "lock name");
  if (reason.size() > kMaxReleaseReasonBytes) {
    throw InvalidArgumentError("a release request's reason is " + std::to_string(reason.size()) + " bytes; at most " +
                               std::to_string(kMaxReleaseReasonBytes));
  }
  Backend& redis = *core_->user_backend;
  const Reply reply = redis.eval(scripts::revocation_request, {key},
                                 {revocation_channel(key), std::string(reason), std::string(redis.publish_command())});
  return detail::integer_reply(scripts::revocation_request, reply);
}

RevocationWatch Client::watch_release_requests(std::string_view name, ReleaseRequestHandler handler) {
  std::string key = options().key_prefix + std::string(name);
  check_lock_name(name, key, "lock name");
  auto core = std::make_shared<detail::RevocationCore>(key, std::move(handler));
  std::weak_ptr<detail::RevocationCore> weak = core;
  core->open(core_->user_backend->subscribe(revocation_channel(key), [weak](const PubSubEvent& event) {
    if (auto alive = weak.lock()) alive->heard(event);
  }));
  return RevocationWatch(std::move(core));
}

}  // namespace turnstile
