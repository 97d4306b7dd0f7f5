#include "backends/cann/cann_backend.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>

#include <sys/mman.h>
#include <unistd.h>

#include "backends/cann/callability.h"

namespace hyper_parallel::shmem::cann {
namespace {

constexpr std::uint64_t kLine = DeviceControlLayout::kLine;

std::uint64_t RoundUp(std::uint64_t value, std::uint64_t to) { return (value + to - 1) / to * to; }

AclshmemCmp VendorComparison(Comparison comparison) {
  switch (comparison) {
    case Comparison::kEq: return ACLSHMEM_CMP_EQ;
    case Comparison::kNe: return ACLSHMEM_CMP_NE;
    case Comparison::kGt: return ACLSHMEM_CMP_GT;
    case Comparison::kGe: return ACLSHMEM_CMP_GE;
    case Comparison::kLt: return ACLSHMEM_CMP_LT;
    case Comparison::kLe: return ACLSHMEM_CMP_LE;
  }
  return ACLSHMEM_CMP_EQ;
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

std::string Hex(const void* pointer) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", pointer);
  return text;
}

}  // namespace

// The kernel-side API on one stream: puts and signals are enqueued on it; waits are enqueued
// too, and on the backend's own stream the kernel's work is synchronised when it returns.
class CannBackend::KernelApiOnStream final : public data_plane::KernelApi {
 public:
  KernelApiOnStream(CannBackend& backend, void* stream) : backend_(backend), stream_(stream) {}

  int rank() const override { return backend_.spec_.rank; }
  int size() const override { return backend_.spec_.size; }
  std::byte* Local(std::uint64_t offset) const override { return backend_.heap_ + offset; }
  void PutBlock(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes) override {
    if (bytes == 0) return;
    Note(backend_.vendor_->PutOnStream(backend_.heap_ + offset, source, bytes, pe, stream_));
  }
  void AddCounter(int pe, std::uint64_t offset, std::int64_t value) override {
    Status fits = ThirtyTwoBit("counter increment", value);
    if (!fits.ok()) return Note(std::move(fits));
    Note(backend_.vendor_->SignalOpOnStream(Word(backend_.heap_ + offset),
                                            static_cast<std::int32_t>(value),
                                            ACLSHMEM_SIGNAL_ADD, pe, stream_));
  }
  Status WaitCounter(std::uint64_t offset, std::int64_t target, std::string_view what) override {
    HPS_RETURN_IF_ERROR(failure_);
    HPS_RETURN_IF_ERROR(ThirtyTwoBit(what, target));
    return backend_.vendor_->SignalWaitUntilOnStream(Word(backend_.heap_ + offset),
                                                     ACLSHMEM_CMP_GE,
                                                     static_cast<std::int32_t>(target), stream_);
  }
  // A diagnostic look: a custom op may not synchronise, so this is -1 inside a kernel (where
  // the where-callable table refuses the synchronisation) and the value elsewhere.
  std::int64_t ReadCounter(std::uint64_t offset) const override {
    std::int32_t value = 0;
    if (!backend_.vendor_->GetOnStream(&value, backend_.heap_ + offset, sizeof(value), rank(), stream_)
             .ok() ||
        !backend_.vendor_->SynchronizeStream(stream_).ok()) {
      return -1;
    }
    return value;
  }
  void PublishEpoch(int pe, int slot, std::uint64_t epoch) override {
    Note(backend_.vendor_->SignalOpOnStream(EpochWord(slot, rank()),
                                            static_cast<std::int32_t>(epoch & 0x7fffffff),
                                            ACLSHMEM_SIGNAL_SET, pe, stream_));
  }
  Status WaitEpochs(int slot, std::uint64_t epoch, std::span<const int> sources,
                    std::string_view, std::string_view) override {
    HPS_RETURN_IF_ERROR(failure_);
    for (int source : sources) {
      HPS_RETURN_IF_ERROR(backend_.vendor_->SignalWaitUntilOnStream(
          EpochWord(slot, source), ACLSHMEM_CMP_GE, static_cast<std::int32_t>(epoch & 0x7fffffff),
          stream_));
    }
    return Status::Ok();
  }

  /// The first failure of a call that returns nothing (a refused or failed enqueue).
  const Status& failure() const { return failure_; }

 private:
  static std::int32_t* Word(std::byte* address) { return reinterpret_cast<std::int32_t*>(address); }
  std::int32_t* EpochWord(int slot, int source) const {
    return Word(backend_.Control(backend_.layout_.Epoch(slot, source)));
  }
  void Note(Status status) {
    if (failure_.ok() && !status.ok()) failure_ = std::move(status);
  }

  CannBackend& backend_;
  void* stream_;
  Status failure_;
};

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
  spec_ = spec;
  layout_ = DeviceControlLayout(spec.size);
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
  InitParams params;
  params.my_pe = spec_.rank;
  params.n_pes = spec_.size;
  if (handles[0].size() != params.unique_id.size()) {
    return Status::Contract(ErrorCode::kInvalidArgument, "the root's unique id",
                            std::to_string(params.unique_id.size()) + " bytes",
                            std::to_string(handles[0].size()) + " bytes");
  }
  std::memcpy(params.unique_id.data(), handles[0].data(), params.unique_id.size());
  // The vendor's heap holds the runtime's heap (aligned) and the control block.
  params.heap_bytes = spec_.heap_bytes + kHeapBaseAlignment + RoundUp(layout_.bytes, kLine) + kLine;
  params.timeout_seconds = TimeoutSecondsFrom(spec_.timeout);
  HPS_RETURN_IF_ERROR(vendor_->Init(params));
  void* heap = nullptr;
  void* control = nullptr;
  HPS_RETURN_IF_ERROR(vendor_->Align(kHeapBaseAlignment, spec_.heap_bytes, &heap));
  heap_ = static_cast<std::byte*>(heap);
  HPS_RETURN_IF_ERROR(vendor_->Align(kLine, layout_.bytes, &control));
  control_ = static_cast<std::byte*>(control);
  host_addressable_ = MappedHere(heap_);
  HPS_RETURN_IF_ERROR(vendor_->CreateStream(&own_stream_));
  // The control block starts zeroed on every PE before any peer writes to it.
  std::vector<std::byte> zeros(layout_.bytes);
  HPS_RETURN_IF_ERROR(vendor_->PutOnStream(control_, zeros.data(), zeros.size(), spec_.rank,
                                           own_stream_));
  HPS_RETURN_IF_ERROR(vendor_->BarrierAllOnStream(own_stream_));
  return vendor_->SynchronizeStream(own_stream_);
}

Status CannBackend::DestroyHeap() {
  if (vendor_ == nullptr) return Status::Ok();
  Status first;
  auto keep = [&first](Status status) {
    if (first.ok() && !status.ok()) first = std::move(status);
  };
  if (vendor_->state() == VendorState::kInitialized) {
    keep(Quiesce());
    if (control_ != nullptr) keep(vendor_->Free(control_));
    if (heap_ != nullptr) keep(vendor_->Free(heap_));
    if (own_stream_ != nullptr) keep(vendor_->DestroyStream(own_stream_));
    keep(vendor_->Finalize());
    if (!first.ok()) Latch(first);
  }
  control_ = heap_ = nullptr;
  host_addressable_ = false;
  own_stream_ = nullptr;
  caller_streams_.Take();
  // A finalised adapter is unusable; a failed one keeps the vendor's buffers alive on purpose.
  if (vendor_->state() != VendorState::kInitialized) vendor_.reset();
  return first;
}

void* CannBackend::Native(StreamRef stream) const {
  return stream.native == nullptr ? own_stream_ : stream.native;
}

Status CannBackend::Complete(StreamRef stream, KeepAlive keep_alive) {
  if (stream.native == nullptr) return vendor_->SynchronizeStream(own_stream_);
  caller_streams_.Note(stream.native, std::move(keep_alive));
  return Status::Ok();
}

Status CannBackend::Drain(StreamRef stream) {
  if (stream.native == nullptr) return Status::Ok();
  return vendor_->SynchronizeStream(stream.native);
}

Status CannBackend::Latch(Status failure) {
  terminal_.Set(failure);
  return failure;
}

Status CannBackend::Health() const { return terminal_.Get(); }

WaitInfo CannBackend::Wait() const {
  WaitInfo info;
  info.mode = spec_.wait_mode;
  info.sleeps = true;
  info.pinning = "none (waits run on the NPU stream)";
  return info;
}

std::string CannBackend::StreamLabel(StreamRef stream) const {
  if (stream.native == nullptr) return "default (the backend's NPU stream)";
  return "npu stream " + Hex(stream.native);
}

Status CannBackend::Quiesce() {
  const CallerStreams::Taken taken = caller_streams_.Take();
  Status first;
  for (void* stream : taken.streams) {
    Status synced = vendor_->SynchronizeStream(stream);
    if (first.ok() && !synced.ok()) first = std::move(synced);
  }
  if (own_stream_ != nullptr) {
    std::lock_guard<std::recursive_mutex> lock(own_stream_mutex_);
    Status synced = vendor_->SynchronizeStream(own_stream_);
    if (first.ok() && !synced.ok()) first = std::move(synced);
  }
  return first;  // `taken` releases the operands of the work that ran
}

Status CannBackend::Put(StreamRef stream, std::uint64_t offset, const void* source,
                        std::uint64_t bytes, int pe, KeepAlive keep_alive) {
  if (bytes == 0) return Status::Ok();
  std::unique_lock<std::recursive_mutex> lock(own_stream_mutex_, std::defer_lock);
  if (stream.native == nullptr) lock.lock();
  HPS_RETURN_IF_ERROR(vendor_->PutOnStream(heap_ + offset, source, bytes, pe, Native(stream)));
  return Complete(stream, std::move(keep_alive));
}

Status CannBackend::Get(StreamRef stream, void* destination, std::uint64_t offset,
                        std::uint64_t bytes, int pe, KeepAlive keep_alive) {
  if (bytes == 0) return Status::Ok();
  std::unique_lock<std::recursive_mutex> lock(own_stream_mutex_, std::defer_lock);
  if (stream.native == nullptr) lock.lock();
  HPS_RETURN_IF_ERROR(
      vendor_->GetOnStream(destination, heap_ + offset, bytes, pe, Native(stream)));
  return Complete(stream, std::move(keep_alive));
}

Status CannBackend::EnqueueSignal(void* native, std::uint64_t offset, SignalWidth width,
                                  SignalOp op, std::int64_t value, int pe) {
  auto* low = reinterpret_cast<std::int32_t*>(heap_ + offset);
  if (width == SignalWidth::k64 && op == SignalOp::kSet) {
    // The upper half first (stream order), so a waiter that sees the low half sees it too.
    const std::int32_t upper = value < 0 ? -1 : 0;
    HPS_RETURN_IF_ERROR(vendor_->PutOnStream(low + 1, &upper, sizeof(upper), pe, native));
    HPS_RETURN_IF_ERROR(vendor_->SynchronizeStream(native));  // `upper` is a local
  }
  return vendor_->SignalOpOnStream(low, static_cast<std::int32_t>(value),
                                   op == SignalOp::kAdd ? ACLSHMEM_SIGNAL_ADD : ACLSHMEM_SIGNAL_SET,
                                   pe, native);
}

Status CannBackend::Signal(StreamRef stream, std::uint64_t offset, SignalWidth width,
                           SignalOp op, std::int64_t value, int pe) {
  HPS_RETURN_IF_ERROR(ThirtyTwoBit("signal value", value));
  std::unique_lock<std::recursive_mutex> lock(own_stream_mutex_, std::defer_lock);
  if (stream.native == nullptr) lock.lock();
  HPS_RETURN_IF_ERROR(EnqueueSignal(Native(stream), offset, width, op, value, pe));
  return Complete(stream, nullptr);
}

Status CannBackend::PutSignal(StreamRef stream, std::uint64_t offset, const void* source,
                              std::uint64_t bytes, std::uint64_t signal_offset,
                              SignalWidth width, SignalOp op, std::int64_t value, int pe,
                              KeepAlive keep_alive) {
  HPS_RETURN_IF_ERROR(ThirtyTwoBit("signal value", value));
  std::unique_lock<std::recursive_mutex> lock(own_stream_mutex_, std::defer_lock);
  if (stream.native == nullptr) lock.lock();
  void* native = Native(stream);
  // Stream order puts the data before the signal.
  if (bytes > 0) HPS_RETURN_IF_ERROR(vendor_->PutOnStream(heap_ + offset, source, bytes, pe, native));
  HPS_RETURN_IF_ERROR(EnqueueSignal(native, signal_offset, width, op, value, pe));
  return Complete(stream, std::move(keep_alive));
}

Status CannBackend::WaitSignal(StreamRef stream, std::uint64_t offset, SignalWidth width,
                               Comparison comparison, std::int64_t value) {
  (void)width;  // a 64-bit word is compared through its low half (see the header)
  HPS_RETURN_IF_ERROR(ThirtyTwoBit("expected value", value));
  // The backend's stream is shared: a wait there must not hold it (a second thread may be
  // about to send what it waits for), so a default-stream wait gets a stream of its own.
  if (stream.native == nullptr) {
    void* waiting = nullptr;
    HPS_RETURN_IF_ERROR(vendor_->CreateStream(&waiting));
    Status waited = vendor_->SignalWaitUntilOnStream(reinterpret_cast<std::int32_t*>(heap_ + offset),
                                                     VendorComparison(comparison),
                                                     static_cast<std::int32_t>(value), waiting);
    if (waited.ok()) waited = vendor_->SynchronizeStream(waiting);
    Status destroyed = vendor_->DestroyStream(waiting);
    return waited.ok() ? destroyed : waited;
  }
  HPS_RETURN_IF_ERROR(vendor_->SignalWaitUntilOnStream(
      reinterpret_cast<std::int32_t*>(heap_ + offset), VendorComparison(comparison),
      static_cast<std::int32_t>(value), stream.native));
  return Complete(stream, nullptr);
}

Status CannBackend::ExchangeDescriptors(const CollectiveDescriptor& mine, std::string_view,
                                        std::vector<CollectiveDescriptor>* all) {
  std::lock_guard<std::recursive_mutex> lock(own_stream_mutex_);
  DeviceControlOps ops;
  ops.put = [this](int pe, std::uint64_t offset, const void* row, std::uint64_t bytes) {
    return vendor_->PutOnStream(Control(offset), row, bytes, pe, own_stream_);
  };
  ops.set_flag = [this](int pe, std::uint64_t offset, std::int64_t value) {
    return vendor_->SignalOpOnStream(reinterpret_cast<std::int32_t*>(Control(offset)),
                                     static_cast<std::int32_t>(value), ACLSHMEM_SIGNAL_SET, pe,
                                     own_stream_);
  };
  ops.wait_flag = [this](std::uint64_t offset, std::int64_t value, int) {
    return vendor_->SignalWaitUntilOnStream(reinterpret_cast<std::int32_t*>(Control(offset)),
                                            ACLSHMEM_CMP_GE, static_cast<std::int32_t>(value),
                                            own_stream_);
  };
  ops.read = [this](std::uint64_t offset, void* out, std::uint64_t bytes) {
    return vendor_->GetOnStream(out, Control(offset), bytes, spec_.rank, own_stream_);
  };
  ops.synchronize = [this] { return vendor_->SynchronizeStream(own_stream_); };
  return ExchangeThroughDeviceControl(mine, spec_.rank, spec_.size, layout_, ops, all);
}

Status CannBackend::ExchangeAndMatch(const CollectiveDescriptor& mine,
                                     std::string_view operation) {
  std::vector<CollectiveDescriptor> all;
  Status exchanged = ExchangeDescriptors(mine, operation, &all);
  // The PEs' collective sequences are out of step after a failed exchange: terminal.
  if (!exchanged.ok()) return Latch(std::move(exchanged));
  return MatchDescriptors(mine, all);
}

Status CannBackend::Barrier(StreamRef stream, const CollectiveDescriptor& descriptor,
                            KeepAlive) {
  HPS_RETURN_IF_ERROR(Drain(stream));
  // The exchange publishes after every earlier write of this PE and reads every peer's.
  return ExchangeAndMatch(descriptor, "barrier");
}

Status CannBackend::RunKernel(const Kernel& kernel, KernelApiOnStream& api) {
  // The kernel's body is a custom op's: it may enqueue, not synchronise (callability.h).
  CallContextScope context(CallContext::kCustomOp);
  Status status = kernel(api);
  return status.ok() ? api.failure() : status;
}

Status CannBackend::Launch(StreamRef stream, std::string_view name, Kernel kernel,
                           KeepAlive keep_alive) {
  std::unique_lock<std::recursive_mutex> lock(own_stream_mutex_, std::defer_lock);
  if (stream.native == nullptr) lock.lock();
  KernelApiOnStream api(*this, Native(stream));
  Status status = RunKernel(kernel, api);
  if (status.ok()) status = Complete(stream, std::move(keep_alive));
  return std::move(status).At(name, "execute");
}

Status CannBackend::LaunchCollective(StreamRef stream, const CollectiveDescriptor& descriptor,
                                     std::string_view name, Kernel kernel, KeepAlive keep_alive) {
  Status status = Drain(stream);
  if (status.ok()) status = ExchangeAndMatch(descriptor, name);
  if (status.ok()) {
    std::lock_guard<std::recursive_mutex> lock(own_stream_mutex_);
    KernelApiOnStream api(*this, own_stream_);
    status = RunKernel(kernel, api);
    if (status.ok()) status = vendor_->SynchronizeStream(own_stream_);
  }
  (void)keep_alive;  // the kernel ran to completion on the backend's stream
  return std::move(status).At(name, "execute");
}

}  // namespace hyper_parallel::shmem::cann
