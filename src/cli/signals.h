// cli/signals.h
//
// The signals `turnstile run` handles itself, read from a signalfd so the
// main loop waits on one poll() for signals, the child's exit, a lost lock
// and the kill-grace timer: no handlers, no busy polling.
//
// block_handled_signals() must run first in main(), before any thread
// exists, so every thread inherits the blocked mask and the signals reach
// only the signalfd. A child gets the original mask and dispositions back
// before exec (ChildProcess does that).

#ifndef TURNSTILE_CLI_SIGNALS_H_
#define TURNSTILE_CLI_SIGNALS_H_

#include <signal.h>

#include <chrono>
#include <optional>

namespace turnstile::cli {

// SIGINT, SIGTERM, SIGHUP (forwarded to the child) and SIGCHLD.
const sigset_t& handled_signals();
// Blocks handled_signals() and ignores SIGPIPE (a write to a socket Redis
// closed must be an error, not death). Remembers the previous state for
// restore_signals_for_child().
void block_handled_signals();
// In a forked child before exec: the mask and SIGPIPE disposition as they
// were before block_handled_signals(). Async-signal-safe.
void restore_signals_for_child();

// A signal that arrived: its number and whether the kernel sent it to the
// whole process group (a terminal's Ctrl-C, hang-up), in which case the
// child, being in that group, got it too.
struct ArrivedSignal {
  int number = 0;
  bool sent_to_process_group = false;
};

// A signalfd for handled_signals(). Move-only owner of the descriptor.
class SignalFd {
 public:
  SignalFd();
  ~SignalFd();
  SignalFd(const SignalFd&) = delete;
  SignalFd& operator=(const SignalFd&) = delete;

  int fd() const { return fd_; }
  // The next pending signal, or nullopt if none is pending (never blocks).
  std::optional<ArrivedSignal> read();

 private:
  int fd_ = -1;
};

// A one-shot monotonic timer as a descriptor (timerfd), for the kill grace.
class GraceTimer {
 public:
  GraceTimer();
  ~GraceTimer();
  GraceTimer(const GraceTimer&) = delete;
  GraceTimer& operator=(const GraceTimer&) = delete;

  int fd() const { return fd_; }
  // Fires once after `delay` (a zero delay fires at once).
  void arm(std::chrono::milliseconds delay);
  // Consumes an expiry; returns whether the timer had fired.
  bool consume();

 private:
  int fd_ = -1;
};

// An eventfd another thread can notify, to wake the main loop's poll().
class WakeFd {
 public:
  WakeFd();
  ~WakeFd();
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;

  int fd() const { return fd_; }
  // Safe from any thread; never blocks.
  void notify();
  // Consumes notifications; returns whether there was any.
  bool consume();

 private:
  int fd_ = -1;
};

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_SIGNALS_H_
