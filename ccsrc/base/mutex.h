// Mutex, MutexLock and CondVar: the locks of every layer, annotated for Clang's thread-safety
// analysis (-Wthread-safety), so that "must hold mutex_" is a compile-time fact, not prose.
//
// Members a mutex guards are declared GUARDED_BY(mutex_); functions that expect the caller to
// hold it are REQUIRES(mutex_), functions that take it themselves EXCLUDES(mutex_). A clang
// build with -Wthread-safety -Werror (scripts/thread_safety.sh, run by the test command) fails
// on any access the annotations do not allow. Under other compilers the annotations expand to
// nothing and these types are thin wrappers over the standard ones.
//
// There is deliberately no recursive mutex: the analysis cannot follow one, and the design rule
// that no lock is held across a wait or a stream synchronisation removes the reason to re-enter.
//
// Thread-safety: a Mutex is a std::mutex; a MutexLock belongs to the thread that made it; a
// CondVar may be waited on and signalled from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define HPS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define HPS_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) HPS_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY HPS_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) HPS_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) HPS_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) HPS_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) HPS_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) HPS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) HPS_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) HPS_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) HPS_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) HPS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) HPS_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) HPS_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS HPS_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace hyper_parallel::shmem {

class CondVar;

/// A non-recursive mutex the analysis knows as a capability.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mutex_.lock(); }
  void Unlock() RELEASE() { mutex_.unlock(); }
  /// Tells the analysis the caller holds it (where it cannot see that itself).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mutex_;
};

/// Holds a Mutex for its scope. Unlock() and Lock() release it for a stretch and take it back
/// (a wait that must not hold it); the destructor releases it only if held.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mutex) ACQUIRE(mutex) : mutex_(mutex) { mutex_->Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mutex_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    held_ = false;
    mutex_->Unlock();
  }
  void Lock() ACQUIRE() {
    mutex_->Lock();
    held_ = true;
  }

 private:
  Mutex* mutex_;
  bool held_ = true;
};

/// A condition variable; every wait names the Mutex it releases while asleep, which the caller
/// must hold.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  /// Releases `mutex` while asleep and holds it again on return (spurious wakes included).
  void Wait(Mutex* mutex) REQUIRES(mutex) {
    std::unique_lock<std::mutex> lock(mutex->mutex_, std::adopt_lock);
    condition_.wait(lock);
    lock.release();
  }
  /// Wait() until `deadline`; false when it passed.
  bool WaitUntil(Mutex* mutex, std::chrono::steady_clock::time_point deadline) REQUIRES(mutex) {
    std::unique_lock<std::mutex> lock(mutex->mutex_, std::adopt_lock);
    const bool woken = condition_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  void Signal() { condition_.notify_one(); }
  void SignalAll() { condition_.notify_all(); }

 private:
  std::condition_variable condition_;
};

}  // namespace hyper_parallel::shmem
