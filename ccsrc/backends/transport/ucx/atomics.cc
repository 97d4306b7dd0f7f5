// UcxTransport: atomics and fence (ucx_transport.h; the non-blocking operations: nbi.cc;
// docs/atomics.md). Every atomic on a remote word is one kAtomic message that the target's
// progress applies with the CPU's atomics (ApplyAtomic), the one mechanism for every atomic on
// the heap: RDMA atomics of a NIC would not be atomic with the CPU's of the target's own host.
#include "backends/transport/ucx/library.h"

#include <cstring>

namespace hyper_parallel::shmem::transport {

#if HPS_HAVE_UCX_HEADERS

void UcxTransport::MarkFenced(int pe, WireHeader* header) {
  if (fenced_[pe].load(std::memory_order_relaxed) &&
      fenced_[pe].exchange(false, std::memory_order_acq_rel)) {
    header->flags |= kWireOrdered;
  }
}

Status UcxTransport::Fence() {
  bool rma = false;
  for (Peer& peer : peers_) {
    if (!peer.reachable) continue;
    if (peer.ep.load(std::memory_order_acquire) != nullptr && peer.path->OrderedByWorker()) {
      rma = true;
    }
    fenced_[peer.pe].store(true, std::memory_order_release);
  }
  if (!rma) return Status::Ok();
  const ucs_status_t fenced = lib_->worker_fence(static_cast<ucp_worker_h>(worker_));
  return fenced == UCS_OK ? Status::Ok() : Failure(-1, fenced, "ucp_worker_fence");
}

Status UcxTransport::Atomic(int pe, const AtomicRequest& request, std::uint64_t* old) {
  Peer& peer = peers_[pe];
  counters_.atomics.fetch_add(1, std::memory_order_relaxed);
  HPS_RETURN_IF_ERROR(Connected(pe));
  if (!peer.accepts_messages) {
    return Status::Assertion(ErrorCode::kUnsupportedCapability,
                             "atomics on a remote PE need UCX active messages, which that PE's "
                             "UCX cannot take (docs/atomics.md)",
                             {{"pe", std::to_string(pe)}});
  }
  HPS_RETURN_IF_ERROR(peer.path->BeforeAtomic(*this, peer));
  WireHeader header;
  header.kind = WireKind::kAtomic;
  header.source = rank_;
  header.atomic = static_cast<std::uint32_t>(request.op);
  header.width = request.width;
  header.offset = request.offset;
  header.value = static_cast<std::int64_t>(request.value);
  header.compare = request.compare;
  if (old == nullptr) {
    HPS_RETURN_IF_ERROR(Send(pe, header, nullptr, 0));
    unconfirmed_[pe].store(true, std::memory_order_release);  // a flush waits for it
    return Status::Ok();
  }
  // The answer comes as a get's would: the same pending entry, filled from the header.
  auto pending = std::make_shared<PendingGet>();
  pending->destination = old;
  pending->bytes = sizeof *old;
  std::uint64_t token = 0;
  HPS_RETURN_IF_ERROR(Request(pe, header, pending, &token));
  return AwaitGet(pe, pending, token);
}

void UcxTransport::OnAtomicReply(const WireHeader& header) {
  std::shared_ptr<PendingGet> pending;
  {
    MutexLock lock(&gets_mutex_);
    for (const auto& [token, get] : gets_) {
      if (token == header.token) pending = get;
    }
  }
  if (pending == nullptr) return;  // abandoned (timed out)
  const auto old = static_cast<std::uint64_t>(header.value);
  std::memcpy(pending->destination, &old, std::min<std::uint64_t>(sizeof old, pending->bytes));
  pending->status.store(UCS_OK, std::memory_order_relaxed);
  pending->done.store(true, std::memory_order_release);
  if (own_bell_ != nullptr) Ring<CallSite::kHostThread>(own_bell_);
}

#endif

}  // namespace hyper_parallel::shmem::transport
