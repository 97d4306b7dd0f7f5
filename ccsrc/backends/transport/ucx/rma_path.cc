// The rma path (paths.h): UCX's RMA and atomics into the peer's registered segment.
#include <cstring>
#include <memory>
#include <utility>

#include "backends/transport/ucx/paths.h"

namespace hyper_parallel::shmem::transport {

#if HPS_HAVE_UCX_HEADERS

Status UcxTransport::RmaPath::Transmit(UcxTransport& t, Peer& peer, std::uint64_t offset,
                                       const void* source, std::uint64_t bytes,
                                       const RemoteSignal& signal, Audience /*audience*/,
                                       bool heartbeat) const {
  const bool signalled = signal.action != SignalAction::kNone;
  Library& l = *t.lib_;
  if (heartbeat) t.counters_.heartbeats.fetch_add(1, std::memory_order_relaxed);  // Send counts its own
  if (bytes > 0) {
    HPS_RETURN_IF_ERROR(t.CheckPeer(peer.pe, "ucp_put_nbx"));
    ucp_request_param_t params{};
    void* request = l.put_nbx(static_cast<ucp_ep_h>(peer.ep.load(std::memory_order_acquire)), source, bytes, peer.base + offset,
                              static_cast<ucp_rkey_h>(peer.rkey), &params);
    HPS_RETURN_IF_ERROR(t.WaitRequest(request, peer.pe, "ucp_put_nbx"));
  }
  if (!signalled) return Status::Ok();
  HPS_RETURN_IF_ERROR(t.CheckPeer(peer.pe, "ucp_atomic_op_nbx"));
  const ucs_status_t fenced = l.worker_fence(static_cast<ucp_worker_h>(t.worker_));
  if (fenced != UCS_OK) return t.Failure(peer.pe, fenced, "ucp_worker_fence");
  // A SWAP (a set) is a fetching operation: its target replies into posted->reply. It is not
  // waited for either (that would add a round trip to every set); Close flushes before it
  // closes the endpoints, so no reply outlives them (UCX 1.13 aborts a target whose reply
  // endpoint is gone).
  auto* posted = new Posted{WireHeader{}, 0, 0, l.request_free};
  if (signal.width == 4) {
    const auto word = static_cast<std::uint32_t>(static_cast<std::int32_t>(signal.value));
    std::memcpy(&posted->operand, &word, sizeof word);
  } else {
    posted->operand = static_cast<std::uint64_t>(signal.value);
  }
  const bool set = signal.action == SignalAction::kSet;
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA;
  params.datatype = ucp_dt_make_contig(static_cast<std::size_t>(signal.width));
  params.cb.send = ReleasePosted;
  params.user_data = posted;
  if (set) {
    params.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    params.reply_buffer = &posted->reply;
  }
  void* request = l.atomic_op_nbx(static_cast<ucp_ep_h>(peer.ep.load(std::memory_order_acquire)),
                                  set ? UCP_ATOMIC_OP_SWAP : UCP_ATOMIC_OP_ADD, &posted->operand,
                                  1, peer.base + signal.offset,
                                  static_cast<ucp_rkey_h>(peer.rkey), &params);
  if (request == nullptr) {  // completed at once: the callback is not called
    delete posted;
    return Status::Ok();
  }
  if (UCS_PTR_IS_ERR(request)) {
    delete posted;
    return t.Failure(peer.pe, UCS_PTR_STATUS(request), "ucp_atomic_op_nbx");
  }
  return Status::Ok();
}

Status UcxTransport::RmaPath::Begin(UcxTransport& t, Outbound* /*out*/, Peer& peer,
                                    std::uint64_t offset, const void* source,
                                    std::uint64_t bytes, const RemoteSignal& signal,
                                    Audience audience) const {
  return t.PutSignal(peer.pe, offset, source, bytes, signal, audience);  // no message to begin
}

Status UcxTransport::RmaPath::Get(UcxTransport& t, Peer& peer, void* destination,
                                  std::uint64_t offset, std::uint64_t bytes) const {
  HPS_RETURN_IF_ERROR(t.CheckPeer(peer.pe, "ucp_get_nbx"));
  ucp_request_param_t params{};
  void* request = t.lib_->get_nbx(static_cast<ucp_ep_h>(peer.ep.load(std::memory_order_acquire)),
                  destination, bytes,
                  peer.base + offset, static_cast<ucp_rkey_h>(peer.rkey), &params);
  return t.WaitRequest(request, peer.pe, "ucp_get_nbx");
}

Status UcxTransport::RmaPath::PutNbi(UcxTransport& t, Peer& peer, std::uint64_t offset,
                                     const void* source, std::uint64_t bytes,
                                     std::shared_ptr<const void> /*hold*/) const {
  return t.Put(peer.pe, offset, source, bytes, Audience::kAnyone);  // complete when it returns
}

Status UcxTransport::RmaPath::GetNbi(UcxTransport& t, Peer& peer, void* destination,
                                     std::uint64_t offset, std::uint64_t bytes,
                                     std::shared_ptr<const void> /*hold*/) const {
  return t.Get(peer.pe, destination, offset, bytes);
}

Status UcxTransport::RmaPath::BeforeAtomic(UcxTransport& t, Peer& peer) const {
  // The atomic is a message; this PE's puts to the peer went as RMA: a worker fence orders them.
  const ucs_status_t fenced = t.lib_->worker_fence(static_cast<ucp_worker_h>(t.worker_));
  return fenced == UCS_OK ? Status::Ok() : t.Failure(peer.pe, fenced, "ucp_worker_fence");
}

void UcxTransport::RmaPath::Beat(UcxTransport& t, Peer& peer, const RemoteSignal& beat) const {
  (void)Transmit(t, peer, 0, nullptr, 0, beat, Audience::kTarget, /*heartbeat=*/true);
}

#endif

}  // namespace hyper_parallel::shmem::transport
