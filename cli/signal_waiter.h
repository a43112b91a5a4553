// Waits for SIGINT, SIGTERM or SIGHUP (blocked in every thread) on its own thread: during start-up
// the process exits at once; once serving, wait() returns and the caller shuts down gracefully.
//
//   sigset_t signals = SignalWaiter::block_stop_signals();  // before any other thread starts
//   SignalWaiter& waiter = SignalWaiter::start(signals);
//   ... start up ...; waiter.serving(); int signal = waiter.wait();
#pragma once

#include <condition_variable>
#include <csignal>
#include <mutex>
#include <thread>

namespace trellis::cli {

class SignalWaiter {
 public:
  // Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (and the threads it starts later) and
  // ignores SIGPIPE (a peer that left makes writes fail, not the process die); returns the blocked
  // set.
  static sigset_t block_stop_signals();
  // The process's waiter (never freed: its detached thread lives as long as the process).
  static SignalWaiter& start(const sigset_t& signals);

  void serving();
  // The service stopped for good: wait() returns kFailed.
  void failed();
  int wait();

  static constexpr int kFailed = -1;
  static const char* name(int signal);

 private:
  explicit SignalWaiter(const sigset_t& signals);

  std::mutex mutex_;
  std::condition_variable arrived_;
  bool serving_ = false;
  int signal_ = 0;
  std::thread thread_;
};

}  // namespace trellis::cli
