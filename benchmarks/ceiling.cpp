#include "ceiling.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "hiredis_reply.h"

namespace turnstile::benchmarks {

const Script& embedded_script(std::string_view name) {
  const Script* script = find_embedded_script(name);
  if (script == nullptr) throw std::logic_error("no embedded script '" + std::string(name) + "'");
  return *script;
}

double redis_benchmark_rate(int port, int clients, const std::vector<std::string>& command, int requests) {
  std::string line = "redis-benchmark -h 127.0.0.1 -p " + std::to_string(port) + " -c " + std::to_string(clients) +
                     " -n " + std::to_string(requests) + " -q";
  for (const std::string& word : command) line += " '" + word + "'";
  line += " 2>&1";
  FILE* pipe = popen(line.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run: " + line);
  std::string output;
  char buffer[4096];
  while (std::size_t n = fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
  const int status = pclose(pipe);
  // -q prints progress separated by '\r', then "...: <rate> requests per second, ...".
  const std::size_t suffix = output.rfind(" requests per second");
  const std::size_t start = suffix == std::string::npos ? std::string::npos : output.rfind(' ', suffix - 1);
  if (status != 0 || start == std::string::npos) {
    throw std::runtime_error("unexpected output of '" + line + "' (status " + std::to_string(status) + "): " + output);
  }
  return std::stod(output.substr(start + 1, suffix - start - 1));
}

double blocking_client_rate(int port, const std::vector<std::string>& command, int requests) {
  const std::unique_ptr<redisContext, decltype(&redisFree)> context(redisConnect("127.0.0.1", port), &redisFree);
  if (!context || context->err != 0) {
    throw std::runtime_error("blocking client: cannot connect to 127.0.0.1:" + std::to_string(port) +
                             (context ? std::string(": ") + context->errstr : std::string()));
  }
  const auto started = std::chrono::steady_clock::now();
  for (int request = 0; request < requests; ++request) {
    // hiredis_command throws itself when the transport fails.
    const Reply reply = testing::hiredis_command(context.get(), command);
    if (reply.is_error()) {
      throw std::runtime_error("blocking client: " + command.front() + " failed: " + reply.as_string());
    }
  }
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  return requests / took.count();
}

ServerAndClientApart::ServerAndClientApart(pid_t server) : server_(server) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 2 || server <= 0) return;
  if (sched_getaffinity(server_, sizeof(server_before_), &server_before_) != 0) return;
  if (pthread_getaffinity_np(pthread_self(), sizeof(client_before_), &client_before_) != 0) return;
  cpu_set_t server_cpus;
  CPU_ZERO(&server_cpus);
  CPU_SET(0, &server_cpus);
  cpu_set_t client_cpus;
  CPU_ZERO(&client_cpus);
  for (long cpu = 1; cpu < cpus && cpu < CPU_SETSIZE; ++cpu) CPU_SET(static_cast<int>(cpu), &client_cpus);
  if (sched_setaffinity(server_, sizeof(server_cpus), &server_cpus) != 0) return;
  if (pthread_setaffinity_np(pthread_self(), sizeof(client_cpus), &client_cpus) != 0) {
    (void)sched_setaffinity(server_, sizeof(server_before_), &server_before_);
    return;
  }
  apart_ = true;
}

ServerAndClientApart::~ServerAndClientApart() {
  if (!apart_) return;
  (void)pthread_setaffinity_np(pthread_self(), sizeof(client_before_), &client_before_);
  (void)sched_setaffinity(server_, sizeof(server_before_), &server_before_);
}

double best_redis_benchmark_rate(int port, int clients, const std::vector<std::string>& command, int rounds) {
  double best = 0;
  for (int round = 0; round < rounds; ++round) best = std::max(best, redis_benchmark_rate(port, clients, command));
  return best;
}

void BestRateReporter::ReportRuns(const std::vector<Run>& runs) {
  ConsoleReporter::ReportRuns(runs);
  for (const Run& run : runs) {
    if (run.run_type != Run::RT_Iteration) continue;
    const auto rate = run.counters.find("items_per_second");
    if (rate == run.counters.end()) continue;
    double& best = best_[run.run_name.str()];
    best = std::max(best, static_cast<double>(rate->second));
  }
}

double BestRateReporter::best(const std::string& function) const {
  double best = 0;
  for (const auto& [name, rate] : best_) {
    if (name == function || name.starts_with(function + "/")) best = std::max(best, rate);
  }
  return best;
}

double run_rounds_beside_evalsha_ceiling(Backend& backend, int port, BestRateReporter& reporter, int rounds) {
  const Script& script = embedded_script("reentrant_lock_acquire");
  backend.eval(script, {"ceiling"}, {"30000", "owner"});
  const std::vector<std::string> evalsha = {"EVALSHA", std::string(script.sha1), "1", "ceiling", "30000", "owner"};
  double evalsha_rate = 0;
  for (int round = 0; round < rounds; ++round) {
    ::benchmark::RunSpecifiedBenchmarks(&reporter);
    evalsha_rate = std::max(evalsha_rate, redis_benchmark_rate(port, 1, evalsha));
  }
  return evalsha_rate;
}

}  // namespace turnstile::benchmarks
