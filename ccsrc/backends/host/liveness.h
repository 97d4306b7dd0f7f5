// Liveness of the PEs of a job: a sticky failure latch and a monitor of the peers' processes.
//
// FailureLatch holds the first failure after which this PE's lifecycle cannot go on: a peer that
// exited (PEER_LOST) or a collective that timed out (the PEs' collective sequences are out of
// step). Every bounded wait of the backend polls its flag and gives up at once when it is set,
// so a survivor never waits for the timeout on a PE that is gone.
//
// PeerMonitor watches every peer's process through a pidfd (Linux 5.3+): one thread per PE
// blocks in poll() on all of them and, the moment a peer exits for any reason (exit, crash,
// SIGKILL), latches PEER_LOST naming the PE and its pid and rings this PE's doorbell, so waiters
// asleep on the futex wake and see it. Each PE also publishes which peer it lost, so the first
// death is named on every survivor even when other PEs exit because of it. Nothing runs on the data path. Where pidfds are not
// available the thread checks each peer every 50 ms instead (a zombie counts as gone).
//
// Thread-safety: FailureLatch may be used from any thread. PeerMonitor::Start and Stop are
// called by the owning backend from one thread; the latch it writes is the shared state.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/failure_latch.h"
#include "backends/wait/doorbell.h"
#include "base/status.h"

namespace hyper_parallel::shmem::host {

using shmem::FailureLatch;  // backends/failure_latch.h

class PeerMonitor {
 public:
  PeerMonitor() = default;
  ~PeerMonitor() { Stop(); }
  PeerMonitor(const PeerMonitor&) = delete;
  PeerMonitor& operator=(const PeerMonitor&) = delete;

  /// Starts watching `pids` (indexed by rank; this PE's own entry is skipped, and so is a
  /// negative one: a PE on another host, whose liveness the network transport watches). A peer that is
  /// already gone is latched at once. `bell` is rung when a loss is latched. `lost_words`
  /// (indexed by rank, or empty; null for a PE that is not mapped) are the PEs' "lost peer" words: this PE publishes in its own
  /// which peer it lost, and when a peer exits after having lost another one, the loss is
  /// reported as that first one's (a job whose PE 1 died, then PE 0 exited because of it,
  /// names PE 1 on every survivor). `exited` (when set) is called with every peer seen to
  /// exit, after the latch (a job across hosts passes it on to the other hosts).
  /// `departed_words` (indexed by rank, or empty; null for a PE that is not mapped) say which
  /// peers closed normally: such a peer's exit is a departure, neither latched nor passed on.
  Status Start(int rank, const std::vector<int>& pids, FailureLatch* latch, Doorbell* bell,
               std::vector<std::atomic<std::int32_t>*> lost_words = {},
               std::function<void(int)> exited = {},
               std::vector<std::atomic<std::int32_t>*> departed_words = {});
  /// Stops the thread; idempotent.
  void Stop();

 private:
  void Run();
  void Lost(int pe);

  int rank_ = -1;
  std::vector<int> pids_;
  std::vector<int> pidfds_;  // by rank; -1 for this PE (and in the fallback)
  int stop_fd_ = -1;         // eventfd that ends the thread
  bool uses_pidfds_ = false;
  FailureLatch* latch_ = nullptr;
  Doorbell* bell_ = nullptr;
  std::vector<std::atomic<std::int32_t>*> lost_words_;
  std::vector<std::atomic<std::int32_t>*> departed_words_;
  std::function<void(int)> exited_;
  std::thread thread_;
};

/// The PEs PE `rank` of `size` watches across hosts (docs/scale-out.md, "Liveness"): those
/// at distance 2^k either way (rank + 2^k and rank - 2^k, modulo size, for 2^k < size), in
/// increasing order, without `rank`. Symmetric (b watches a when a watches b) and, over every
/// PE, a connected graph of diameter at most ceil(log2 size): a loss passed on along it reaches
/// every PE. At most 2 ceil(log2 size) PEs. Pure.
std::vector<int> WatchPartners(int rank, int size);

/// PEER_LOST for PE `pe` with process id `pid`; `after` (when >= 0, with `after_pid`) is a PE
/// that exited later because of it, through which the loss was noticed.
Status PeerLost(int pe, int pid, int after = -1, int after_pid = -1);

}  // namespace hyper_parallel::shmem::host
