// Runtime: the one-sided operations (runtime.h; docs/architecture.md, "The protection chain",
// "put_signal"): put, get, signal, put_signal and wait_signal, and the operand checks every
// entry shares (PE in range, a live symmetric operand inside the heap).
#include <limits>

#include "data_plane/pe_address.h"
#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"

namespace hyper_parallel::shmem {
namespace {

// Work that cannot wait and is this small (or only enqueued) runs under the entry mutex: a few
// microseconds of copying cost less than counting a call in flight. Larger inline copies run
// outside it, so another thread is never held up behind a big put.
constexpr std::uint64_t kUnderMutexBytes = 64ull << 10;

}  // namespace

Status Runtime::CheckPe(int pe) const {
  if (pe < 0 || pe >= size_) {
    return Status::Contract(ErrorCode::kInvalidArgument, "pe",
                            "in [0, " + std::to_string(size_) + ")", std::to_string(pe));
  }
  return Status::Ok();
}

Status Runtime::ResolveOperand(const SymmetricView& view, std::uint64_t* offset,
                               AllocationRecord* record, ErrorCode freed_code) const {
  if (!data_plane::InsideHeap(view.data, view.bytes, heap_base_, config_.heap_bytes)) {
    // A stale or freed tensor is reported as such wherever its pointer lies.
    HPS_RETURN_IF_ERROR(registry_.CheckId(view.id, freed_code));
    return Status::Contract(
        ErrorCode::kInvalidArgument, "symmetric operand",
        "inside the symmetric heap [" + Hex(heap_base_) + ", " +
            Hex(static_cast<const void*>(heap_base_ + config_.heap_bytes)) + ")",
        "[" + Hex(view.data) + ", +" + std::to_string(view.bytes) + ")");
  }
  *offset = data_plane::HeapOffset(view.data, heap_base_);
  return freed_code == ErrorCode::kDoubleFree
             ? registry_.ResolveWhole(view.id, *offset, view.bytes, record)
             : registry_.Resolve(view.id, *offset, view.bytes, record);
}

Status Runtime::CheckTransfer(const SymmetricView& symmetric, int pe,
                              const void* local, std::string_view local_name,
                              std::uint64_t* offset) const {
  HPS_RETURN_IF_ERROR(CheckPe(pe));
  AllocationRecord record;
  HPS_RETURN_IF_ERROR(ResolveOperand(symmetric, offset, &record));
  if (local == nullptr && symmetric.bytes > 0) {
    return Status::Contract(ErrorCode::kInvalidArgument, local_name, "non-null", "null");
  }
  return Status::Ok();
}

Status Runtime::Put(const SymmetricView& destination, const void* source, int pe,
                    StreamRef stream, KeepAlive keep_alive) {
  constexpr std::string_view kOp = "put";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::uint64_t offset = 0;
  HPS_REJECT_IF_ERROR(CheckTransfer(destination, pe, source, "put source", &offset), kOp,
                      "validate");
  if (destination.bytes == 0) return Status::Ok();
  return Execute(kOp, destination.bytes <= kUnderMutexBytes, stream, [&](Backend& backend) {
    return backend.Put(stream, offset, source, destination.bytes, pe, std::move(keep_alive));
  });
}

Status Runtime::Get(void* destination, const SymmetricView& source, int pe, StreamRef stream,
                    KeepAlive keep_alive) {
  constexpr std::string_view kOp = "get";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::uint64_t offset = 0;
  HPS_REJECT_IF_ERROR(CheckTransfer(source, pe, destination, "get destination", &offset), kOp,
                      "validate");
  if (source.bytes == 0) return Status::Ok();
  return Execute(kOp, source.bytes <= kUnderMutexBytes, stream, [&](Backend& backend) {
    return backend.Get(stream, destination, offset, source.bytes, pe, std::move(keep_alive));
  });
}

namespace {

Status CheckSignalOperand(const SymmetricView& view, std::uint64_t offset, SignalWidth width,
                          std::int64_t value) {
  const std::uint64_t word = width == SignalWidth::k32 ? 4 : 8;
  if (view.bytes != word) {
    return Status::Contract(ErrorCode::kInvalidArgument, "signal operand",
                            "exactly one " + std::to_string(word) + "-byte word",
                            std::to_string(view.bytes) + " bytes");
  }
  if (offset % word != 0) {
    return Status::Contract(ErrorCode::kInvalidArgument, "signal address",
                            "aligned to " + std::to_string(word) + " bytes", Hex(view.data));
  }
  if (width == SignalWidth::k32 && (value < std::numeric_limits<std::int32_t>::min() ||
                                    value > std::numeric_limits<std::int32_t>::max())) {
    return Status::Contract(ErrorCode::kInvalidArgument, "signal value",
                            "representable as int32", std::to_string(value));
  }
  return Status::Ok();
}

}  // namespace

Status Runtime::Signal(const SymmetricView& signal, SignalWidth width, std::int64_t value, int pe,
                       SignalOp op, StreamRef stream) {
  constexpr std::string_view kOp = "signal";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  HPS_REJECT_IF_ERROR(CheckPe(pe), kOp, "validate");
  std::uint64_t offset = 0;
  AllocationRecord record;
  HPS_REJECT_IF_ERROR(ResolveOperand(signal, &offset, &record), kOp, "validate");
  HPS_REJECT_IF_ERROR(CheckSignalOperand(signal, offset, width, value), kOp, "validate");
  // One atomic and a wake, or an enqueue (a device backend's inline signal synchronises its
  // stream: outside the mutex).
  return Execute(kOp, /*small=*/true, stream, [&](Backend& backend) {
    return backend.Signal(stream, offset, width, op, value, pe);
  });
}

Status Runtime::PutSignal(const SymmetricView& destination, const void* source,
                          const SymmetricView& signal, SignalWidth width, std::int64_t value,
                          int pe, SignalOp op, StreamRef stream, KeepAlive keep_alive) {
  constexpr std::string_view kOp = "put_signal";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::uint64_t offset = 0, signal_offset = 0;
  HPS_REJECT_IF_ERROR(CheckTransfer(destination, pe, source, "put source", &offset), kOp,
                      "validate");
  AllocationRecord record;
  HPS_REJECT_IF_ERROR(ResolveOperand(signal, &signal_offset, &record), kOp, "validate");
  HPS_REJECT_IF_ERROR(CheckSignalOperand(signal, signal_offset, width, value), kOp, "validate");
  return Execute(kOp, destination.bytes <= kUnderMutexBytes, stream, [&](Backend& backend) {
    return backend.PutSignal(stream, offset, source, destination.bytes, signal_offset, width, op,
                             value, pe, std::move(keep_alive));
  });
}

Status Runtime::WaitSignal(const SymmetricView& signal, SignalWidth width, std::int64_t value,
                           Comparison comparison, StreamRef stream) {
  constexpr std::string_view kOp = "wait_signal";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::uint64_t offset = 0;
  AllocationRecord record;
  HPS_REJECT_IF_ERROR(ResolveOperand(signal, &offset, &record), kOp, "validate");
  HPS_REJECT_IF_ERROR(CheckSignalOperand(signal, offset, width, value), kOp, "validate");
  Backend* backend = backend_.get();
  Status done;
  {
    CallScope call(this);  // it waits: outside the mutex
    lock.Unlock();
    done = backend->WaitSignal(stream, offset, width, comparison, value);
  }
  return ConcludeOutside(std::move(done), kOp, "execute");
}

}  // namespace hyper_parallel::shmem
