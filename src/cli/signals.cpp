// signalfd, timerfd and eventfd wrappers for the `turnstile run` main loop.

#include "cli/signals.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/check.h"

namespace turnstile::cli {
namespace {

sigset_t make_handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int number : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&set, number);
  return set;
}

// What block_handled_signals() replaced, for the child.
sigset_t original_mask;
struct sigaction original_sigpipe;
bool signals_blocked = false;

[[noreturn]] void fail(const char* what) { throw std::runtime_error(std::string(what) + ": " + std::strerror(errno)); }

void close_fd(int fd) {
  if (fd >= 0) ::close(fd);
}

}  // namespace

const sigset_t& handled_signals() {
  static const sigset_t set = make_handled_signals();
  return set;
}

void block_handled_signals() {
  TURNSTILE_CHECK(!signals_blocked);
  if (sigprocmask(SIG_BLOCK, &handled_signals(), &original_mask) != 0) fail("sigprocmask");
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  if (sigaction(SIGPIPE, &ignore, &original_sigpipe) != 0) fail("sigaction(SIGPIPE)");
  signals_blocked = true;
}

void restore_signals_for_child() {
  if (!signals_blocked) return;
  sigaction(SIGPIPE, &original_sigpipe, nullptr);
  sigprocmask(SIG_SETMASK, &original_mask, nullptr);
}

SignalFd::SignalFd() {
  fd_ = signalfd(-1, &handled_signals(), SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) fail("signalfd");
}

SignalFd::~SignalFd() { close_fd(fd_); }

std::optional<ArrivedSignal> SignalFd::read() {
  signalfd_siginfo info{};
  const ssize_t got = ::read(fd_, &info, sizeof(info));
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return std::nullopt;
  if (got != static_cast<ssize_t>(sizeof(info))) fail("read(signalfd)");
  return ArrivedSignal{.number = static_cast<int>(info.ssi_signo), .sent_to_process_group = info.ssi_code == SI_KERNEL};
}

GraceTimer::GraceTimer() {
  fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd_ < 0) fail("timerfd_create");
}

GraceTimer::~GraceTimer() { close_fd(fd_); }

void GraceTimer::arm(std::chrono::milliseconds delay) {
  itimerspec spec{};
  // An all-zero it_value disarms a timerfd; fire after 1 ns instead.
  const std::int64_t ns = std::max<std::int64_t>(1, std::chrono::nanoseconds(delay).count());
  spec.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  spec.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  if (timerfd_settime(fd_, 0, &spec, nullptr) != 0) fail("timerfd_settime");
}

bool GraceTimer::consume() {
  std::uint64_t expirations = 0;
  const ssize_t got = ::read(fd_, &expirations, sizeof(expirations));
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  if (got != static_cast<ssize_t>(sizeof(expirations))) fail("read(timerfd)");
  return expirations > 0;
}

WakeFd::WakeFd() {
  fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0) fail("eventfd");
}

WakeFd::~WakeFd() { close_fd(fd_); }

void WakeFd::notify() {
  const std::uint64_t one = 1;
  // Only fails if the counter would overflow, which 2^64 notifications
  // never reach; the wake-up is then already pending anyway.
  (void)!::write(fd_, &one, sizeof(one));
}

bool WakeFd::consume() {
  std::uint64_t count = 0;
  const ssize_t got = ::read(fd_, &count, sizeof(count));
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  if (got != static_cast<ssize_t>(sizeof(count))) fail("read(eventfd)");
  return count > 0;
}

}  // namespace turnstile::cli
