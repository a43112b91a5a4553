// Messages between the processes of an MPI job, with every wait bounded: a stage that died or
// hangs turns into an error after the deadline instead of a silent hang. Sends are handed to a
// thread of their own, so that a stage computes its next micro-batch while the previous one's
// rows are on their way (MPI moves large messages only while a thread is inside an MPI call).
// Only built with MPI (TRELLIS_HAVE_MPI).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"

namespace trellis {

enum class MessageTag : int {
  CONTROL = 1,  // rank 0 -> every stage: a StageCommand and its words
  HIDDEN = 2,   // stage k -> k + 1: a micro-batch's hidden rows
  LOGITS = 3,   // last stage -> rank 0: a micro-batch's logits
  REPORT = 4,   // every stage -> rank 0 after a step: its StageStats
};

class MpiTransport {
 public:
  using Clock = std::chrono::steady_clock;

  // Initialises MPI (once per process, with threads) and starts the sending thread.
  static Result<MpiTransport*> init(int* argc, char*** argv);
  static MpiTransport* instance();

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Queues `bytes` for `dest`; messages to one destination with one tag arrive in order.
  void send(int dest, MessageTag tag, std::vector<uint8_t> bytes);
  // Waits until everything queued has been sent, or the deadline.
  Status flush(Clock::time_point deadline);
  // Receives the next message from `source` with `tag` into `out` (resized to fit), waiting until
  // the deadline (Clock::time_point::max(): no bound).
  Status receive(int source, MessageTag tag, std::vector<uint8_t>& out,
                 Clock::time_point deadline);

  // Ends the whole job at once: every rank is killed.
  [[noreturn]] void abort(int code);
  // Stops the sending thread and finalises MPI.
  void finalize();

 private:
  struct Outgoing {
    int dest;
    MessageTag tag;
    std::vector<uint8_t> bytes;
  };
  MpiTransport() = default;
  void sending_loop();

  int rank_ = 0;
  int size_ = 1;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Outgoing> queue_;
  int in_flight_ = 0;  // taken from the queue, not yet sent
  bool stopping_ = false;
  std::thread sender_;
};

// "rank N did not ... within S s": the message of a missed deadline.
std::string missed_deadline(int rank, const char* what, double seconds);

}  // namespace trellis
