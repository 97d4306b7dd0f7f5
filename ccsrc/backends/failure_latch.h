// FailureLatch: the first failure after which a backend's lifecycle cannot go on (a lost peer,
// a collective that timed out, a failed teardown). Sticky: later failures are not kept. Its
// flag is one atomic load, so bounded waits can poll it.
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <atomic>

#include "base/mutex.h"
#include "base/status.h"

namespace hyper_parallel::shmem {

class FailureLatch {
 public:
  /// True once a failure was latched. One acquire load.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  /// The flag bounded waits poll.
  const std::atomic<bool>* flag() const { return &failed_; }
  /// Keeps `failure` unless a failure is already latched; true when this one was kept.
  bool Set(Status failure) EXCLUDES(mutex_);
  /// The latched failure, or OK.
  Status Get() const EXCLUDES(mutex_);
  /// Forgets the failure (a new lifecycle).
  void Reset() EXCLUDES(mutex_);

 private:
  std::atomic<bool> failed_{false};
  mutable Mutex mutex_;
  Status failure_ GUARDED_BY(mutex_);
};

inline bool FailureLatch::Set(Status failure) {
  MutexLock lock(&mutex_);
  if (failed_.load(std::memory_order_relaxed)) return false;
  failure_ = std::move(failure);
  failed_.store(true, std::memory_order_release);
  return true;
}

inline Status FailureLatch::Get() const {
  if (!failed()) return Status::Ok();
  MutexLock lock(&mutex_);
  return failure_;
}

inline void FailureLatch::Reset() {
  MutexLock lock(&mutex_);
  failure_ = Status::Ok();
  failed_.store(false, std::memory_order_release);
}

}  // namespace hyper_parallel::shmem
