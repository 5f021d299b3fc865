#include "server_counters.h"

#include <sys/resource.h>

#include <cstdlib>
#include <sstream>
#include <string_view>

namespace turnstile::benchmarks {

double info_number(const std::string& text, const std::string& field) {
  const std::size_t at = text.find(field);
  return at == std::string::npos ? 0 : std::strtod(text.c_str() + at + field.size(), nullptr);
}

double command_delta(const std::map<std::string, double>& before, const std::map<std::string, double>& after) {
  double sum = 0;
  for (const auto& [name, count] : after) {
    if (name != "info") sum += count - delta_of({}, before, name);
  }
  return sum;
}

double delta_of(const std::map<std::string, double>& before, const std::map<std::string, double>& after,
                const std::string& name) {
  const auto earlier = before.find(name);
  const auto later = after.find(name);
  return (later == after.end() ? 0 : later->second) - (earlier == before.end() ? 0 : earlier->second);
}

ServerCounters server_counters(Backend& backend) {
  ServerCounters counters;
  for (const MasterReply& master : backend.command_each_master({"INFO", "cpu"})) {
    if (master.failure || !master.reply.is_bulk()) continue;
    const std::string& text = master.reply.as_string();
    counters.cpu_s += info_number(text, "used_cpu_user:") + info_number(text, "used_cpu_sys:");
  }
  constexpr std::string_view kPrefix = "cmdstat_";
  for (const MasterReply& master : backend.command_each_master({"INFO", "commandstats"})) {
    if (master.failure || !master.reply.is_bulk()) continue;
    std::istringstream lines(master.reply.as_string());
    // "cmdstat_evalsha:calls=12,usec=...,rejected_calls=0,failed_calls=0"
    for (std::string line; std::getline(lines, line);) {
      const std::size_t colon = line.find(':');
      if (line.rfind(kPrefix, 0) != 0 || colon == std::string::npos) continue;
      const std::string name = line.substr(kPrefix.size(), colon - kPrefix.size());
      counters.calls[name] += info_number(line, ":calls=");
      counters.usec[name] += info_number(line, ",usec=");
      counters.rejected[name] += info_number(line, ",rejected_calls=");
    }
  }
  return counters;
}

double process_cpu_s() {
  constexpr double kUsPerS = 1e6;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& time) { return static_cast<double>(time.tv_sec) + time.tv_usec / kUsPerS; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace turnstile::benchmarks
