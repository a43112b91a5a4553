// An exclusive lock on a cache directory, held for the life of the object: two processes never
// write one disk tier at once. flock(2) on DIR/lock: the kernel drops the lock when its holder
// exits, however it exits (SIGKILL included), so a crash never leaves the directory locked.
#pragma once

#include <string>

#include "base/result.h"

namespace trellis {

class DirLock {
 public:
  // Creates DIR (and its parents) when missing, then takes the lock without waiting. Errors when
  // another process (or another DirLock of this one) holds it, naming the holder's pid.
  static Result<DirLock> acquire(const std::string& dir);

  DirLock() = default;
  ~DirLock();
  DirLock(DirLock&& other) noexcept;
  DirLock& operator=(DirLock&& other) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  bool held() const { return fd_ >= 0; }

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace trellis
