#include "signal_waiter.h"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>

namespace trellis::cli {

sigset_t SignalWaiter::block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  // The terminal or SSH session that ran the process closed: stop as gracefully as for SIGTERM
  // (streams end with their last events, the disk tier is written). There is nothing to reload.
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return signals;
}

SignalWaiter& SignalWaiter::start(const sigset_t& signals) {
  // A static pointer keeps it reachable, so leak checkers do not count it.
  static SignalWaiter* const kWaiter = new SignalWaiter(signals);
  return *kWaiter;
}

SignalWaiter::SignalWaiter(const sigset_t& signals)
    : thread_([this, signals] {
        int signal = 0;
        sigwait(&signals, &signal);
        std::unique_lock<std::mutex> lock(mutex_);
        if (!serving_) {
          std::fprintf(stderr, "%s during start-up: exiting\n", name(signal));
          std::_Exit(1);
        }
        signal_ = signal;
        arrived_.notify_all();
      }) {
  thread_.detach();  // it ends with the process
}

void SignalWaiter::serving() {
  std::lock_guard<std::mutex> lock(mutex_);
  serving_ = true;
}

void SignalWaiter::failed() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (signal_ == 0) signal_ = kFailed;
  arrived_.notify_all();
}

int SignalWaiter::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  arrived_.wait(lock, [this] { return signal_ != 0; });
  return signal_;
}

const char* SignalWaiter::name(int signal) {
  switch (signal) {
    case kFailed:
      return "the service stopped";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "SIGTERM";
  }
}

}  // namespace trellis::cli
