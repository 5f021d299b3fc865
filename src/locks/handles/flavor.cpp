// Flavor names and Client::holdable(), the one factory of every flavor
// (flavor.h).

#include "turnstile/flavor.h"

#include <utility>

#include "core/check.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"

namespace turnstile {
namespace {

// Whether `F` is a named enumerator of Flavor: GCC and Clang spell an
// unnamed value as a cast, "(turnstile::Flavor)8", in the function's name.
template <Flavor F>
constexpr bool is_enumerator() {
  constexpr std::string_view function = __PRETTY_FUNCTION__;
  return function.find("(turnstile::Flavor)") == std::string_view::npos;
}

// A new enumerator without its row of kFlavorTable (flavor.h) stops the
// build here.
static_assert(is_enumerator<static_cast<Flavor>(kFlavorTable.size() - 1)>() &&
                  !is_enumerator<static_cast<Flavor>(kFlavorTable.size())>(),
              "every Flavor enumerator has its row in kFlavorTable (turnstile/flavor.h)");

void refuse(bool refused, Flavor flavor, std::string_view what) {
  if (refused)
    throw InvalidArgumentError("flavor " + std::string(flavor_name(flavor)) + " takes no " + std::string(what));
}

// The composite's node locks: a reentrant lock at `name` on `first` and on
// every client of `others`.
std::vector<std::unique_ptr<Lock>> node_locks(Client& first, const std::vector<Client*>& others, std::string_view name,
                                              const LockOptions& options) {
  std::vector<std::unique_ptr<Lock>> nodes;
  nodes.reserve(others.size() + 1);
  nodes.push_back(std::make_unique<ReentrantLock>(first.lock(name, options)));
  for (Client* client : others) {
    if (client == nullptr) throw InvalidArgumentError("HoldableOptions::nodes holds a null client");
    nodes.push_back(std::make_unique<ReentrantLock>(client->lock(name, options)));
  }
  return nodes;
}

}  // namespace

std::optional<Flavor> parse_flavor(std::string_view name) {
  for (const Flavor flavor : kAllFlavors) {
    if (flavor_name(flavor) == name) return flavor;
  }
  return std::nullopt;
}

std::string flavor_names() {
  std::string names;
  for (const Flavor flavor : kAllFlavors) {
    if (!names.empty()) names += ", ";
    names += flavor_name(flavor);
  }
  return names;
}

std::unique_ptr<Holdable> Client::holdable(Flavor flavor, std::string_view name, const HoldableOptions& options) {
  refuse(options.fenced && !can_be_fenced(flavor), flavor, "fencing tokens");
  refuse(options.permits != 0 && !is_semaphore(flavor), flavor, "permits");
  refuse(!options.nodes.empty() && !is_composite(flavor), flavor, "nodes");
  refuse(options.shared && !flavor_traits(flavor).has_shared_holds, flavor, "shared holds");
  refuse(options.lock_delay && !has_lease(flavor), flavor, "lock-delay (it has no lease)");
  const LockOptions lock_options{.lock_delay = options.lock_delay};
  switch (flavor) {
    case Flavor::reentrant:
      return std::make_unique<ReentrantLock>(options.fenced ? fenced_lock(name, lock_options)
                                                            : lock(name, lock_options));
    case Flavor::token:
      return std::make_unique<TokenLock>(token_lock(name, lock_options));
    case Flavor::fair: {
      FairLockOptions fair = options.fair;
      fair.fenced = options.fenced;
      fair.lock_delay = options.lock_delay;
      return std::make_unique<FairLock>(fair_lock(name, fair));
    }
    case Flavor::semaphore: {
      auto held = std::make_unique<PermitSemaphore>(permit_semaphore(name, lock_options));
      if (options.permits != 0) held->require_total(options.permits);
      return held;
    }
    case Flavor::counting_semaphore: {
      auto held = std::make_unique<CountingSemaphore>(counting_semaphore(name));
      if (options.permits != 0) held->require_total(options.permits);
      return held;
    }
    case Flavor::redlock:
      return std::make_unique<RedLock>(node_locks(*this, options.nodes, name, lock_options), options.composite);
    case Flavor::multilock:
      return std::make_unique<MultiLock>(node_locks(*this, options.nodes, name, lock_options), options.composite);
    case Flavor::read_write: {
      ReadWriteLock both = read_write_lock(name, lock_options);
      if (options.shared) return std::make_unique<ReadLock>(std::move(both.read()));
      return std::make_unique<WriteLock>(std::move(both.write()));
    }
  }
  TURNSTILE_UNREACHABLE("every flavor is made");
  return nullptr;
}

}  // namespace turnstile
