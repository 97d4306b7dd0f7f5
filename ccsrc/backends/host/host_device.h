// HostDevice: the device surface an op kernel sees on the host backend.
//
// A kernel (ops/) is written against this surface only: every PE's heap as mapped in this
// process, copies, epoch publication to a peer's sync slot, bounded waits for epochs, and a
// small pool of copy workers that stand in for a device's cores. The vendor calls stay here,
// guarded by the where-callable table like every other host-backend primitive.
//
// Epochs are monotonic: a kernel publishes epoch e on slot s to PE p (store-release into p's
// control block, then p's doorbell) and waits until every source has published at least e on
// its own slot s (acquire). Nothing is ever reset to zero.
//
// Thread-safety: one kernel runs at a time per stream; RunParallel may be called from any one
// thread at a time (the backend serialises kernels that use the pool).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/host/call_sites.h"
#include "backends/host/control_block.h"
#include "backends/host/doorbell.h"
#include "runtime/status.h"

namespace hyper_parallel::shmem::host {

class CopyWorkers;

class HostDevice {
 public:
  HostDevice(int rank, int size, std::chrono::milliseconds timeout, WaitPolicy wait_policy,
             std::vector<std::byte*> heap_bases, std::vector<ControlBlock*> controls,
             CopyWorkers* workers)
      : rank_(rank),
        size_(size),
        timeout_(timeout),
        wait_policy_(wait_policy),
        heap_bases_(std::move(heap_bases)),
        controls_(std::move(controls)),
        workers_(workers) {}

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// Address of heap offset 0 of PE `pe` in this process.
  std::byte* heap(int pe) const { return heap_bases_[pe]; }
  /// How many copy workers (the caller included) RunParallel uses.
  int workers() const;

  template <CallSite kSite>
  void Copy(void* destination, const void* source, std::uint64_t bytes) const {
    RequireCallable<HostCall::kCopyBytes, kSite>();
    CopyBytes(destination, source, bytes);
  }

  /// Publishes `epoch` on `slot` to PE `pe`, after every write this thread made before.
  template <CallSite kSite>
  void Publish(int pe, int slot, std::uint64_t epoch) const {
    RequireCallable<HostCall::kAtomicSignal, kSite>();
    controls_[pe]->op_epochs[slot][rank_].value.store(epoch, std::memory_order_release);
    Ring<kSite>(&controls_[pe]->doorbell);
  }

  /// The epoch `source` last published to this PE on `slot`.
  std::uint64_t Observed(int slot, int source) const {
    return controls_[rank_]->op_epochs[slot][source].value.load(std::memory_order_acquire);
  }

  /// Waits until every PE in `sources` published at least `epoch` on `slot`; on timeout
  /// returns TIMEOUT naming `operation`, the slot's meaning `waiting_for` and the missing PEs.
  template <CallSite kSite>
  Status WaitAll(int slot, std::uint64_t epoch, const std::vector<int>& sources,
                 std::string_view operation, std::string_view waiting_for) const {
    RequireCallable<HostCall::kBoundedWait, kSite>();
    auto all_arrived = [&] {
      for (int source : sources) {
        if (Observed(slot, source) < epoch) return false;
      }
      return true;
    };
    if (WaitUntil<kSite>(&controls_[rank_]->doorbell, all_arrived,
                         timeout_, wait_policy_)) {
      return Status::Ok();
    }
    return Timeout(slot, epoch, sources, operation, waiting_for);
  }

  /// Runs body(worker) for worker in [0, workers) in parallel, the caller being worker 0, and
  /// returns once all are done (their writes are then visible to the caller).
  void RunParallel(const std::function<void(int worker)>& body) const;

 private:
  static void CopyBytes(void* destination, const void* source, std::uint64_t bytes);
  Status Timeout(int slot, std::uint64_t epoch, const std::vector<int>& sources,
                 std::string_view operation, std::string_view waiting_for) const;

  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  WaitPolicy wait_policy_;
  std::vector<std::byte*> heap_bases_;
  std::vector<ControlBlock*> controls_;
  CopyWorkers* workers_;  // may be null: the caller alone
};

/// Persistent helper threads for RunParallel. Created with the heap, joined at DestroyHeap.
class CopyWorkers {
 public:
  /// `threads` helpers besides the caller (0: the caller works alone).
  explicit CopyWorkers(int threads);
  ~CopyWorkers();
  CopyWorkers(const CopyWorkers&) = delete;
  CopyWorkers& operator=(const CopyWorkers&) = delete;

  int workers() const { return static_cast<int>(threads_.size()) + 1; }
  void Run(const std::function<void(int worker)>& body);

 private:
  void Loop(int worker);

  std::mutex run_mutex_;  // one Run at a time (kernels on different streams share the pool)
  std::mutex mutex_;
  std::condition_variable start_;
  std::condition_variable finished_;
  const std::function<void(int)>* body_ = nullptr;
  std::uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

/// How many copy workers pay off: the machine's cores shared among the PEs on it, at least
/// one (the caller), at most `cap`.
int DefaultCopyWorkers(int local_pes, int cap = 8);

}  // namespace hyper_parallel::shmem::host
