#include "backends/cann/cann_backend.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>

#include <sys/mman.h>
#include <unistd.h>

#include "backends/cann/call_sites.h"

namespace hyper_parallel::shmem::cann {
namespace {

constexpr std::uint64_t kLine = DeviceControlLayout::kLine;

AclshmemCmp VendorComparison(Comparison comparison) {
  return shmem::VendorComparison(comparison, ACLSHMEM_CMP_EQ, ACLSHMEM_CMP_NE, ACLSHMEM_CMP_GT,
                                 ACLSHMEM_CMP_GE, ACLSHMEM_CMP_LT, ACLSHMEM_CMP_LE);
}

Status ThirtyTwoBit(std::string_view what, std::int64_t value) {
  if (value >= std::numeric_limits<std::int32_t>::min() &&
      value <= std::numeric_limits<std::int32_t>::max()) {
    return Status::Ok();
  }
  return Status::Contract(ErrorCode::kUnsupportedCapability, what,
                          "a 32-bit value (aclshmem signals are 32-bit)", std::to_string(value));
}

// Whether the page holding `address` is mapped in this process (mincore fails with ENOMEM for
// an address that is not): device memory outside the host's address space is not.
bool MappedHere(const void* address) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const auto start = reinterpret_cast<std::uintptr_t>(address) / page * page;
  unsigned char resident = 0;
  return ::mincore(reinterpret_cast<void*>(start), static_cast<std::size_t>(page), &resident) == 0;
}

std::int32_t* Word(std::byte* address) { return reinterpret_cast<std::int32_t*>(address); }

}  // namespace

CannBackend::CannBackend() { load_status_ = VendorLibrary::Load(LoadOptions{}, &library_); }

CannBackend::~CannBackend() { DestroyHeap(); }

Status CannBackend::Available() {
  std::shared_ptr<const VendorLibrary> library;
  return VendorLibrary::Load(LoadOptions{}, &library);
}

DeviceId CannBackend::CurrentDevice() const {
  int device = -1;
  if (vendor_ != nullptr) {
    if (!vendor_->CurrentDevice(&device).ok()) device = -1;
  } else if (library_ != nullptr) {
    CannVendor probe(library_);
    if (!probe.CurrentDevice(&device).ok()) device = -1;
  }
  return DeviceId{DeviceType::kNpu, device};
}

Status CannBackend::CreateHeap(const HeapSpec& spec, std::string* local_handle) {
  HPS_RETURN_IF_ERROR(load_status_);
  BeginHeap(spec);
  vendor_ = std::make_unique<CannVendor>(library_);
  int device = -1;
  if (!vendor_->CurrentDevice(&device).ok()) {
    // No device chosen on this thread yet (a framework would have): one NPU per PE.
    HPS_RETURN_IF_ERROR(vendor_->SetDevice(spec.rank));
  }
  local_handle->clear();
  if (spec.rank == 0) {
    UniqueId unique_id{};
    HPS_RETURN_IF_ERROR(vendor_->GetUniqueId(&unique_id));
    local_handle->assign(reinterpret_cast<const char*>(unique_id.data()), unique_id.size());
  }
  return Status::Ok();
}

Status CannBackend::OpenPeers(const std::vector<std::string>& handles) {
  if (vendor_ == nullptr || handles.empty()) {
    return Status::Assertion(ErrorCode::kInvalidState, "open_peers before create_heap", {});
  }
  HPS_RETURN_IF_ERROR(OpenAgreement());
  InitParams params;
  params.my_pe = spec().rank;
  params.n_pes = spec().size;
  if (handles[0].size() != params.unique_id.size()) {
    return Status::Contract(ErrorCode::kInvalidArgument, "the root's unique id",
                            std::to_string(params.unique_id.size()) + " bytes",
                            std::to_string(handles[0].size()) + " bytes");
  }
  std::memcpy(params.unique_id.data(), handles[0].data(), params.unique_id.size());
  // The vendor's heap holds the runtime's heap (aligned) and the control block.
  params.heap_bytes =
      spec().heap_bytes + kHeapBaseAlignment + RoundUp(layout().bytes, kLine) + kLine;
  params.timeout_seconds = TimeoutSecondsFrom(spec().timeout);
  HPS_RETURN_IF_ERROR(vendor_->Init(params));
  void* heap = nullptr;
  void* control = nullptr;
  HPS_RETURN_IF_ERROR(vendor_->Align(kHeapBaseAlignment, spec().heap_bytes, &heap));
  heap_ = static_cast<std::byte*>(heap);
  HPS_RETURN_IF_ERROR(vendor_->Align(kLine, layout().bytes, &control));
  control_ = static_cast<std::byte*>(control);
  host_addressable_ = MappedHere(heap_);
  void* stream = nullptr;
  HPS_RETURN_IF_ERROR(ThreadStream(&stream));
  // The control block starts zeroed (its constants set) on every PE before any peer writes
  // to it.
  const std::vector<std::byte> initial = layout().Initial();
  HPS_RETURN_IF_ERROR(
      vendor_->PutOnStream(control_, initial.data(), initial.size(), spec().rank, stream));
  HPS_RETURN_IF_ERROR(vendor_->BarrierAllOnStream(stream));
  return HostSynchronize(stream);
}

Status CannBackend::DestroyHeap() {
  if (vendor_ == nullptr) return Status::Ok();
  Status first;
  auto keep = [&first](Status status) {
    if (first.ok() && !status.ok()) first = std::move(status);
  };
  if (vendor_->state() == VendorState::kInitialized) {
    keep(Quiesce());
    keep(ReleaseStreams());
    if (control_ != nullptr) keep(vendor_->Free(control_));
    if (heap_ != nullptr) keep(vendor_->Free(heap_));
    keep(vendor_->Finalize());
    if (!first.ok()) Latch(first);
  } else {
    AbandonStreams();  // the vendor is gone or failed: its streams with it
  }
  control_ = heap_ = nullptr;
  host_addressable_ = false;
  CloseAgreement();
  // A finalised adapter is unusable; a failed one keeps the vendor's buffers alive on purpose.
  if (vendor_->state() != VendorState::kInitialized) vendor_.reset();
  return first;
}

WaitInfo CannBackend::Wait() const {
  WaitInfo info;
  info.mode = spec().wait;
  info.sleeps = true;
  info.pinning = "none (waits run on the NPU stream)";
  return info;
}

std::string CannBackend::StreamLabel(StreamRef stream) const {
  if (stream.native == nullptr) return "default (the backend's NPU stream)";
  return "npu stream " + Hex(stream.native);
}

Status CannBackend::EnqueuePut(void* stream, int pe, Region region, std::uint64_t offset,
                              const void* source, std::uint64_t bytes) {
  return vendor_->PutOnStream(Address(region, offset), source, bytes, pe, stream);
}

Status CannBackend::EnqueueGet(void* stream, void* destination, int pe, Region region,
                              std::uint64_t offset, std::uint64_t bytes) {
  return vendor_->GetOnStream(destination, Address(region, offset), bytes, pe, stream);
}

Status CannBackend::EnqueueSetWord(void* stream, int pe, Region region, std::uint64_t offset,
                                  std::int64_t value) {
  return vendor_->SignalOpOnStream(Word(Address(region, offset)), static_cast<std::int32_t>(value),
                                   ACLSHMEM_SIGNAL_SET, pe, stream);
}

Status CannBackend::EnqueueWaitAtLeast(void* stream, Region region, std::uint64_t offset,
                                      std::int64_t value, std::string_view what) {
  HPS_RETURN_IF_ERROR(ThirtyTwoBit(what, value));
  return vendor_->SignalWaitUntilOnStream(Word(Address(region, offset)), ACLSHMEM_CMP_GE,
                                          static_cast<std::int32_t>(value), stream);
}

Status CannBackend::EnqueueAddCounter(void* stream, int pe, std::uint64_t offset,
                                     std::int64_t value) {
  HPS_RETURN_IF_ERROR(ThirtyTwoBit("counter increment", value));
  return vendor_->SignalOpOnStream(Word(Address(Region::kHeap, offset)),
                                   static_cast<std::int32_t>(value), ACLSHMEM_SIGNAL_ADD, pe,
                                   stream);
}

Status CannBackend::CheckSignal(SignalWidth, std::int64_t value) const {
  return ThirtyTwoBit("signal value", value);
}

Status CannBackend::CheckWait(SignalWidth, std::int64_t value) const {
  // A 64-bit word is compared through its low half (see the header).
  return ThirtyTwoBit("expected value", value);
}

Status CannBackend::EnqueueSignal(void* stream, int pe, std::uint64_t offset, SignalWidth width,
                                 SignalOp op, std::int64_t value) {
  std::int32_t* low = Word(Address(Region::kHeap, offset));
  if (width == SignalWidth::k64 && op == SignalOp::kSet) {
    // The upper half first (stream order), so a waiter that sees the low half sees it too;
    // copied from the control block's constants, device memory that outlives the stream's
    // work, so nothing waits for the stream.
    std::byte* upper = Address(Region::kControl, layout().constants + (value < 0 ? 4 : 0));
    HPS_RETURN_IF_ERROR(vendor_->PutOnStream(low + 1, upper, sizeof(std::int32_t), pe, stream));
  }
  return vendor_->SignalOpOnStream(low, static_cast<std::int32_t>(value),
                                   op == SignalOp::kAdd ? ACLSHMEM_SIGNAL_ADD : ACLSHMEM_SIGNAL_SET,
                                   pe, stream);
}

Status CannBackend::EnqueueWaitSignal(void* stream, std::uint64_t offset, SignalWidth,
                                     Comparison comparison, std::int64_t value) {
  return vendor_->SignalWaitUntilOnStream(Word(Address(Region::kHeap, offset)),
                                          VendorComparison(comparison),
                                          static_cast<std::int32_t>(value), stream);
}

}  // namespace hyper_parallel::shmem::cann
