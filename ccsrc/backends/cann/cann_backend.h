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
// Streams and collectives are the device-backend skeleton's (backends/device_backend.h): each
// thread's default-stream work runs on an NPU stream of its own and is synchronised before the
// call returns, so it behaves like the host backend's default stream; a caller's stream (the
// framework's current NPU stream) is only enqueued on, its failures surfacing at that stream's
// synchronisation.
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
// Thread-safety: as Backend.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/cann/vendor_calls.h"
#include "backends/cann/vendor_library.h"
#include "backends/device_backend.h"

namespace hyper_parallel::shmem::cann {

class CannBackend final : public DeviceBackend {
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
  WaitInfo Wait() const override;
  std::string StreamLabel(StreamRef stream) const override;

 protected:
  Status CreateStream(void** stream) override { return vendor_->CreateStream(stream); }
  Status DestroyStream(void* stream) override { return vendor_->DestroyStream(stream); }
  Status Synchronize(void* stream) override { return vendor_->SynchronizeStream(stream); }
  Status EnqueuePut(void* stream, int pe, Region region, std::uint64_t offset,
                    const void* source, std::uint64_t bytes) override;
  Status EnqueueGet(void* stream, void* destination, int pe, Region region,
                    std::uint64_t offset, std::uint64_t bytes) override;
  Status EnqueueSetWord(void* stream, int pe, Region region, std::uint64_t offset,
                        std::int64_t value) override;
  Status EnqueueWaitAtLeast(void* stream, Region region, std::uint64_t offset,
                            std::int64_t value, std::string_view what) override;
  Status EnqueueAddCounter(void* stream, int pe, std::uint64_t offset,
                           std::int64_t value) override;
  Status CheckSignal(SignalWidth width, std::int64_t value) const override;
  Status CheckWait(SignalWidth width, std::int64_t value) const override;
  Status EnqueueSignal(void* stream, int pe, std::uint64_t offset, SignalWidth width,
                       SignalOp op, std::int64_t value) override;
  Status EnqueueWaitSignal(void* stream, std::uint64_t offset, SignalWidth width,
                           Comparison comparison, std::int64_t value) override;

 private:
  // The symmetric address of `offset` in `region` (the vendor finds a peer's copy itself).
  std::byte* Address(Region region, std::uint64_t offset) const {
    return (region == Region::kHeap ? heap_ : control_) + offset;
  }

  Status load_status_;
  std::shared_ptr<const VendorLibrary> library_;
  std::unique_ptr<CannVendor> vendor_;
  std::byte* heap_ = nullptr;
  std::byte* control_ = nullptr;
  bool host_addressable_ = false;
};

}  // namespace hyper_parallel::shmem::cann
