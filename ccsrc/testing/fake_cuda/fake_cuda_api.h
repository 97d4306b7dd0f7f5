// FakeCudaApi: a CudaApi without a GPU, for unit tests of the CUDA backend (tests only).
//
// What it models:
//   - devices: `device_count` devices, each thread's current device (0 until it sets one, as
//     in CUDA), a fixed UUID per device index (the same in every process);
//   - device memory: each Malloc is its own memfd (anonymous: nothing under /dev/shm), sized,
//     sealed against resizing and mapped MAP_SHARED; the pointers are host addresses;
//   - IPC: a 64-byte handle {magic, pid, fd, bytes, inode}; IpcOpen maps /proc/<pid>/fd/<fd> of the
//     exporting process, so a handle opens in any process of the same user while the exporter
//     lives and keeps the memory, and in the exporting process itself as a second mapping of
//     the same pages (CUDA refuses that; the real CudaRuntimeApi answers the exported pointer).
//     Mapping lifetimes are checked: each open mapping holds a shared flock on the memory until
//     IpcClose, and Free refuses memory still open anywhere (CUDA leaves freeing it undefined);
//   - pinned host memory: plain aligned host memory;
//   - streams: opaque tokens (the null stream is CUDA's default stream and always exists). Each
//     operation runs to completion when it is enqueued, on the caller's thread, so
//     StreamSynchronize has nothing left to wait for. CopyBlocksAsync copies its blocks one
//     after the other with memmove, after refusing a batch whose blocks overlap (the real
//     kernel copies them concurrently); CopyBlocksAndAddAsync likewise, each block followed by
//     its addition. WriteValue64 and AddValue64 are seq_cst
//     atomics; WaitValue64 polls the word (a brief spin, then ~50 us sleeps) until the
//     comparison holds or timeout_ns has passed, then fills the report and returns OK: the
//     stream "runs on", as the real wait kernel does. ElementwiseAsync runs the step with the
//     CPU's arithmetic (ops/reduce/element.h), after refusing pointers misaligned for their
//     element type, as the real kernel would fault on them.
// Every failure is BACKEND_ERROR "CUDA call failed: call=<cuda call>, error=<cudaError name>",
// worded as the real runtime's: an unknown pointer or stream, a device out of range, a
// misaligned word, a malformed handle, a null pointer or overlapping blocks in a batch.
//
// Kernels load as CUDA 12.2+ loads them, lazily: each kernel (the copy, add-values, write, add and
// wait kernels) is loaded at its first launch unless LoadKernels loaded them all before. With
// FirstLaunchSynchronises on, that first load waits, as the real one may, until no wait kernel
// is running in this process: a signal whose kernel is launched for the first time while a wait
// spins for it is then held back until the wait gives up.
//
// Test hooks: FailNext makes the next call of a method fail with a chosen Status; calls() is a
// log of every method called ("Malloc bytes=4096"); DriftCurrentDevice changes the calling
// thread's current device as other code in the process could, unlogged;
// FirstLaunchSynchronises turns on the lock-step lazy loading above.
//
// Thread-safety: any thread may call any method (one mutex; WaitValue64 polls outside it).
// The destructor unmaps, closes and frees whatever is left, silently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_api.h"

namespace hyper_parallel::shmem::cuda {

class FakeCudaApi final : public CudaApi {
 public:
  /// A process with `device_count` devices (at least 1).
  explicit FakeCudaApi(int device_count = 1);
  ~FakeCudaApi() override;
  FakeCudaApi(const FakeCudaApi&) = delete;
  FakeCudaApi& operator=(const FakeCudaApi&) = delete;

  std::string_view name() const override { return "fake"; }
  /// Its "device" memory is host shared memory.
  bool HostAddressableMemory() const override { return true; }

  Status GetDevice(int* device) const override;
  Status SetDevice(int device) override;
  Status DeviceUuid(int device, std::string* uuid) const override;
  Status LoadKernels() override;

  Status Malloc(std::size_t bytes, void** ptr) override;
  Status Free(void* ptr) override;
  Status MallocHost(std::size_t bytes, void** ptr) override;
  Status FreeHost(void* ptr) override;
  Status IpcExport(void* ptr, std::string* handle) override;
  Status IpcOpen(const std::string& handle, void** ptr) override;
  Status IpcClose(void* ptr) override;

  Status StreamCreate(void** stream) override;
  Status StreamDestroy(void* stream) override;
  Status StreamSynchronize(void* stream) override;
  Status MemcpyAsync(void* dst, const void* src, std::size_t bytes, void* stream) override;
  Status CopyBlocksAsync(void* stream, const CopyBlock* blocks, std::size_t count) override;
  Status CopyBlocksAndAddAsync(void* stream, const SignalledCopyBlock* blocks,
                               std::size_t count) override;
  Status WriteValue64(void* stream, void* address, std::int64_t value) override;
  Status AddValue64(void* stream, void* address, std::int64_t value) override;
  Status ElementwiseAsync(void* stream, const data_plane::ElementwiseStep& step) override;
  Status WaitValue64(void* stream, const void* address, WaitComparison comparison,
                     std::int64_t value, std::uint64_t timeout_ns, WaitReport* report) override;

  // ---- test hooks -----------------------------------------------------------------------
  /// The next call of the method `call` (its name in CudaApi, e.g. "Malloc") logs itself and
  /// returns `status` without doing anything. Several for one method fail in turn.
  void FailNext(std::string_view call, Status status);
  /// Every method called so far, oldest first: its name and key arguments, e.g.
  /// "SetDevice device=1", "WaitValue64 comparison=ge value=3 timeout_ns=1000".
  std::vector<std::string> calls() const;
  /// Sets the calling thread's current device behind the backend's back, as a framework
  /// sharing the process could; not range-checked (a test may drift anywhere) and not logged.
  void DriftCurrentDevice(int device);
  /// From now on, a kernel's first launch (its lazy load) waits until no wait kernel is
  /// running in this process, as CUDA's lazy loading may synchronise the context.
  void FirstLaunchSynchronises();
  /// The next IpcClose sleeps `delay` first: a PE slow to close its mappings of its peers.
  void DelayNextIpcClose(std::chrono::milliseconds delay);
  /// How many Malloc allocations the fakes of this process have freed (process-wide, so it
  /// can be read after the fake itself is gone).
  static int FreedAllocations();

 private:
  struct Memory {
    std::size_t bytes = 0;
    int fd = -1;  // the memfd of a Malloc, or an IpcOpen's descriptor holding its lock
  };

  // Logs `entry` and takes the failure FailNext queued for `call`, if any (test bookkeeping,
  // so const methods log too). Holds mutex_.
  Status Enter(std::string_view call, std::string entry) const;
  Status CheckStream(std::string_view cuda_call, void* stream) const;  // holds mutex_
  Status CheckWord(std::string_view cuda_call, const void* address) const;
  int& CurrentDevice() const;  // holds mutex_
  // Loads `kernel` at its first launch (waiting first for the running waits to end where
  // FirstLaunchSynchronises is on). Holds mutex_ through `lock`, which the wait releases.
  void LoadOnFirstLaunch(std::unique_lock<std::mutex>& lock, std::string_view kernel);

  const int device_count_;
  mutable std::mutex mutex_;
  mutable std::map<std::thread::id, int> current_device_;
  std::map<void*, Memory> allocations_;  // Malloc base -> its memfd
  std::map<void*, Memory> opened_;       // IpcOpen mappings
  std::set<void*> host_;                 // MallocHost
  std::set<void*> streams_;
  std::uintptr_t next_stream_ = 0x5700;
  mutable std::map<std::string, std::deque<Status>, std::less<>> failures_;
  mutable std::vector<std::string> calls_;
  std::set<std::string, std::less<>> loaded_;  // kernels loaded in this process
  bool first_launch_synchronises_ = false;
  int waits_running_ = 0;                  // WaitValue64 calls polling now
  std::chrono::milliseconds ipc_close_delay_{0};
  std::condition_variable waits_ended_;    // waits_running_ fell to 0
};

}  // namespace hyper_parallel::shmem::cuda
