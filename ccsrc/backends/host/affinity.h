// ThreadPin: the automatic core binding of HYPER_PARALLEL_SHMEM_WAIT=auto.
//
// A PE that waits by spinning answers in a fraction of a microsecond only while its peer runs
// on another core. Left alone, the scheduler often puts two communicating PEs on one core
// (waking a peer pulls it next to the waker), and every hand-off then costs a spin budget and
// a context switch (about 24 µs measured, against 0.13 µs apart); a CPU-bound process beside
// the job makes it worse. OSHMEM's launcher binds each PE to a core; torchrun and our launcher
// do not. So, with no more PEs than usable cores, the runtime splits the cores into one
// contiguous share per PE (one core each on a 2-core machine with 2 PEs; 32 each on 64 cores)
// and pins the thread that initialised it (the thread that calls the operations of the default
// stream) to the share of its rank; threads it creates later (stream executors, torch's
// intra-op pool when first used) inherit the share, so a PE and its helpers stay on their cores
// and off the peers'. The thread's previous mask is restored at teardown. It leaves alone a
// thread whose affinity someone already narrowed (a launcher that binds), oversubscribed jobs
// (two PEs pinned to one core wait for each other's timeslices), and the threads that existed
// before.
//
// Not thread-safe: the backend pins and restores from the thread that owns the lifecycle.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <string>

namespace hyper_parallel::shmem::host {

class ThreadPin {
 public:
  /// Pins the calling thread to share `rank` of its usable cores split among `local_pes`, when
  /// its affinity is the whole machine and the PEs fit on those cores; otherwise records why.
  void PinForPe(int rank, int local_pes);
  /// Gives the pinned thread its previous affinity back (no effect when nothing was pinned).
  void Restore();
  /// "cpu 1", "cpus 0-15", or "none (<reason>)".
  const std::string& description() const { return description_; }
  bool pinned() const { return pinned_; }

 private:
  pid_t thread_ = 0;
  cpu_set_t previous_{};
  bool pinned_ = false;
  std::string description_ = "none (not initialised)";
};

}  // namespace hyper_parallel::shmem::host
