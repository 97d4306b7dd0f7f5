// CannBackend: the runtime's Backend over CANN SHMEM (aclshmem), through the CannVendor adapter.
//
// Every vendor call goes through CannVendor (vendor_calls.h), which checks it against the
// where-callable table of the detected generation and maps its result. Nothing here includes a
// vendor header or loads a library itself.
//
// Heap: CreateHeap asks the root PE for the vendor's unique id (its local handle); OpenPeers
// initialises the vendor with it on every PE (collective), then allocates the runtime's heap as
// one symmetric block aligned to kHeapBaseAlignment and a small symmetric control block
// (collective descriptors, their arrival flags and the op epochs). Heap offsets are offsets in
// that block; the vendor translates symmetric addresses to a peer's itself.
//
// Streams: StreamRef{null} is the backend's own stream, made at OpenPeers; an operation on it
// is enqueued and then synchronised before the call returns, so it behaves like the host
// backend's default stream (RunsInline). Any other StreamRef is an aclrtStream of the caller's
// (the framework's current NPU stream): operations are only enqueued, their failures surface at
// that stream's synchronisation, and the local operands they use are kept alive until Quiesce.
// Collectives (barrier, the descriptor exchange, all_gather) run on the backend's stream after
// synchronising the caller's, so their descriptors can be read and matched on the host.
//
// Signals are the vendor's: 32-bit words. A 64-bit signal word (and the kernel-side API's 64-bit
// counters) is used through its low 32-bit half (little-endian): adds and waits act on the low
// half, a 64-bit set also writes the upper half (the sign) first. Values outside the int32
// range are UNSUPPORTED_CAPABILITY, and a word must stay within it (adds do not carry into the
// upper half), which monotonic per-step targets do for billions of steps.
//
// Device identity: the NPU of the initialising thread (aclrtGetDevice; when none is set, the
// backend sets device `rank`), its SoC mapped to a supported model, frozen at OpenPeers.
//
// Thread-safety: as Backend. Calls on the backend's own stream are serialised by a mutex (the
// stream is shared by every thread's default-stream calls).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/device_control.h"
#include "backends/failure_latch.h"
#include "backends/cann/vendor_calls.h"
#include "backends/cann/vendor_library.h"

namespace hyper_parallel::shmem::cann {

class CannBackend final : public Backend {
 public:
  /// Loads the vendor library (vendor_library.h); a failure is reported by CreateHeap.
  CannBackend();
  ~CannBackend() override;

  /// Whether the vendor library loads here (the registry's availability check).
  static Status Available();

  std::string_view name() const override { return "cann"; }
  DeviceId CurrentDevice() const override;

  Status CreateHeap(const HeapSpec& spec, std::string* local_handle) override;
  Status OpenPeers(const std::vector<std::string>& handles) override;
  Status DestroyHeap() override;
  std::byte* LocalHeapBase() const override { return heap_; }
  /// Whether the vendor's heap is mapped in this process (probed at OpenPeers): true for a
  /// heap in host memory (the fake vendor library's), false for NPU memory.
  bool HostAddressableHeap() const override { return host_addressable_; }

  Status ExchangeDescriptors(const CollectiveDescriptor& mine, std::string_view operation,
                             std::vector<CollectiveDescriptor>* all) override;
  Status Quiesce() override;
  StreamRef CurrentStream() const override { return StreamRef{}; }
  bool RunsInline(StreamRef stream) const override { return stream.native == nullptr; }
  WaitInfo Wait() const override;
  std::string StreamLabel(StreamRef stream) const override;
  Status Health() const override;

  Status Put(StreamRef stream, std::uint64_t offset, const void* source, std::uint64_t bytes,
             int pe, KeepAlive keep_alive) override;
  Status Get(StreamRef stream, void* destination, std::uint64_t offset, std::uint64_t bytes,
             int pe, KeepAlive keep_alive) override;
  Status Signal(StreamRef stream, std::uint64_t offset, SignalWidth width, SignalOp op,
                std::int64_t value, int pe) override;
  Status PutSignal(StreamRef stream, std::uint64_t offset, const void* source,
                   std::uint64_t bytes, std::uint64_t signal_offset, SignalWidth width,
                   SignalOp op, std::int64_t value, int pe, KeepAlive keep_alive) override;
  Status WaitSignal(StreamRef stream, std::uint64_t offset, SignalWidth width,
                    Comparison comparison, std::int64_t value) override;
  Status Barrier(StreamRef stream, const CollectiveDescriptor& descriptor,
                 KeepAlive keep_alive) override;
  Status Launch(StreamRef stream, std::string_view name, Kernel kernel,
                KeepAlive keep_alive) override;
  Status LaunchCollective(StreamRef stream, const CollectiveDescriptor& descriptor,
                          std::string_view name, Kernel kernel, KeepAlive keep_alive) override;

  /// The adapter (tests inspect its identity and state).
  const CannVendor* vendor() const { return vendor_.get(); }

 private:
  class KernelApiOnStream;

  // Sets or adds `value` (checked to fit 32 bits) on the signal word at `offset` of PE `pe`.
  Status EnqueueSignal(void* native, std::uint64_t offset, SignalWidth width, SignalOp op,
                       std::int64_t value, int pe);
  // The aclrtStream an operation on `stream` is enqueued on.
  void* Native(StreamRef stream) const;
  // After enqueuing on `stream`: synchronises the backend's own stream, or keeps `keep_alive`
  // until Quiesce for a caller's stream.
  Status Complete(StreamRef stream, KeepAlive keep_alive);
  // Synchronises the caller's stream before a collective runs on the backend's own.
  Status Drain(StreamRef stream);
  // Exchange on the backend's stream, then match; a failure to exchange is terminal.
  Status ExchangeAndMatch(const CollectiveDescriptor& mine, std::string_view operation);
  Status Latch(Status failure);
  // Runs a kernel's body in the custom-op call context.
  static Status RunKernel(const Kernel& kernel, KernelApiOnStream& api);
  std::byte* Control(std::uint64_t offset) const { return control_ + offset; }

  Status load_status_;
  std::shared_ptr<const VendorLibrary> library_;
  std::unique_ptr<CannVendor> vendor_;
  HeapSpec spec_;
  DeviceControlLayout layout_;
  std::byte* heap_ = nullptr;
  std::byte* control_ = nullptr;
  bool host_addressable_ = false;
  void* own_stream_ = nullptr;
  std::recursive_mutex own_stream_mutex_;
  CallerStreams caller_streams_;  // queued on since the last Quiesce
  FailureLatch terminal_;
};

}  // namespace hyper_parallel::shmem::cann
