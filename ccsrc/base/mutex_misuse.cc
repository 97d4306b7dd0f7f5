// Must NOT compile under clang with -Wthread-safety -Werror: a member guarded by a mutex is
// written without holding it. scripts/thread_safety.sh compiles this file first and fails
// unless clang rejects it for that reason, so the analysis is known to be switched on and
// working before it passes the real sources.
#include "base/mutex.h"

namespace hyper_parallel::shmem {

class Counter {
 public:
  void Increment() { ++count_; }  // no MutexLock: the analysis must refuse this

 private:
  Mutex mutex_;
  int count_ GUARDED_BY(mutex_) = 0;
};

void IncrementWithoutTheLock(Counter& counter) { counter.Increment(); }

}  // namespace hyper_parallel::shmem
