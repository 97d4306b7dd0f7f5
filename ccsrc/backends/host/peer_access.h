// PeerAccess: the one answer, on the host backend, to "how do I reach PE p" (docs/scale-out.md,
// "Routes"). Each PE has a route, fixed when the peers are opened: this PE itself, a mapping
// of its segment (a PE of this host), or the remote transport (remote_transport.h). The
// operations below follow it: a copy or a CPU atomic on the mapping, or the transport's call.
// The host backend's put, get and signal, its kernels' device surface (host_device.h) and,
// through the Runtime's peer addresses (null for a remote PE), the OpenSHMEM direct path all
// ask here.
//
// Signal words are written and read seq_cst: that orders the data before the signal (a
// seq_cst write is also a release) and, with the doorbell's sleeper count, lets the writer skip
// a separate fence (RingAfterSeqCst).
//
// Thread-safety: routes, mappings and the transport are set before any operation runs and
// then only read; the operations are safe from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/host/control_block.h"
#include "backends/transport/remote_transport.h"
#include "backends/wait/call_sites.h"
#include "backends/wait/doorbell.h"
#include "base/status.h"

namespace hyper_parallel::shmem::host {

using transport::Audience;
using transport::Outbound;
using transport::RemoteSignal;
using transport::RemoteTransport;
using transport::SignalAction;

/// A copy that may overlap (a PE copying within its own heap).
inline void CopyMaybeOverlapping(void* destination, const void* source, std::uint64_t bytes) {
  const auto* s = static_cast<const std::byte*>(source);
  auto* d = static_cast<std::byte*>(destination);
  if (d < s + bytes && s < d + bytes) {
    std::memmove(d, s, bytes);
  } else {
    std::memcpy(d, s, bytes);
  }
}

/// `action` `value` on the `width`-byte word at `address`, seq_cst (a set is an exchange: one
/// locked instruction).
template <CallSite kSite>
void ApplyRemoteSignal(std::byte* address, const RemoteSignal& signal) {
  RequireCallable<HostCall::kAtomicSignal, kSite>();
  auto apply = [&]<class Word>(Word value) {
    std::atomic_ref<Word> word(*reinterpret_cast<Word*>(address));
    if (signal.action == SignalAction::kSet) {
      word.exchange(value, std::memory_order_seq_cst);
    } else {
      word.fetch_add(value, std::memory_order_seq_cst);
    }
  };
  if (signal.width == 4) {
    apply(static_cast<std::int32_t>(signal.value));
  } else {
    apply(static_cast<std::int64_t>(signal.value));
  }
}

/// The signal a SignalWidth and SignalOp of the Backend interface mean.
inline RemoteSignal ToRemoteSignal(std::uint64_t offset, SignalWidth width, SignalOp op,
                                   std::int64_t value) {
  return RemoteSignal{offset, static_cast<std::uint8_t>(width == SignalWidth::k32 ? 4 : 8),
                      op == SignalOp::kSet ? SignalAction::kSet : SignalAction::kAdd, value};
}

class PeerAccess {
 public:
  PeerAccess(std::vector<std::byte*> heaps, std::vector<ControlBlock*> controls)
      : heaps_(std::move(heaps)),
        controls_(std::move(controls)),
        routes_(heaps_.size(), PeerRoute::kMapped) {}

  /// Reaches the PEs whose route is kRemote through `transport`. Called once, before any
  /// operation runs.
  void AttachRemote(RemoteTransport* transport, std::vector<PeerRoute> routes) {
    transport_ = transport;
    routes_ = std::move(routes);
  }

  PeerRoute route(int pe) const { return routes_[static_cast<std::size_t>(pe)]; }
  bool IsRemote(int pe) const { return route(pe) == PeerRoute::kRemote; }
  /// Whether any PE is remote.
  bool HasRemote() const { return transport_ != nullptr; }
  /// The transport (null: every PE is mapped).
  RemoteTransport* transport() const { return transport_; }
  /// PE `pe`'s heap offset 0 in this process (null for a remote PE).
  std::byte* heap(int pe) const { return heaps_[static_cast<std::size_t>(pe)]; }
  /// PE `pe`'s control block in this process (null for a remote PE).
  ControlBlock* control(int pe) const { return controls_[static_cast<std::size_t>(pe)]; }

  /// `bytes` from local `source` to heap offset `offset` of `pe`; `source` may be reused when
  /// this returns.
  template <CallSite kSite>
  Status Put(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
             Audience audience = Audience::kAnyone) const {
    RequireCallable<HostCall::kCopyBytes, kSite>();
    if (IsRemote(pe)) return transport_->Put(pe, offset, source, bytes, audience);
    CopyMaybeOverlapping(heap(pe) + offset, source, bytes);
    return Status::Ok();
  }

  /// `bytes` from heap offset `offset` of `pe` to `destination`.
  template <CallSite kSite>
  Status Get(int pe, void* destination, std::uint64_t offset, std::uint64_t bytes) const {
    RequireCallable<HostCall::kCopyBytes, kSite>();
    if (IsRemote(pe)) return transport_->Get(pe, destination, offset, bytes);
    CopyMaybeOverlapping(destination, heap(pe) + offset, bytes);
    return Status::Ok();
  }

  /// Put (when bytes > 0), then `signal` at `pe`, after the data and every earlier write of
  /// this thread there; then `pe`'s doorbell.
  template <CallSite kSite>
  Status PutSignal(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
                   const RemoteSignal& signal, Audience audience = Audience::kAnyone) const {
    RequireCallable<HostCall::kCopyBytes, kSite>();
    RequireCallable<HostCall::kAtomicSignal, kSite>();
    if (IsRemote(pe)) {
      return transport_->PutSignal(pe, offset, source, bytes, signal, audience);
    }
    if (bytes > 0) CopyMaybeOverlapping(heap(pe) + offset, source, bytes);
    ApplyRemoteSignal<kSite>(heap(pe) + signal.offset, signal);
    RingAfterSeqCst<kSite>(&control(pe)->doorbell);
    return Status::Ok();
  }

 private:
  std::vector<std::byte*> heaps_;
  std::vector<ControlBlock*> controls_;
  std::vector<PeerRoute> routes_;
  RemoteTransport* transport_ = nullptr;
};

}  // namespace hyper_parallel::shmem::host
