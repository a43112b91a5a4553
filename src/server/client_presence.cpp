#include "server/client_presence.h"

#include <utility>

namespace trellis {

void ClientPresence::on_leave(std::function<void()> cancel, bool streaming) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (gone_) {
    lock.unlock();
    cancel();
    return;
  }
  cancel_ = std::move(cancel);
  streaming_ = streaming;
}

void ClientPresence::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancel_ = nullptr;
}

void ClientPresence::leave() {
  std::function<void()> cancel;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (gone_) return;
    gone_ = true;
    cancel = std::move(cancel_);
    cancel_ = nullptr;
  }
  if (cancel) cancel();  // outside the lock: cancelling may take the engine's locks
}

bool ClientPresence::gone() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return gone_;
}

bool ClientPresence::computing_whole_response() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancel_ != nullptr && !streaming_;
}

bool ClientPresence::streaming_response() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancel_ != nullptr && streaming_;
}

}  // namespace trellis
