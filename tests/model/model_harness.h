// model/model_harness.h
//
// Model-based testing of the lock scripts (issue #34, item 6): a small
// reference model of each flavor, written in C++ from the scripts' headers
// and never from their Lua, is driven beside the real lua/*.lua scripts on
// the fake Redis (sim::Server on a VirtualClock) by random operation
// sequences drawn from a seed, with virtual time advancing between
// operations (often to a key's exact expiry instant, or one millisecond
// either side). Every reply and the observable keys after every operation
// are compared with the model's; a mismatch prints the seed, the
// sequence's own seed and the operation log.
//
// Counts and seed from the environment, for a longer run:
//   TURNSTILE_MODEL_SEED=<n>       the first sequence's seed (sequence i: n + i)
//   TURNSTILE_MODEL_SEQUENCES=<n>  sequences per flavor
//   TURNSTILE_MODEL_STEPS=<n>      operations per sequence
// and for a mutation check without a rebuild:
//   TURNSTILE_MODEL_LUA_DIR=<dir>  the scripts read from <dir>/<name>.lua
//                                  (a copy of lua/ with one change), their
//                                  "--! include NAME" lines replaced by
//                                  <dir>/lib/NAME.lua as tools/embed_lua.py
//                                  does, instead of the embedded ones
//
// Not thread-safe; one ModelRun per sequence.

#ifndef TURNSTILE_TESTS_MODEL_MODEL_HARNESS_H_
#define TURNSTILE_TESTS_MODEL_MODEL_HARNESS_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "env_count.h"
#include "fake_redis/server.h"
#include "fake_redis/virtual_clock.h"
#include "turnstile/reply.h"
#include "turnstile/script.h"

namespace turnstile::testing {

inline constexpr std::uint64_t kDefaultModelSeed = 20261126;
inline constexpr int kDefaultModelSequences = 400;
inline constexpr int kDefaultModelSteps = 80;
inline constexpr std::size_t kMaxLoggedSteps = 400;  // a longer run logs its last steps only

// A mutant of the scripts, in process: while one is alive, every script
// whose (include-expanded) source holds `original` runs with its first
// occurrence replaced by `replacement` (a change to lua/lib/ reaches each
// script that includes it, as an edit of the file would). One at a time.
struct ScriptMutant {
  std::string_view name;  // what the mutation list calls it
  std::string_view original;
  std::string_view replacement;
};

class MutantScope {
 public:
  explicit MutantScope(const ScriptMutant& mutant) {
    if (active() != nullptr) throw std::logic_error("MutantScope: one mutant at a time");
    active() = &mutant;
  }
  ~MutantScope() { active() = nullptr; }
  MutantScope(const MutantScope&) = delete;
  MutantScope& operator=(const MutantScope&) = delete;

  // The active mutant's source of `script`, or nullopt (no mutant, or its
  // text is not in this script).
  static std::optional<std::string> source_of(const Script& script) {
    const ScriptMutant* mutant = active();
    if (mutant == nullptr) return std::nullopt;
    std::string source(script.source);
    const std::size_t at = source.find(mutant->original);
    if (at == std::string::npos) return std::nullopt;
    return source.replace(at, mutant->original.size(), mutant->replacement);
  }
  // Whether `mutant` changes any of `scripts` (a mutant that changes
  // nothing would be "killed" by nothing).
  static bool changes_any(const ScriptMutant& mutant, std::initializer_list<const Script*> scripts) {
    return std::any_of(scripts.begin(), scripts.end(), [&](const Script* script) {
      return std::string_view(script->source).find(mutant.original) != std::string_view::npos;
    });
  }

 private:
  static const ScriptMutant*& active() {
    static const ScriptMutant* mutant = nullptr;
    return mutant;
  }
};

// The script's source: the active MutantScope's, TURNSTILE_MODEL_LUA_DIR's,
// or the embedded one (nullopt). A directory's is read once per script.
inline std::optional<std::string> overridden_source(const Script& script) {
  if (std::optional<std::string> mutated = MutantScope::source_of(script)) return mutated;
  static std::map<std::string, std::string> sources;
  const char* directory = std::getenv("TURNSTILE_MODEL_LUA_DIR");
  if (directory == nullptr) return std::nullopt;
  const std::string name(script.name);
  if (const auto found = sources.find(name); found != sources.end()) return found->second;
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("TURNSTILE_MODEL_LUA_DIR: cannot read " + path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string text = read(std::string(directory) + "/" + name + ".lua");
  constexpr std::string_view kInclude = "--! include ";
  std::string expanded;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    const std::string_view line(text.data() + start, end - start);
    if (line.starts_with(kInclude)) {
      std::string part =
          read(std::string(directory) + "/lib/" +
               std::string(line.substr(kInclude.size(), line.find_last_not_of('\n') + 1 - kInclude.size())) + ".lua");
      while (!part.empty() && part.back() == '\n') part.pop_back();
      expanded += part + (line.ends_with('\n') ? "\n" : "");
    } else {
      expanded += line;
    }
    start = end;
  }
  return sources[name] = expanded;
}

// What the lock models share: owners of Redisson's "<uuid>:<n>" shape,
// leases short enough to run out within a sequence, a latch's lifetime,
// the longest random step of time.
inline const std::vector<std::string> kModelOwners = {
    "0c9a1e0e-7d52-4e44-9a8e-0123456789ab:1",
    "0c9a1e0e-7d52-4e44-9a8e-0123456789ab:2",
    "5b1f0a2c-1111-4e44-9a8e-fedcba987654:7",
};
inline const std::vector<std::int64_t> kModelLeasesMs = {50, 500, 5000};
inline constexpr std::int64_t kModelLatchMs = 1000;
inline constexpr std::int64_t kModelMaxStepMs = 2000;

// Redis's key expiry, as the model keeps it: alive through its deadline
// millisecond, gone after (PTTL 0 at the deadline itself).
struct ModelExpiry {
  std::optional<std::int64_t> deadline_ms;  // nullopt: no key
  bool alive(std::int64_t now_ms) const { return deadline_ms && now_ms <= *deadline_ms; }
  Reply pttl(std::int64_t now_ms) const { return Reply::integer(alive(now_ms) ? *deadline_ms - now_ms : -2); }
};

// A string key with an expiry: a token lock, an identity, a latch, a read
// hold's timeout key. The model expires it (expire()) before it reads it.
struct ModelKey {
  std::optional<std::string> value;  // nullopt: no key
  std::int64_t deadline_ms = 0;

  void set(std::string new_value, std::int64_t new_deadline_ms) {
    value = std::move(new_value);
    deadline_ms = new_deadline_ms;
  }
  void clear() { value.reset(); }
  void expire(std::int64_t now_ms) {
    if (value && now_ms > deadline_ms) value.reset();
  }
  void pexpire(std::int64_t new_deadline_ms) {
    if (value) deadline_ms = new_deadline_ms;
  }
  Reply get() const { return value ? Reply::bulk(*value) : Reply::nil(); }
  std::int64_t pttl_ms(std::int64_t now_ms) const { return value ? deadline_ms - now_ms : -2; }
  Reply pttl(std::int64_t now_ms) const { return Reply::integer(pttl_ms(now_ms)); }
};

// A hash as HGETALL's flat (field, value) pairs sorted by field, from the
// model's pairs or from a reply (whose order is the server's).
inline Reply sorted_hash(std::vector<std::pair<std::string, std::string>> pairs) {
  std::sort(pairs.begin(), pairs.end());
  std::vector<Reply> flat;
  for (auto& [field, value] : pairs) {
    flat.push_back(Reply::bulk(std::move(field)));
    flat.push_back(Reply::bulk(std::move(value)));
  }
  return Reply::array(std::move(flat));
}
inline Reply sorted_hash(const Reply& hgetall) {
  if (!hgetall.is_array()) return hgetall;
  std::vector<std::pair<std::string, std::string>> pairs;
  const auto& elements = hgetall.as_array();
  for (std::size_t i = 0; i + 1 < elements.size(); i += 2) {
    pairs.emplace_back(elements[i].as_string(), elements[i + 1].as_string());
  }
  return sorted_hash(std::move(pairs));
}

// One random sequence: a fresh fake server, the model's clock, the log.
class ModelRun {
 public:
  explicit ModelRun(std::uint64_t seed)
      : seed_(seed), random_(seed), server_(clock_), session_(server_.connect()), now_ms_(clock_.unix_time_ms()) {}
  ~ModelRun() {
    listener_.reset();
    session_.reset();
  }
  ModelRun(const ModelRun&) = delete;
  ModelRun& operator=(const ModelRun&) = delete;

  std::uint64_t seed() const { return seed_; }
  // The model's own clock, Unix ms (advanced by advance_ms(), never read
  // back from the server).
  std::int64_t now_ms() const { return now_ms_; }
  std::int64_t now_us() const { return now_ms_ * 1000; }

  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(random_); }
  bool chance(int one_in) { return pick(one_in) == 0; }
  template <class T>
  const T& one_of(const std::vector<T>& choices) {
    return choices[static_cast<std::size_t>(pick(static_cast<int>(choices.size())))];
  }

  // Runs one of `operations` drawn by weight and returns true, or, drawn
  // with `idle_weight`, none and returns false (the caller lets time pass).
  bool perform(std::initializer_list<std::pair<int, std::function<void()>>> operations, int idle_weight) {
    int total = idle_weight;
    for (const auto& operation : operations) total += operation.first;
    int drawn = pick(total);
    for (const auto& [weight, operation] : operations) {
      if (drawn < weight) {
        operation();
        return true;
      }
      drawn -= weight;
    }
    return false;
  }

  // Moves both clocks by `ms`: the server's and the model's.
  void advance_ms(std::int64_t ms) {
    if (ms <= 0) return;
    clock_.advance_by(std::chrono::milliseconds(ms));
    now_ms_ += ms;
    log("advance " + std::to_string(ms) + " ms");
  }
  // Advances to one of the interesting instants: a deadline, one ms
  // before or after it, or a random step below `max_step_ms`.
  void advance_near(const std::vector<std::int64_t>& deadlines_ms, std::int64_t max_step_ms) {
    std::vector<std::int64_t> ahead;
    for (std::int64_t deadline : deadlines_ms) {
      for (std::int64_t target : {deadline - 1, deadline, deadline + 1}) {
        if (target > now_ms_) ahead.push_back(target);
      }
    }
    if (!ahead.empty() && pick(3) != 0) {
      advance_ms(one_of(ahead) - now_ms_);
    } else {
      advance_ms(pick(static_cast<int>(max_step_ms)));
    }
  }

  // EVALSHA of an embedded script (loaded once per run), logged.
  Reply eval(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args) {
    const std::optional<std::string> mutant = overridden_source(script);
    if (!mutant && std::find(loaded_.begin(), loaded_.end(), &script) == loaded_.end()) {
      (void)server_.execute(*session_, {"SCRIPT", "LOAD", std::string(script.source)});
      loaded_.push_back(&script);
    }
    std::vector<std::string> argv{mutant ? "EVAL" : "EVALSHA", mutant ? *mutant : std::string(script.sha1),
                                  std::to_string(keys.size())};
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());
    Reply reply = server_.execute(*session_, argv);
    std::string line = std::string(script.name) + " keys";
    for (const std::string& key : keys) line += " " + printable(key);
    line += " args";
    for (const std::string& arg : args) line += " " + printable(arg);
    log(line + " -> " + reply.to_string());
    return reply;
  }
  // Keeps what is published on `channels` from now on, for
  // take_messages() (a second session subscribed to them).
  void listen(const std::vector<std::string>& channels) {
    if (!listener_) {
      listener_ = server_.connect([this](std::string_view channel, std::string_view message) {
        messages_.emplace_back(std::string(channel), std::string(message));
      });
    }
    for (const std::string& channel : channels) server_.subscribe(*listener_, channel);
  }
  // The (channel, message) pairs published on listened channels since the
  // last call, in order.
  std::vector<std::pair<std::string, std::string>> take_messages() { return std::exchange(messages_, {}); }

  // A plain command (reading the observable state), not logged.
  Reply command(const std::vector<std::string>& argv) { return server_.execute(*session_, argv); }

  // Compares one reply (or one key's observed state) with the model's; the
  // first mismatch of a run is kept, and the run stops there.
  void expect(const std::string& what, const Reply& expected, const Reply& actual) {
    if (failure_ || expected == actual) return;
    failure_ = what + ": model " + expected.to_string() + ", script " + actual.to_string();
  }
  bool failed() const { return failure_.has_value(); }
  // The failure message: the seed to replay and the operation log.
  std::string report(std::string_view flavor) const {
    std::string text = std::string(flavor) + " model mismatch, sequence seed " + std::to_string(seed_) +
                       " (replay: TURNSTILE_MODEL_SEED=" + std::to_string(seed_) +
                       " TURNSTILE_MODEL_SEQUENCES=1): " + failure_.value_or("none") + "\noperations (" +
                       std::to_string(logged_) + ", the last " + std::to_string(log_.size()) + " shown):\n";
    for (const std::string& line : log_) text += "  " + line + "\n";
    return text;
  }

  void log(std::string line) {
    ++logged_;
    if (log_.size() == kMaxLoggedSteps) log_.erase(log_.begin());
    log_.push_back("t+" + std::to_string(now_ms_ - start_ms_) + " " + std::move(line));
  }

  static std::string printable(std::string_view bytes) {
    std::string text;
    for (unsigned char c : bytes) {
      if (c >= 0x20 && c < 0x7f) {
        text += static_cast<char>(c);
      } else {
        static constexpr char kHex[] = "0123456789abcdef";
        text += "\\x";
        text += kHex[c >> 4];
        text += kHex[c & 15];
      }
    }
    return text;
  }

 private:
  std::uint64_t seed_;
  std::mt19937_64 random_;
  sim::VirtualClock clock_;
  sim::Server server_;
  std::unique_ptr<sim::Session> session_;
  std::unique_ptr<sim::Session> listener_;
  std::vector<std::pair<std::string, std::string>> messages_;
  std::int64_t now_ms_;
  std::int64_t start_ms_ = now_ms_;
  std::vector<const Script*> loaded_;
  std::vector<std::string> log_;
  std::size_t logged_ = 0;
  std::optional<std::string> failure_;
};

// Runs `sequence(run, steps)` for every seed of the configured range and
// fails with the report of the first runs that disagree (at most three).
// Returns how many sequences ran.
inline int run_model_sequences(std::string_view flavor, const std::function<void(ModelRun&, int steps)>& sequence) {
  constexpr int kMaxReported = 3;
  const std::uint64_t first_seed = seed_from_environment("TURNSTILE_MODEL_SEED", kDefaultModelSeed);
  const int sequences = count_from_environment("TURNSTILE_MODEL_SEQUENCES", kDefaultModelSequences);
  const int steps = count_from_environment("TURNSTILE_MODEL_STEPS", kDefaultModelSteps);
  int reported = 0;
  for (int i = 0; i < sequences && reported < kMaxReported; ++i) {
    ModelRun run(first_seed + static_cast<std::uint64_t>(i));
    sequence(run, steps);
    if (run.failed()) {
      ADD_FAILURE() << run.report(flavor);
      ++reported;
    }
  }
  return sequences;
}

// One sequence of a model: `Model(run, model_arguments...).step()` for
// `steps` steps, stopping at the first mismatch.
template <class Model, class... Arguments>
std::function<void(ModelRun&, int steps)> model_sequence(const Arguments&... model_arguments) {
  return [=](ModelRun& run, int steps) {
    Model model(run, model_arguments...);
    for (int i = 0; i < steps && !run.failed(); ++i) model.step();
  };
}

// Runs model_sequence<Model> for every seed of the configured range
// (run_model_sequences).
template <class Model, class... Arguments>
int run_model(std::string_view flavor, const Arguments&... model_arguments) {
  return run_model_sequences(flavor, model_sequence<Model>(model_arguments...));
}

// The first of `sequences` sequences (seeds from the configured first one)
// whose run disagrees with the scripts: what a mutation check wants.
struct ModelMismatch {
  std::uint64_t seed = 0;
  std::string report;
};
inline std::optional<ModelMismatch> first_mismatch(std::string_view flavor,
                                                   const std::function<void(ModelRun&, int steps)>& sequence,
                                                   int sequences) {
  const std::uint64_t first_seed = seed_from_environment("TURNSTILE_MODEL_SEED", kDefaultModelSeed);
  const int steps = count_from_environment("TURNSTILE_MODEL_STEPS", kDefaultModelSteps);
  for (int i = 0; i < sequences; ++i) {
    ModelRun run(first_seed + static_cast<std::uint64_t>(i));
    sequence(run, steps);
    if (run.failed()) return ModelMismatch{run.seed(), run.report(flavor)};
  }
  return std::nullopt;
}

// What a model of keys with expiries does each step: what ran out expires,
// then one operation drawn by weight runs and the keys are observed, or
// (drawn by the idle weight) time passes up to an interesting instant.
class ExpiringModel {
 public:
  explicit ExpiringModel(ModelRun& run) : run_(run) {}
  virtual ~ExpiringModel() = default;
  ExpiringModel(const ExpiringModel&) = delete;
  ExpiringModel& operator=(const ExpiringModel&) = delete;

 protected:
  void step_with(std::initializer_list<std::pair<int, std::function<void()>>> operations, int idle_weight) {
    expire();
    if (!run_.perform(operations, idle_weight)) {
      advance();
      return;
    }
    expire();
    observe();
  }
  // Drops from the model what the server has expired by run_.now_ms().
  virtual void expire() = 0;
  // Lets time pass (ModelRun::advance_near the model's deadlines).
  virtual void advance() = 0;
  // Compares the observable keys with the model's (ModelRun::expect).
  virtual void observe() = 0;

  ModelRun& run_;
};

// A watchdog renewal of one or two holds in one call of `script` (keys: the
// lock per hold, then the identity per hold when `identity_key` is given;
// arguments: the lease, then each hold's field). `hold(lease_ms)` draws one
// hold's field, renews it in the model and tells whether it was held (the
// script's 1 or 0 for it); the reply is compared.
inline void renew_holds(ModelRun& run, const Script& script, const std::string& lock_key,
                        const std::optional<std::string>& identity_key,
                        const std::function<std::pair<std::string, bool>(std::int64_t lease_ms)>& hold) {
  const auto count = static_cast<std::size_t>(1 + run.pick(2));
  const std::int64_t lease = run.one_of(kModelLeasesMs);
  std::vector<std::string> keys(count, lock_key);
  std::vector<std::string> args{std::to_string(lease)};
  std::vector<Reply> expected;
  for (std::size_t i = 0; i < count; ++i) {
    auto [field, held] = hold(lease);
    args.push_back(std::move(field));
    expected.push_back(Reply::integer(held ? 1 : 0));
  }
  if (identity_key) keys.insert(keys.end(), count, *identity_key);
  run.expect("renew reply", Reply::array(std::move(expected)), run.eval(script, keys, args));
}

// Integers of an array reply (an element that is not one: a mismatch later).
inline Reply integers(std::initializer_list<std::int64_t> values) {
  std::vector<Reply> elements;
  for (std::int64_t value : values) elements.push_back(Reply::integer(value));
  return Reply::array(std::move(elements));
}

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_MODEL_MODEL_HARNESS_H_
