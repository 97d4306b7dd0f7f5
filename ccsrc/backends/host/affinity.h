// ThreadPin: the automatic core binding of HYPER_PARALLEL_SHMEM_WAIT=auto.
//
// A PE that waits by spinning answers in a fraction of a microsecond only while its peer runs
// on another core. Left alone, the scheduler often puts two communicating PEs on one core
// (waking a peer pulls it next to the waker), and every hand-off then costs a spin budget and
// a context switch (about 24 µs measured, against 0.13 µs apart); a CPU-bound process beside
// the job makes it worse. OSHMEM's launcher binds each PE to a core; torchrun and our launcher
// do not. So, with no more PEs than usable cores, the runtime pins the thread that initialised
// it (the thread that calls the operations of the default stream) to one core per PE, chosen
// by rank among the cores it may use, and restores the thread's previous mask at teardown.
// It leaves alone a thread whose affinity someone already narrowed (a launcher that binds),
// oversubscribed jobs (two PEs pinned to one core wait for each other's timeslices), and the
// other threads of the process (torch's intra-op pool, stream executors).
//
// Not thread-safe: the backend pins and restores from the thread that owns the lifecycle.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <string>

namespace hyper_parallel::shmem::host {

class ThreadPin {
 public:
  /// Pins the calling thread to the (rank mod usable)-th core it may use, when its affinity is
  /// the whole machine and `local_pes` fit on those cores; otherwise records why not.
  void PinForPe(int rank, int local_pes);
  /// Gives the pinned thread its previous affinity back (no effect when nothing was pinned).
  void Restore();
  /// "cpu 1", or "none (<reason>)".
  const std::string& description() const { return description_; }
  bool pinned() const { return pinned_; }

 private:
  pid_t thread_ = 0;
  cpu_set_t previous_{};
  bool pinned_ = false;
  std::string description_ = "none (not initialised)";
};

}  // namespace hyper_parallel::shmem::host
