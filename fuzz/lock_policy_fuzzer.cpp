// Fuzz target: TOML lock policies (LockPolicy::parse, src/locks/handles/lock_policy.cpp).
//
// Input: any bytes, as the text of a policy file.
// Properties: parse() returns a policy or throws InvalidArgumentError
// naming "<source>:<line>:<column>:" (nothing else); every rule of a
// parsed policy is within what the header promises (a non-empty match,
// permits >= 1 exactly for semaphores, lease >= 1 ms, wait >= 0, at most
// kMaxRules rules); rule_for() finds each rule's own pattern text.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "turnstile/errors.h"
#include "turnstile/lock_policy.h"

using turnstile::fuzz::fuzz_check;

namespace {

constexpr std::string_view kSource = "fuzz.toml";

void check_rule(const turnstile::LockRule& rule) {
  const bool semaphore = rule.flavor == turnstile::Flavor::semaphore;
  fuzz_check(semaphore ? rule.permits >= 1 : rule.permits == 0, "permits do not fit the flavor");
  fuzz_check(!rule.lease || *rule.lease >= std::chrono::milliseconds(1), "lease below 1 ms");
  fuzz_check(!rule.wait || *rule.wait >= turnstile::Duration::zero(), "negative wait");
  fuzz_check(turnstile::parse_flavor(turnstile::flavor_name(rule.flavor)) == rule.flavor, "unnamed flavor");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  turnstile::LockPolicy policy;
  try {
    policy = turnstile::LockPolicy::parse(turnstile::fuzz::as_text(data, size), kSource);
  } catch (const turnstile::InvalidArgumentError& error) {
    fuzz_check(std::string_view(error.what()).starts_with(std::string(kSource) + ":"), "error without position");
    return 0;
  }
  fuzz_check(policy.rules().size() <= turnstile::LockPolicy::kMaxRules, "too many rules");
  check_rule(policy.default_rule());
  for (const turnstile::LockRule& rule : policy.rules()) {
    fuzz_check(!rule.pattern.empty() && rule.line >= 1, "rule without pattern or line");
    check_rule(rule);
    policy.rule_for(rule.pattern);
  }
  policy.rule_for("lock:order:42");
  return 0;
}
