// UcxTransport's operations (ucx_transport.h): put, put with a signal, messages begun together,
// get, flush, on either path.
#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "backends/transport/ucx/paths.h"

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
  HPS_RETURN_IF_ERROR(Connected(pe));
  return peers_[pe].path->Transmit(*this, peers_[pe], offset, source, bytes, signal, audience,
                                   heartbeat);
}

Status UcxTransport::Begin(Outbound* out, int pe, std::uint64_t offset, const void* source,
                           std::uint64_t bytes, const RemoteSignal& signal, Audience audience) {
  if (!out->failed.ok()) return out->failed;
  HPS_RETURN_IF_ERROR(Connected(pe));
  return peers_[pe].path->Begin(*this, out, peers_[pe], offset, source, bytes, signal, audience);
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
  counters_.gets.fetch_add(1, std::memory_order_relaxed);
  counters_.bytes_got.fetch_add(bytes, std::memory_order_relaxed);
  HPS_RETURN_IF_ERROR(Connected(pe));
  return peers_[pe].path->Get(*this, peers_[pe], destination, offset, bytes);
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
    if (peer.path->OrderedByWorker()) {
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
