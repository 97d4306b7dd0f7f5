// Runtime: the one-sided operations (runtime.h; docs/architecture.md, "The protection chain",
// "put_signal"; docs/atomics.md): put, get and their non-blocking forms, signal, put_signal,
// wait_signal and the waits on several words, atomics, fence and quiet, and the operand checks
// every entry shares (PE in range, a live symmetric operand inside the heap).
#include <algorithm>
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

Status Runtime::Transfer(std::string_view operation, bool put, bool nbi,
                         const SymmetricView& symmetric, void* local, int pe, StreamRef stream,
                         KeepAlive keep_alive) {
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(operation), operation, "state");
  std::uint64_t offset = 0;
  HPS_REJECT_IF_ERROR(
      CheckTransfer(symmetric, pe, local, put ? "put source" : "get destination", &offset),
      operation, "validate");
  if (symmetric.bytes == 0) return Status::Ok();
  const std::uint64_t bytes = symmetric.bytes;
  return Execute(operation, bytes <= kUnderMutexBytes, stream, [&](Backend& backend) {
    if (put) {
      return nbi ? backend.PutNbi(stream, offset, local, bytes, pe, std::move(keep_alive))
                 : backend.Put(stream, offset, local, bytes, pe, std::move(keep_alive));
    }
    return nbi ? backend.GetNbi(stream, local, offset, bytes, pe, std::move(keep_alive))
               : backend.Get(stream, local, offset, bytes, pe, std::move(keep_alive));
  });
}

Status Runtime::Put(const SymmetricView& destination, const void* source, int pe,
                    StreamRef stream, KeepAlive keep_alive) {
  return Transfer("put", true, false, destination, const_cast<void*>(source), pe, stream,
                  std::move(keep_alive));
}

Status Runtime::Get(void* destination, const SymmetricView& source, int pe, StreamRef stream,
                    KeepAlive keep_alive) {
  return Transfer("get", false, false, source, destination, pe, stream, std::move(keep_alive));
}

Status Runtime::PutNbi(const SymmetricView& destination, const void* source, int pe,
                       StreamRef stream, KeepAlive keep_alive) {
  return Transfer("put_nbi", true, true, destination, const_cast<void*>(source), pe, stream,
                  std::move(keep_alive));
}

Status Runtime::GetNbi(void* destination, const SymmetricView& source, int pe, StreamRef stream,
                       KeepAlive keep_alive) {
  return Transfer("get_nbi", false, true, source, destination, pe, stream, std::move(keep_alive));
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

namespace {

// A word operand: exactly one aligned `width`-byte word.
Status CheckWord(const SymmetricView& view, std::uint64_t offset, std::uint64_t width,
                 std::string_view name) {
  if (view.bytes != width) {
    return Status::Contract(ErrorCode::kInvalidArgument, name,
                            "exactly one element of " + std::to_string(width) + " bytes",
                            std::to_string(view.bytes) + " bytes");
  }
  if (offset % width != 0) {
    return Status::Contract(ErrorCode::kInvalidArgument, std::string(name) + " address",
                            "aligned to " + std::to_string(width) + " bytes", Hex(view.data));
  }
  return Status::Ok();
}

}  // namespace

Status Runtime::Atomic(const SymmetricView& target, std::uint8_t width, AtomicOp op,
                       std::uint64_t value, std::uint64_t compare, int pe, void* fetched,
                       StreamRef stream, KeepAlive keep_alive) {
  constexpr std::string_view kOp = "atomic";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  HPS_REJECT_IF_ERROR(CheckPe(pe), kOp, "validate");
  if (width != 4 && width != 8) {
    HPS_REJECT_IF_ERROR(Status::Contract(ErrorCode::kInvalidArgument, "atomic width",
                                         "4 or 8 bytes", std::to_string(width)),
                        kOp, "validate");
  }
  std::uint64_t offset = 0;
  AllocationRecord record;
  HPS_REJECT_IF_ERROR(ResolveOperand(target, &offset, &record), kOp, "validate");
  HPS_REJECT_IF_ERROR(CheckWord(target, offset, width, "atomic dest"), kOp, "validate");
  const AtomicRequest request{offset, width, op, value, compare};
  // A fetching atomic on another host waits for its answer: outside the mutex.
  return Execute(kOp, fetched == nullptr, stream, [&](Backend& backend) {
    return backend.Atomic(stream, request, pe, fetched, std::move(keep_alive));
  });
}

Status Runtime::Fence(StreamRef stream) {
  constexpr std::string_view kOp = "fence";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  return Execute(kOp, /*small=*/true, stream,
                 [&](Backend& backend) { return backend.Fence(stream); });
}

Status Runtime::Quiet(StreamRef stream) {
  constexpr std::string_view kOp = "quiet";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  return Execute(kOp, /*small=*/false, stream,
                 [&](Backend& backend) { return backend.Quiet(stream); });
}

Status Runtime::WaitSignals(const SymmetricView& signals, SignalWidth width, std::int64_t value,
                            Comparison comparison, std::vector<std::uint8_t> mask, WaitSet set,
                            std::uint8_t* satisfied, StreamRef stream, KeepAlive keep_alive) {
  constexpr std::string_view kOp = "wait_signals";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  const std::uint64_t word = width == SignalWidth::k32 ? 4 : 8;
  std::uint64_t offset = 0;
  AllocationRecord record;
  HPS_REJECT_IF_ERROR(ResolveOperand(signals, &offset, &record), kOp, "validate");
  const std::uint64_t count = signals.bytes / word;
  if (signals.bytes % word != 0 || offset % word != 0 || count == 0 || count > (1u << 30)) {
    HPS_REJECT_IF_ERROR(Status::Contract(ErrorCode::kInvalidArgument, "signals",
                                         "one or more aligned " + std::to_string(word) +
                                             "-byte words",
                                         std::to_string(signals.bytes) + " bytes at " +
                                             Hex(signals.data)),
                        kOp, "validate");
  }
  if (!mask.empty() && mask.size() != count) {
    HPS_REJECT_IF_ERROR(Status::Contract(ErrorCode::kInvalidArgument, "mask length",
                                         std::to_string(count) + " (one per signal word)",
                                         std::to_string(mask.size())),
                        kOp, "validate");
  }
  if (!mask.empty() && std::find(mask.begin(), mask.end(), 1) == mask.end() &&
      set != WaitSet::kAll) {
    HPS_REJECT_IF_ERROR(Status::Contract(ErrorCode::kInvalidArgument, "mask",
                                         "at least one word taking part",
                                         "none (every entry False)"),
                        kOp, "validate");
  }
  if (satisfied == nullptr) {
    HPS_REJECT_IF_ERROR(
        Status::Contract(ErrorCode::kInvalidArgument, "satisfied", "non-null", "null"), kOp,
        "validate");
  }
  SignalSet wait{offset, static_cast<std::uint32_t>(count), width, comparison, value,
                 std::move(mask), set};
  Backend* backend = backend_.get();
  Status done;
  {
    CallScope call(this);  // it waits: outside the mutex
    lock.Unlock();
    done = backend->WaitSignals(stream, wait, satisfied, std::move(keep_alive));
  }
  return ConcludeOutside(std::move(done), kOp, "execute");
}

Status Runtime::TestSignal(const SymmetricView& signal, SignalWidth width, std::int64_t value,
                           Comparison comparison, bool* satisfied) {
  constexpr std::string_view kOp = "test_signal";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::uint64_t offset = 0;
  AllocationRecord record;
  HPS_REJECT_IF_ERROR(ResolveOperand(signal, &offset, &record), kOp, "validate");
  HPS_REJECT_IF_ERROR(CheckSignalOperand(signal, offset, width, value), kOp, "validate");
  if (!backend_->HostAddressableHeap()) {
    HPS_REJECT_IF_ERROR(Status::Assertion(ErrorCode::kUnsupportedCapability,
                                          "test_signal reads the word from the host; this "
                                          "backend's heap is device memory",
                                          {{"backend", std::string(backend_->name())}}),
                        kOp, "validate");
  }
  std::byte* address = backend_->LocalHeapBase() + offset;
  const std::int64_t observed =
      width == SignalWidth::k32
          ? static_cast<std::int32_t>(ApplyAtomic(address, 4, AtomicOp::kFetch, 0, 0))
          : static_cast<std::int64_t>(ApplyAtomic(address, 8, AtomicOp::kFetch, 0, 0));
  *satisfied = Compare(observed, comparison, value);
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem
