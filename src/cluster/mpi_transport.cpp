#include "cluster/mpi_transport.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

namespace trellis {
namespace {

MpiTransport* g_instance = nullptr;

// Polling backs off from a busy check to a 1 ms sleep: an idle stage costs next to nothing, and a
// stage waiting for a micro-batch that is about to arrive answers within microseconds.
void back_off(int& round) {
  if (round < 64) {
    std::this_thread::yield();
  } else {
    const int us = std::min(1000, 10 << std::min(7, (round - 64) / 64));
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
  ++round;
}

}  // namespace

std::string missed_deadline(int rank, const char* what, double seconds) {
  char text[160];
  std::snprintf(text, sizeof text, "pipeline stage on rank %d did not %s within %.0f s", rank,
                what, seconds);
  return text;
}

Result<MpiTransport*> MpiTransport::init(int* argc, char*** argv) {
  if (g_instance != nullptr) return g_instance;
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
    return Error{"MPI_Init_thread failed"};
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    return Error{"the MPI library does not support MPI_THREAD_MULTIPLE"};
  }
  auto* t = new MpiTransport();
  MPI_Comm_rank(MPI_COMM_WORLD, &t->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &t->size_);
  t->sender_ = std::thread([t] { t->sending_loop(); });
  g_instance = t;
  return t;
}

MpiTransport* MpiTransport::instance() {
  return g_instance;
}

void MpiTransport::send(int dest, MessageTag tag, std::vector<uint8_t> bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(Outgoing{dest, tag, std::move(bytes)});
  }
  changed_.notify_all();
}

void MpiTransport::sending_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    Outgoing out = std::move(queue_.front());
    queue_.pop_front();
    ++in_flight_;
    lock.unlock();
    MPI_Send(out.bytes.data(), static_cast<int>(out.bytes.size()), MPI_BYTE, out.dest,
             static_cast<int>(out.tag), MPI_COMM_WORLD);
    lock.lock();
    --in_flight_;
    changed_.notify_all();
  }
}

Status MpiTransport::flush(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool done = changed_.wait_until(lock, deadline,
                                        [this] { return queue_.empty() && in_flight_ == 0; });
  if (!done) return Error{"messages to the other stages were not taken in time"};
  return {};
}

Status MpiTransport::receive(int source, MessageTag tag, std::vector<uint8_t>& out,
                             Clock::time_point deadline) {
  for (int round = 0;; back_off(round)) {
    int found = 0;
    MPI_Message message;
    MPI_Status status;
    MPI_Improbe(source, static_cast<int>(tag), MPI_COMM_WORLD, &found, &message, &status);
    if (found) {
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      out.resize(static_cast<size_t>(count));
      MPI_Mrecv(out.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE);
      return {};
    }
    if (Clock::now() >= deadline) return Error{"no message from rank " + std::to_string(source)};
  }
}

void MpiTransport::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this keeps the promise if it did
}

void MpiTransport::finalize() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (sender_.joinable()) sender_.join();
  MPI_Finalize();
}

}  // namespace trellis
