// UcxTransport: what arrives on the messages path (wire.h; docs/scale-out.md, "The
// messages path"). Every handler runs inside worker progress, on whichever thread of this PE
// progresses (a waiter, or the progress thread).
//
// Order: a message that orders anything (a signal or control word, a flush, a get) is applied
// only once every earlier rendezvous put of its source has landed; until then it and every
// message of that source after it wait, in order (deferred). Data alone goes at once: an eager
// put is copied in, a rendezvous put starts receiving straight into the segment, several at a
// time (the chunks of a large put: ucx_transport.cc). So a signal, a control word or a flush's
// answer never overtakes data that was sent before it, and bulk data overlaps.
#include "backends/transport/ucx/library.h"

#include <cstring>

#include "base/log.h"

namespace hyper_parallel::shmem::transport {

#if HPS_HAVE_UCX_HEADERS

namespace {

template <class Word>
void Apply(std::byte* address, SignalAction action, std::int64_t value) {
  std::atomic_ref<Word> word(*reinterpret_cast<Word*>(address));
  if (action == SignalAction::kSet) {
    word.exchange(static_cast<Word>(value), std::memory_order_seq_cst);
  } else {
    word.fetch_add(static_cast<Word>(value), std::memory_order_seq_cst);
  }
}

// Whether `header` must wait for the data its source sent before it: all but data alone,
// and data alone too when it is the first message after a fence.
bool Orders(const WireHeader& header) {
  return header.kind != WireKind::kPut || header.action != SignalAction::kNone ||
         (header.flags & kWireOrdered) != 0;
}

// A rendezvous receive in flight: what to do once its data has landed. While it is, the
// transport counts as streaming (progress.cc).
struct Receiving {
  UcxTransport* transport;
  WireHeader header;
  void (*request_free)(void*);
};

}  // namespace

Status UcxTransport::RegisterHandler() {
  ucp_am_handler_param_t params{};
  params.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                      UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  params.id = kUcxMessageId;
  params.flags = UCP_AM_FLAG_WHOLE_MSG;
  params.cb = [](void* arg, const void* header, std::size_t header_length, void* data,
                std::size_t length, const ucp_am_recv_param_t* param) {
    const bool rendezvous = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    return static_cast<ucs_status_t>(static_cast<UcxTransport*>(arg)->OnMessage(
        header, header_length, data, length, rendezvous));
  };
  params.arg = this;
  const ucs_status_t status =
      lib_->set_am_recv_handler(static_cast<ucp_worker_h>(worker_), &params);
  return status == UCS_OK ? Status::Ok() : Failure(-1, status, "ucp_worker_set_am_recv_handler");
}

int UcxTransport::OnMessage(const void* header_bytes, std::size_t header_length, void* data,
                            std::size_t length, bool rendezvous) {
  auto* worker = static_cast<ucp_worker_h>(worker_);
  WireHeader header;
  std::string_view problem = "bad header length";
  if (header_length == sizeof header) {
    std::memcpy(&header, header_bytes, sizeof header);
    problem = Validate(header, length, segment_bytes_, static_cast<int>(peers_.size()));
    if (problem.empty() && !remote(header.source)) problem = "source not reached through UCX";
  }
  if (!problem.empty()) {
    // A peer that does not speak this protocol, or a bug: nothing lands, the count says so.
    counters_.rejected.fetch_add(1, std::memory_order_relaxed);
    HPS_LOG_ERROR("refused a message from a remote peer: reason=" + std::string(problem));
    if (rendezvous) lib_->am_data_release(worker, data);
    return UCS_OK;
  }
  // The source has an endpoint to this PE: it hears farewell at close.
  Peer& source = peers_[header.source];
  if (!source.contacted.load(std::memory_order_relaxed)) {
    source.contacted.store(true, std::memory_order_release);
  }
  if (header.kind == WireKind::kHello) return UCS_OK;
  if (header.kind == WireKind::kLost) {
    const int lost = static_cast<int>(header.value);
    // A PE that said farewell here closed normally: whoever reports it saw it exit after.
    if (lost != rank_ && !Departed(lost) &&
        !failed_[lost].exchange(true, std::memory_order_acq_rel)) {
      if (own_bell_ != nullptr) Ring<CallSite::kHostThread>(own_bell_);
      if (lost_ && !stopping_.load(std::memory_order_acquire)) {
        lost_(lost, "PE " + std::to_string(header.source) + " reported it lost");
      }
    }
    return UCS_OK;
  }
  // Replies pair with a request of this PE: they wait behind nothing.
  if (header.kind == WireKind::kGetReply) {
    OnGetReply(header, data, length, rendezvous);
    return UCS_OK;
  }
  if (header.kind == WireKind::kAtomicReply) {
    OnAtomicReply(header);
    return UCS_OK;
  }
  if (header.kind == WireKind::kFlushReply) {
    std::atomic<std::uint64_t>& answered = flush_answered_[header.source];
    std::uint64_t seen = answered.load(std::memory_order_relaxed);
    while (seen < header.token &&
           !answered.compare_exchange_weak(seen, header.token, std::memory_order_release)) {
    }
    if (own_bell_ != nullptr) Ring<CallSite::kHostThread>(own_bell_);
    return UCS_OK;
  }
  const bool bulk = rendezvous && header.kind == WireKind::kPut;
  {
    MutexLock lock(&inbound_mutex_);
    Inbound& in = inbound_[header.source];
    if (in.next < in.deferred.size() || (Orders(header) && in.receiving > 0)) {
      DeferredMessage later;
      later.header = header;
      if (rendezvous) {
        later.rendezvous = data;
      } else if (length > 0) {
        later.data.assign(static_cast<const std::byte*>(data),
                          static_cast<const std::byte*>(data) + length);
      }
      in.deferred.push_back(std::move(later));
      return rendezvous ? UCS_INPROGRESS : UCS_OK;
    }
    if (bulk) ++in.receiving;  // before the lock goes: what it orders waits for it
  }
  // A rendezvous put that landed at once (or failed to start) is no longer receiving.
  if (Deliver(header, data, length, rendezvous) && bulk) Received(header.source);
  return UCS_OK;
}

void UcxTransport::Received(int source) {
  {
    MutexLock lock(&inbound_mutex_);
    if (inbound_.empty()) return;  // closing
    --inbound_[source].receiving;
  }
  Resume(source);
}

bool UcxTransport::Deliver(const WireHeader& header, void* data, std::size_t length,
                           bool rendezvous) {
  switch (header.kind) {
    case WireKind::kPut: {
      if (!rendezvous) {
        if (length > 0) std::memcpy(segment_ + header.offset, data, length);
        Landed(header);
        return true;
      }
      // Straight into the segment; the signal once it is there (OnReceived).
      auto* receiving = new Receiving{this, header, lib_->request_free};
      streaming_.fetch_add(1, std::memory_order_relaxed);
      ucp_request_param_t params{};
      params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      params.cb.recv_am = [](void* request, ucs_status_t status, std::size_t, void* user_data) {
        auto* context = static_cast<Receiving*>(user_data);
        UcxTransport* self = context->transport;
        self->streaming_.fetch_sub(1, std::memory_order_relaxed);
        if (status == UCS_OK) self->Landed(context->header);
        const int source = context->header.source;
        context->request_free(request);
        delete context;
        self->Received(source);
      };
      params.user_data = receiving;
      void* request = lib_->am_recv_data_nbx(static_cast<ucp_worker_h>(worker_), data,
                                             segment_ + header.offset, header.bytes, &params);
      if (request != nullptr && !UCS_PTR_IS_ERR(request)) return false;  // in flight
      streaming_.fetch_sub(1, std::memory_order_relaxed);
      if (request == nullptr) Landed(header);
      delete receiving;
      return true;
    }
    case WireKind::kGet:
      if (rendezvous) lib_->am_data_release(static_cast<ucp_worker_h>(worker_), data);
      {
        WireHeader reply;
        reply.kind = WireKind::kGetReply;
        reply.source = rank_;
        reply.token = header.token;
        reply.bytes = header.bytes;
        Post(header.source, reply, segment_ + header.offset, header.bytes);
      }
      return true;
    case WireKind::kAtomic: {
      // The CPU's atomics, as every atomic on this heap (atomic_op.h); then whoever waits
      // on the word here looks again.
      const std::uint64_t old =
          ApplyAtomic(segment_ + header.offset, header.width,
                      static_cast<AtomicOp>(header.atomic),
                      static_cast<std::uint64_t>(header.value), header.compare);
      if (own_bell_ != nullptr) RingAfterSeqCst<CallSite::kHostThread>(own_bell_);
      if (header.token != 0) {
        WireHeader reply;
        reply.kind = WireKind::kAtomicReply;
        reply.source = rank_;
        reply.token = header.token;
        reply.value = static_cast<std::int64_t>(old);
        Post(header.source, reply, nullptr, 0);
      }
      return true;
    }
    case WireKind::kFlush: {
      if (rendezvous) lib_->am_data_release(static_cast<ucp_worker_h>(worker_), data);
      WireHeader reply;
      reply.kind = WireKind::kFlushReply;
      reply.source = rank_;
      reply.token = header.token;
      Post(header.source, reply, nullptr, 0);
      return true;
    }
    case WireKind::kGetReply:
    case WireKind::kAtomicReply:
    case WireKind::kFlushReply:
    case WireKind::kHello:
    case WireKind::kLost:
      break;
  }
  if (rendezvous) lib_->am_data_release(static_cast<ucp_worker_h>(worker_), data);
  return true;
}

void UcxTransport::Landed(const WireHeader& header) {
  if (header.action != SignalAction::kNone) {
    std::byte* word = segment_ + header.signal_offset;
    if (header.width == 4) {
      Apply<std::int32_t>(word, header.action, header.value);
    } else {
      Apply<std::int64_t>(word, header.action, header.value);
    }
    // The word was written seq_cst: the data before it is visible to whoever sees it.
    if (own_bell_ != nullptr) RingAfterSeqCst<CallSite::kHostThread>(own_bell_);
    return;
  }
  if (own_bell_ != nullptr) Ring<CallSite::kHostThread>(own_bell_);
}

void UcxTransport::Resume(int source) {
  for (;;) {
    DeferredMessage next;
    {
      MutexLock lock(&inbound_mutex_);
      if (inbound_.empty()) return;  // closing
      Inbound& in = inbound_[source];
      if (in.next == in.deferred.size()) {
        in.deferred.clear();
        in.next = 0;
        return;
      }
      // The head still waits for data in flight; the completion of that data resumes.
      if (Orders(in.deferred[in.next].header) && in.receiving > 0) return;
      next = std::move(in.deferred[in.next++]);
      if (next.rendezvous != nullptr && next.header.kind == WireKind::kPut) ++in.receiving;
    }
    const bool rendezvous = next.rendezvous != nullptr;
    const bool bulk = rendezvous && next.header.kind == WireKind::kPut;
    void* data = rendezvous ? next.rendezvous : next.data.data();
    const std::size_t length = rendezvous ? next.header.bytes : next.data.size();
    if (Deliver(next.header, data, length, rendezvous) && bulk) {
      MutexLock lock(&inbound_mutex_);
      if (inbound_.empty()) return;
      --inbound_[source].receiving;
    }
  }
}

void UcxTransport::OnGetReply(const WireHeader& header, void* data, std::size_t length,
                              bool rendezvous) {
  auto* worker = static_cast<ucp_worker_h>(worker_);
  std::shared_ptr<PendingGet> pending;
  {
    MutexLock lock(&gets_mutex_);
    for (const auto& [token, get] : gets_) {
      if (token == header.token) pending = get;
    }
  }
  if (pending == nullptr) {  // abandoned (timed out): nobody waits for it any more
    if (rendezvous) lib_->am_data_release(worker, data);
    return;
  }
  auto finish = [this](PendingGet& get, int status) {
    get.status.store(status, std::memory_order_relaxed);
    get.done.store(true, std::memory_order_release);
    if (own_bell_ != nullptr) Ring<CallSite::kHostThread>(own_bell_);
  };
  if (!rendezvous) {
    std::memcpy(pending->destination, data, std::min<std::uint64_t>(length, pending->bytes));
    finish(*pending, UCS_OK);
    return;
  }
  struct Context {
    UcxTransport* transport;
    std::shared_ptr<PendingGet> get;
    void (*request_free)(void*);
  };
  auto* context = new Context{this, pending, lib_->request_free};
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  params.cb.recv_am = [](void* request, ucs_status_t status, std::size_t, void* user_data) {
    auto* context = static_cast<Context*>(user_data);
    context->get->status.store(status, std::memory_order_relaxed);
    context->get->done.store(true, std::memory_order_release);
    if (context->transport->own_bell_ != nullptr) {
      Ring<CallSite::kHostThread>(context->transport->own_bell_);
    }
    context->request_free(request);
    delete context;
  };
  params.user_data = context;
  void* request = lib_->am_recv_data_nbx(worker, data, pending->destination,
                                         std::min<std::uint64_t>(length, pending->bytes), &params);
  if (request != nullptr && !UCS_PTR_IS_ERR(request)) return;
  delete context;
  finish(*pending, request == nullptr ? UCS_OK : UCS_PTR_STATUS(request));
}

#endif

}  // namespace hyper_parallel::shmem::transport
