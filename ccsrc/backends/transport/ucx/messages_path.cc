// The messages path (paths.h): every operation is one active message (wire.h).
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "backends/transport/ucx/paths.h"

namespace hyper_parallel::shmem::transport {

#if HPS_HAVE_UCX_HEADERS

Status UcxTransport::MessagesPath::Transmit(UcxTransport& t, Peer& peer, std::uint64_t offset,
                                            const void* source, std::uint64_t bytes,
                                            const RemoteSignal& signal, Audience audience,
                                            bool heartbeat) const {
  HPS_RETURN_IF_ERROR(
      t.Send(peer.pe, PutHeader(t.rank_, offset, bytes, signal), source, bytes, heartbeat));
  if (audience == Audience::kAnyone) t.unconfirmed_[peer.pe].store(true, std::memory_order_release);
  return Status::Ok();
}

Status UcxTransport::MessagesPath::Begin(UcxTransport& t, Outbound* out, Peer& peer,
                                         std::uint64_t offset, const void* source,
                                         std::uint64_t bytes, const RemoteSignal& signal,
                                         Audience audience) const {
  while (out->in_flight.size() - out->finished >= Outbound::kMaxInFlight) {
    HPS_RETURN_IF_ERROR(t.FinishOldest(out));
  }
  HPS_RETURN_IF_ERROR(t.CheckPeer(peer.pe, "ucp_am_send_nbx"));
  t.CountOperation(bytes, signal);
  auto sending = std::make_shared<Sending>();
  sending->header = PutHeader(t.rank_, offset, bytes, signal);
  t.MarkFenced(peer.pe, &sending->header);
  sending->pe = peer.pe;
  sending->request_free = t.lib_->request_free;
  auto* held = new std::shared_ptr<Sending>(sending);  // the callback's share
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  params.cb.send = [](void* request, ucs_status_t status, void* user_data) {
    auto* share = static_cast<std::shared_ptr<Sending>*>(user_data);
    (*share)->status.store(status, std::memory_order_relaxed);
    (*share)->done.store(true, std::memory_order_release);
    (*share)->request_free(request);
    delete share;
  };
  params.user_data = held;
  if (bytes <= kEagerBlockBytes) {
    params.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    params.flags = UCP_AM_SEND_FLAG_EAGER;
  }
  void* request = t.lib_->am_send_nbx(
      static_cast<ucp_ep_h>(peer.ep.load(std::memory_order_acquire)), kUcxMessageId,
      &sending->header, sizeof sending->header, source, bytes, &params);
  t.counters_.messages.fetch_add(1, std::memory_order_relaxed);
  if (request == nullptr || UCS_PTR_IS_ERR(request)) {  // done at once: no callback
    delete held;
    if (request != nullptr) {
      out->failed = t.Failure(peer.pe, UCS_PTR_STATUS(request), "ucp_am_send_nbx");
      return out->failed;
    }
    sending->done.store(true, std::memory_order_release);
  } else if (bytes >= kBulkBytes) {
    sending->bulk = true;  // a waiter keeps progressing while it streams
    t.streaming_.fetch_add(1, std::memory_order_relaxed);
  }
  if (audience == Audience::kAnyone) t.unconfirmed_[peer.pe].store(true, std::memory_order_release);
  out->in_flight.push_back(std::move(sending));
  return Status::Ok();
}

Status UcxTransport::MessagesPath::Get(UcxTransport& t, Peer& peer, void* destination,
                                       std::uint64_t offset, std::uint64_t bytes) const {
  auto pending = std::make_shared<PendingGet>();
  pending->destination = destination;
  pending->bytes = bytes;
  std::uint64_t token = 0;
  Status status = t.Request(peer.pe, t.GetHeader(offset, bytes), pending, &token);
  return status.ok() ? t.AwaitGet(peer.pe, pending, token) : status;
}

Status UcxTransport::MessagesPath::PutNbi(UcxTransport& t, Peer& peer, std::uint64_t offset,
                                          const void* source, std::uint64_t bytes,
                                          std::shared_ptr<const void> hold) const {
  auto out = std::make_unique<Outbound>();
  Status begun = t.Begin(out.get(), peer.pe, offset, source, bytes, RemoteSignal{}, Audience::kAnyone);
  if (!begun.ok()) {
    (void)t.Finish(out.get());
    return begun;
  }
  std::vector<NbiPut> oldest;
  {
    MutexLock lock(&t.nbi_mutex_);
    t.nbi_puts_.push_back(NbiPut{std::move(out), std::move(hold)});
    t.has_nbi_.store(true, std::memory_order_release);
    // A bound on what is pending: the oldest half completes now, outside the lock.
    if (t.nbi_puts_.size() > kMaxNbi) {
      const auto half = t.nbi_puts_.begin() + static_cast<std::ptrdiff_t>(kMaxNbi / 2);
      oldest.assign(std::make_move_iterator(t.nbi_puts_.begin()), std::make_move_iterator(half));
      t.nbi_puts_.erase(t.nbi_puts_.begin(), half);
    }
  }
  Status first;
  for (NbiPut& put : oldest) {
    Status finished = t.Finish(put.out.get());
    if (first.ok()) first = std::move(finished);
  }
  return first;
}

Status UcxTransport::MessagesPath::GetNbi(UcxTransport& t, Peer& peer, void* destination,
                                          std::uint64_t offset, std::uint64_t bytes,
                                          std::shared_ptr<const void> hold) const {
  t.counters_.gets.fetch_add(1, std::memory_order_relaxed);
  t.counters_.bytes_got.fetch_add(bytes, std::memory_order_relaxed);
  auto pending = std::make_shared<PendingGet>();
  pending->destination = destination;
  pending->bytes = bytes;
  std::uint64_t token = 0;
  HPS_RETURN_IF_ERROR(t.Request(peer.pe, t.GetHeader(offset, bytes), pending, &token));
  bool complete_now = false;
  {
    MutexLock lock(&t.nbi_mutex_);
    t.nbi_gets_.push_back(NbiGet{std::move(pending), token, peer.pe, std::move(hold)});
    t.has_nbi_.store(true, std::memory_order_release);
    complete_now = t.nbi_gets_.size() > kMaxNbi;
  }
  return complete_now ? t.CompleteNbi() : Status::Ok();
}

Status UcxTransport::MessagesPath::BeforeAtomic(UcxTransport&, Peer&) const {
  return Status::Ok();  // messages from one source land in order
}

void UcxTransport::MessagesPath::Beat(UcxTransport& t, Peer& peer,
                                      const RemoteSignal& beat) const {
  t.Post(peer.pe, PutHeader(t.rank_, 0, 0, beat), nullptr, 0, /*heartbeat=*/true);
}

#endif

}  // namespace hyper_parallel::shmem::transport
