// Whether the client of a request is still there, as the transport sees its connection. The API
// layer registers what a departure must do (cancel the request's engine work) while the request
// runs; the transport calls leave() when the client hangs up, from its own thread.
#pragma once

#include <functional>
#include <mutex>

namespace trellis {

class ClientPresence {
 public:
  // Runs `cancel` when the client leaves, at once if it already has. `streaming`: the response is
  // an event stream that the API layer writes itself (the transport then leaves it alone). One
  // registration at a time; clear() ends it.
  void on_leave(std::function<void()> cancel, bool streaming);
  void clear();
  // The client hung up: runs the registered callback (once).
  void leave();

  bool gone() const;
  // A whole (non-stream) response is being computed for a registered request.
  bool computing_whole_response() const;
  // An event stream is being written (or is still queued) for a registered request.
  bool streaming_response() const;

 private:
  mutable std::mutex mutex_;
  std::function<void()> cancel_;
  bool streaming_ = false;
  bool gone_ = false;
};

}  // namespace trellis
