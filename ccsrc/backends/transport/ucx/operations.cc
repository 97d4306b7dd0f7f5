// UcxTransport's operations (ucx_transport.h): put, put with a signal, messages begun together,
// get, flush, on either path.
#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "backends/transport/ucx/library.h"

namespace hyper_parallel::shmem::transport {

#if HPS_HAVE_UCX_HEADERS

void UcxTransport::CountOperation(std::uint64_t bytes, const RemoteSignal& signal) {
  // One operation, whatever it carries (RemoteCounters).
  if (bytes > 0) {
    counters_.puts.fetch_add(1, std::memory_order_relaxed);
    counters_.bytes_put.fetch_add(bytes, std::memory_order_relaxed);
  } else if (signal.action != SignalAction::kNone) {
    counters_.atomics.fetch_add(1, std::memory_order_relaxed);
  }
}

Status UcxTransport::PutSignal(int pe, std::uint64_t offset, const void* source,
                               std::uint64_t bytes, const RemoteSignal& signal,
                               Audience audience) {
  CountOperation(bytes, signal);
  return Transmit(pe, offset, source, bytes, signal, audience);
}

Status UcxTransport::Transmit(int pe, std::uint64_t offset, const void* source,
                              std::uint64_t bytes, const RemoteSignal& signal,
                              Audience audience, bool heartbeat) {
  Peer& peer = peers_[pe];
  HPS_RETURN_IF_ERROR(Connected(pe));
  const bool signalled = signal.action != SignalAction::kNone;
  if (peer.path == Path::kMessages) {
    HPS_RETURN_IF_ERROR(Send(pe, PutHeader(rank_, offset, bytes, signal), source, bytes, heartbeat));
    if (audience == Audience::kAnyone) unconfirmed_[pe].store(true, std::memory_order_release);
    return Status::Ok();
  }
  Library& l = *lib_;
  if (heartbeat) counters_.heartbeats.fetch_add(1, std::memory_order_relaxed);  // Send counts its own
  if (bytes > 0) {
    HPS_RETURN_IF_ERROR(CheckPeer(pe, "ucp_put_nbx"));
    ucp_request_param_t params{};
    void* request = l.put_nbx(static_cast<ucp_ep_h>(peer.ep.load(std::memory_order_acquire)), source, bytes, peer.base + offset,
                              static_cast<ucp_rkey_h>(peer.rkey), &params);
    HPS_RETURN_IF_ERROR(WaitRequest(request, pe, "ucp_put_nbx"));
  }
  if (!signalled) return Status::Ok();
  HPS_RETURN_IF_ERROR(CheckPeer(pe, "ucp_atomic_op_nbx"));
  const ucs_status_t fenced = l.worker_fence(static_cast<ucp_worker_h>(worker_));
  if (fenced != UCS_OK) return Failure(pe, fenced, "ucp_worker_fence");
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
    return Failure(pe, UCS_PTR_STATUS(request), "ucp_atomic_op_nbx");
  }
  return Status::Ok();
}

// One message of an Outbound batch: its header (UCX reads it until the send completes) and
// its completion, shared by the batch and the send's callback, so that neither outlives the
// other's use (a batch given up on a failure leaves it to the callback).
struct UcxTransport::Sending {
  WireHeader header;
  std::atomic<bool> done{false};
  std::atomic<int> status{UCS_OK};
  int pe = -1;
  bool bulk = false;
  void (*request_free)(void*) = nullptr;
};

Status UcxTransport::Begin(Outbound* out, int pe, std::uint64_t offset, const void* source,
                           std::uint64_t bytes, const RemoteSignal& signal, Audience audience) {
  if (!out->failed.ok()) return out->failed;
  HPS_RETURN_IF_ERROR(Connected(pe));
  if (peers_[pe].path != Path::kMessages) {
    return PutSignal(pe, offset, source, bytes, signal, audience);
  }
  while (out->in_flight.size() - out->finished >= Outbound::kMaxInFlight) {
    HPS_RETURN_IF_ERROR(FinishOldest(out));
  }
  HPS_RETURN_IF_ERROR(CheckPeer(pe, "ucp_am_send_nbx"));
  CountOperation(bytes, signal);
  auto sending = std::make_shared<Sending>();
  sending->header = PutHeader(rank_, offset, bytes, signal);
  MarkFenced(pe, &sending->header);
  sending->pe = pe;
  sending->request_free = lib_->request_free;
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
  void* request = lib_->am_send_nbx(
      static_cast<ucp_ep_h>(peers_[pe].ep.load(std::memory_order_acquire)), kUcxMessageId,
      &sending->header, sizeof sending->header, source, bytes, &params);
  counters_.messages.fetch_add(1, std::memory_order_relaxed);
  if (request == nullptr || UCS_PTR_IS_ERR(request)) {  // done at once: no callback
    delete held;
    if (request != nullptr) {
      out->failed = Failure(pe, UCS_PTR_STATUS(request), "ucp_am_send_nbx");
      return out->failed;
    }
    sending->done.store(true, std::memory_order_release);
  } else if (bytes >= kBulkBytes) {
    sending->bulk = true;  // a waiter keeps progressing while it streams
    streaming_.fetch_add(1, std::memory_order_relaxed);
  }
  if (audience == Audience::kAnyone) unconfirmed_[pe].store(true, std::memory_order_release);
  out->in_flight.push_back(std::move(sending));
  return Status::Ok();
}

Status UcxTransport::FinishOldest(Outbound* out) {
  const auto sending = std::static_pointer_cast<Sending>(out->in_flight[out->finished++]);
  Status waited = Await([&] { return sending->done.load(std::memory_order_acquire); },
                        sending->pe, "ucp_am_send_nbx");
  if (sending->bulk) streaming_.fetch_sub(1, std::memory_order_relaxed);
  if (waited.ok()) {
    const int status = sending->status.load(std::memory_order_relaxed);
    if (status != UCS_OK) waited = Failure(sending->pe, status, "ucp_am_send_nbx");
  }
  if (!waited.ok() && out->failed.ok()) out->failed = waited;
  return waited;
}

Status UcxTransport::Finish(Outbound* out) {
  // Every one is waited for, also after a failure: a bulk one still counts as streaming.
  while (out->finished < out->in_flight.size()) (void)FinishOldest(out);
  out->in_flight.clear();
  out->finished = 0;
  return out->failed;
}

Status UcxTransport::Put(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
                         Audience audience) {
  return PutSignal(pe, offset, source, bytes, RemoteSignal{}, audience);
}

Status UcxTransport::Get(int pe, void* destination, std::uint64_t offset, std::uint64_t bytes) {
  Peer& peer = peers_[pe];
  counters_.gets.fetch_add(1, std::memory_order_relaxed);
  counters_.bytes_got.fetch_add(bytes, std::memory_order_relaxed);
  HPS_RETURN_IF_ERROR(Connected(pe));
  if (peer.path == Path::kRma) {
    HPS_RETURN_IF_ERROR(CheckPeer(pe, "ucp_get_nbx"));
    ucp_request_param_t params{};
    void* request = lib_->get_nbx(static_cast<ucp_ep_h>(peer.ep.load(std::memory_order_acquire)),
                                  destination, bytes,
                                  peer.base + offset, static_cast<ucp_rkey_h>(peer.rkey), &params);
    return WaitRequest(request, pe, "ucp_get_nbx");
  }
  auto pending = std::make_shared<PendingGet>();
  pending->destination = destination;
  pending->bytes = bytes;
  std::uint64_t token = 0;
  Status status = Request(pe, GetHeader(offset, bytes), pending, &token);
  return status.ok() ? AwaitGet(pe, pending, token) : status;
}

WireHeader UcxTransport::GetHeader(std::uint64_t offset, std::uint64_t bytes) const {
  WireHeader header;
  header.kind = WireKind::kGet;
  header.source = rank_;
  header.offset = offset;
  header.bytes = bytes;
  return header;
}

Status UcxTransport::Request(int pe, WireHeader header,
                             const std::shared_ptr<PendingGet>& pending, std::uint64_t* token) {
  header.token = next_token_.fetch_add(1, std::memory_order_relaxed);
  *token = header.token;
  {
    MutexLock lock(&gets_mutex_);
    gets_.emplace_back(header.token, pending);
  }
  Status status = Send(pe, header, nullptr, 0);
  if (!status.ok()) {
    MutexLock lock(&gets_mutex_);
    std::erase_if(gets_, [&](const auto& entry) { return entry.first == header.token; });
  }
  return status;
}

Status UcxTransport::AwaitGet(int pe, const std::shared_ptr<PendingGet>& pending,
                              std::uint64_t token) {
  Status status =
      Await([&] { return pending->done.load(std::memory_order_acquire); }, pe, "get");
  {
    MutexLock lock(&gets_mutex_);
    std::erase_if(gets_, [&](const auto& entry) { return entry.first == token; });
  }
  HPS_RETURN_IF_ERROR(status);
  const int answered = pending->status.load(std::memory_order_acquire);
  return answered == UCS_OK ? Status::Ok() : Failure(pe, answered, "ucp_am_recv_data_nbx");
}

Status UcxTransport::Flush() {
  // Messages-path peers with writes not yet confirmed get a flush request; it is answered once
  // everything this PE sent them before it has landed. A peer whose flag another thread just
  // cleared has that thread's request in flight: wait for it too.
  std::vector<std::pair<int, std::uint64_t>> awaited;
  bool rma = false;
  for (const Peer& peer : peers_) {
    if (peer.ep.load(std::memory_order_acquire) == nullptr) continue;
    if (peer.path == Path::kRma) {
      rma = true;
      continue;
    }
    if (unconfirmed_[peer.pe].exchange(false, std::memory_order_acq_rel)) {
      WireHeader header;
      header.kind = WireKind::kFlush;
      header.source = rank_;
      header.token = flush_sent_[peer.pe].fetch_add(1, std::memory_order_acq_rel) + 1;
      counters_.flushes.fetch_add(1, std::memory_order_relaxed);
      HPS_RETURN_IF_ERROR(Send(peer.pe, header, nullptr, 0));
      awaited.emplace_back(peer.pe, header.token);
    } else {
      const std::uint64_t sent = flush_sent_[peer.pe].load(std::memory_order_acquire);
      if (flush_answered_[peer.pe].load(std::memory_order_acquire) < sent) {
        awaited.emplace_back(peer.pe, sent);
      }
    }
  }
  if (rma) {
    ucp_request_param_t params{};
    void* request = lib_->worker_flush_nbx(static_cast<ucp_worker_h>(worker_), &params);
    HPS_RETURN_IF_ERROR(WaitRequest(request, -1, "ucp_worker_flush_nbx"));
  }
  for (const auto& [pe, token] : awaited) {
    HPS_RETURN_IF_ERROR(Await(
        [&, pe = pe, token = token] {
          return flush_answered_[pe].load(std::memory_order_acquire) >= token;
        },
        pe, "flush"));
  }
  return Status::Ok();
}

#endif

}  // namespace hyper_parallel::shmem::transport
