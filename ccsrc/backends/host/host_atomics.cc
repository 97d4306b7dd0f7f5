// HostBackend: atomics, fence, quiet, the non-blocking puts and gets and the waits on several
// signal words (host_backend.h; docs/atomics.md).
//
// Every atomic on the heap is the CPU's (ApplyAtomic): on this PE's and its host's PEs' words
// through the shared mapping, on another host's through a message its target applies the same
// way (backends/transport/ucx/atomics.cc). A word that changed rings its owner's doorbell, so a wait_signal on it
// looks again. Same-host puts are stores that complete in the call; ordering them (fence) or
// completing them (quiet) takes a seq_cst fence, and what went to other hosts takes the
// transport's.
#include <atomic>
#include <cstring>
#include <string>
#include <utility>

#include "backends/host/host_backend.h"

namespace hyper_parallel::shmem::host {

Status HostBackend::CompleteNbi() const {
  return transport_ != nullptr ? transport_->CompleteNbi() : Status::Ok();
}

Status HostBackend::Atomic(StreamRef stream, const AtomicRequest& request, int pe, void* fetched,
                           KeepAlive keep_alive) {
  if (device_->IsRemote(pe)) {
    RemoteTransport* transport = transport_.get();
    return Submit(stream, "atomic", [transport, request, pe, fetched,
                                     hold = std::move(keep_alive)]<CallSite kSite>() {
      RequireCallable<HostCall::kAtomicSignal, kSite>();
      std::uint64_t old = 0;
      HPS_RETURN_IF_ERROR(transport->Atomic(pe, request, fetched != nullptr ? &old : nullptr));
      if (fetched != nullptr) std::memcpy(fetched, &old, request.width);
      return Status::Ok();
    });
  }
  std::byte* address = PeerHeapAddress(pe) + request.offset;
  Doorbell* bell = &PeerControl(pe)->doorbell;
  return Submit(stream, "atomic", [address, bell, request, fetched,
                                   hold = std::move(keep_alive)]<CallSite kSite>() {
    RequireCallable<HostCall::kAtomicSignal, kSite>();
    const std::uint64_t old =
        ApplyAtomic(address, request.width, request.op, request.value, request.compare);
    if (Writes(request.op)) RingAfterSeqCst<kSite>(bell);
    if (fetched != nullptr) std::memcpy(fetched, &old, request.width);
    return Status::Ok();
  });
}

Status HostBackend::Fence(StreamRef stream) {
  RemoteTransport* transport = transport_.get();
  return Submit(stream, "fence", [transport]<CallSite kSite>() {
    RequireCallable<HostCall::kAtomicSignal, kSite>();
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return transport != nullptr ? transport->Fence() : Status::Ok();
  });
}

Status HostBackend::Quiet(StreamRef stream) {
  RemoteTransport* transport = transport_.get();
  const FailureLatch* latch = &latch_;
  return Submit(stream, "quiet", [transport, latch]<CallSite kSite>() {
    RequireCallable<HostCall::kAtomicSignal, kSite>();
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (transport == nullptr) return Status::Ok();
    if (latch->failed()) return latch->Get();  // a lost peer's operations never complete
    return transport->Quiet();
  });
}

Status HostBackend::PutNbi(StreamRef stream, std::uint64_t offset, const void* source,
                           std::uint64_t bytes, int pe, KeepAlive keep_alive) {
  // Non-blocking only where it saves the caller a wait: to another host from the caller's own
  // thread. A host stream's executor already runs it apart from the caller; a same-host put is
  // a copy that takes as long as queueing it would.
  if (bytes == 0 || !device_->IsRemote(pe) || !RunsInline(stream)) {
    return Put(stream, offset, source, bytes, pe, std::move(keep_alive));
  }
  RequireCallable<HostCall::kCopyBytes, CallSite::kHostThread>();
  return transport_->PutNbi(pe, offset, source, bytes, std::move(keep_alive)).At("put_nbi",
                                                                                 "execute");
}

Status HostBackend::GetNbi(StreamRef stream, void* destination, std::uint64_t offset,
                           std::uint64_t bytes, int pe, KeepAlive keep_alive) {
  if (bytes == 0 || !device_->IsRemote(pe) || !RunsInline(stream)) {
    return Get(stream, destination, offset, bytes, pe, std::move(keep_alive));
  }
  RequireCallable<HostCall::kCopyBytes, CallSite::kHostThread>();
  return transport_->GetNbi(pe, destination, offset, bytes, std::move(keep_alive))
      .At("get_nbi", "execute");
}

Status HostBackend::WaitSignals(StreamRef stream, const SignalSet& signals,
                                std::uint8_t* satisfied, KeepAlive keep_alive) {
  const std::byte* base = LocalHeapBase() + signals.offset;
  const int rank = spec_.rank;
  const auto timeout = spec_.timeout;
  const HostDevice* device = device_.get();
  const auto* host_stream = static_cast<const HostStream*>(stream.native);
  return Submit(stream, "wait_signals", [=, hold = std::move(keep_alive)]<CallSite kSite>() {
    const std::uint64_t word = signals.width == SignalWidth::k32 ? 4 : 8;
    auto observe = [&](std::uint32_t i) -> std::int64_t {
      // A seq_cst read, as every signal word's (host_backend.cc, LoadSignal).
      auto* address = const_cast<std::byte*>(base + i * word);
      const std::uint64_t bits = ApplyAtomic(address, static_cast<std::uint8_t>(word),
                                             AtomicOp::kFetch, 0, 0);
      return word == 4 ? static_cast<std::int32_t>(bits) : static_cast<std::int64_t>(bits);
    };
    auto takes_part = [&](std::uint32_t i) { return signals.mask.empty() || signals.mask[i] != 0; };
    // Marks the words that satisfy now; whether the set is complete.
    auto scan = [&]() {
      std::uint32_t taking = 0, met = 0;
      for (std::uint32_t i = 0; i < signals.count; ++i) {
        const bool yes = takes_part(i) && Compare(observe(i), signals.comparison, signals.value);
        satisfied[i] = yes ? 1 : 0;
        taking += takes_part(i) ? 1 : 0;
        met += yes ? 1 : 0;
      }
      return signals.set == WaitSet::kAll ? met == taking : met > 0;
    };
    auto describe = [&] {
      std::string observed;
      for (std::uint32_t i = 0; i < signals.count && i < 16; ++i) {
        observed += (i > 0 ? "," : "") + (takes_part(i) ? std::to_string(observe(i)) : "-");
      }
      if (signals.count > 16) observed += ",...";
      return "signals=" + Hex(base) + " (" + std::to_string(signals.count) + " words), wait=" +
             std::string(WaitSetName(signals.set)) + ", comparison=" +
             std::string(ComparisonName(signals.comparison)) +
             ", expected=" + std::to_string(signals.value) + ", observed=[" + observed + "]";
    };
    auto notice = [&] { return device->Register("wait_signals", host_stream, describe); };
    const WaitOutcome outcome = device->Await<kSite>(scan, notice);
    if (outcome == WaitOutcome::kReady) return Status::Ok();
    if (outcome == WaitOutcome::kAborted) return device->latch().Get();
    return Status::Assertion(ErrorCode::kTimeout, "wait_signals timed out",
                             {{"pe", std::to_string(rank)},
                              {"wait", describe()},
                              {"timeout_ms", std::to_string(timeout.count())}});
  });
}

}  // namespace hyper_parallel::shmem::host
