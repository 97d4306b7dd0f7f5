// UcxTransport's endpoints (ucx_transport.h): made at init to the watch partners, and to any
// other peer when first used (a hello first); the path each takes; the errors they report; the
// losses this PE passes on (docs/scale-out.md, "How it works" and "Liveness").
#include "backends/transport/ucx/library.h"
#include "backends/transport/ucx/paths.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hyper_parallel::shmem::transport {

#if HPS_HAVE_UCX_HEADERS

namespace {

// Whether UCX drives RMA and atomics to this peer in hardware (LanesHaveHardwareRma of the
// endpoint's own description).
bool HardwareRma(decltype(&ucp_ep_print_info) print_info, ucp_ep_h ep) {
  if (print_info == nullptr) return false;
  char* text = nullptr;
  std::size_t size = 0;
  FILE* stream = ::open_memstream(&text, &size);
  if (stream == nullptr) return false;
  print_info(ep, stream);
  std::fclose(stream);
  const std::string info(text != nullptr ? text : "");
  std::free(text);
  return UcxTransport::LanesHaveHardwareRma(info);
}

}  // namespace

Status UcxTransport::Connect(int rank, const std::vector<std::string>& blobs,
                             const std::vector<bool>& remote, const std::vector<bool>& watched,
                             LostFn lost) {
  rank_ = rank;
  lost_ = std::move(lost);
  const std::size_t pes = blobs.size();
  peers_ = std::vector<Peer>(pes);
  failed_ = std::make_unique<std::atomic<bool>[]>(pes);
  unconfirmed_ = std::make_unique<std::atomic<bool>[]>(pes);
  fenced_ = std::make_unique<std::atomic<bool>[]>(pes);
  flush_sent_ = std::make_unique<std::atomic<std::uint64_t>[]>(pes);
  flush_answered_ = std::make_unique<std::atomic<std::uint64_t>[]>(pes);
  {
    MutexLock lock(&inbound_mutex_);
    inbound_.assign(pes, Inbound{});
  }
  for (std::size_t pe = 0; pe < pes; ++pe) {
    Peer& peer = peers_[pe];
    peer.pe = static_cast<int>(pe);
    peer.owner = this;
    if (!remote[pe]) continue;
    const std::string& blob = blobs[pe];
    std::uint64_t header[4] = {};
    if (blob.size() < sizeof header) {
      return Status::Contract(ErrorCode::kBackendError, "UCX peer blob", "a header",
                              std::to_string(blob.size()) + " bytes");
    }
    std::memcpy(header, blob.data(), sizeof header);
    if (blob.size() != sizeof header + header[1] + header[2]) {
      return Status::Contract(ErrorCode::kBackendError, "UCX peer blob",
                              std::to_string(sizeof header + header[1] + header[2]) + " bytes",
                              std::to_string(blob.size()) + " bytes");
    }
    peer.base = header[0];
    peer.rkey_buffer.assign(blob.data() + sizeof header, header[1]);
    peer.address.assign(blob.data() + sizeof header + header[1], header[2]);
    peer.accepts_messages = (header[3] & kAcceptsMessages) != 0;
    peer.reachable = true;
    peer.watched = watched[pe];
  }
  // Endpoints made when first used need every PE to take active messages (the hello): decided
  // alike on every PE from the same blobs.
  lazy_ = messages_supported_;
  for (const Peer& peer : peers_) lazy_ = lazy_ && (!peer.reachable || peer.accepts_messages);
  MutexLock lock(&connect_mutex_);
  for (Peer& peer : peers_) {
    if (peer.reachable && (peer.watched || !lazy_)) {
      HPS_RETURN_IF_ERROR(CreateEndpoint(peer, /*hello=*/false));
    }
  }
  return Status::Ok();
}

Status UcxTransport::CreateEndpoint(Peer& peer, bool hello) {
  Library& l = *lib_;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(peer.address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = [](void* arg, ucp_ep_h ep, ucs_status_t status) {
    OnEndpointError(arg, ep, static_cast<int>(status));
  };
  params.err_handler.arg = &peer;
  ucp_ep_h ep = nullptr;
  ucs_status_t status = l.ep_create(static_cast<ucp_worker_h>(worker_), &params, &ep);
  if (status != UCS_OK) return Failure(peer.pe, status, "ucp_ep_create");
  ucp_rkey_h key = nullptr;
  status = l.ep_rkey_unpack(ep, peer.rkey_buffer.data(), &key);
  if (status != UCS_OK) return Failure(peer.pe, status, "ucp_ep_rkey_unpack");
  peer.rkey = key;
  const bool hardware = path_setting_ == "auto" && messages_supported_ &&
                        HardwareRma(l.ep_print_info, ep);
  peer.path = &PathFor(ChoosePath(path_setting_, messages_supported_ ? "" : path_reason_,
                                   peer.accepts_messages, hardware)
                            .first);
  if (hello) {
    // The first message on the endpoint, whatever the path: the peer learns that this PE has
    // an endpoint to it, so it says farewell here when it closes (Close).
    WireHeader header;
    header.kind = WireKind::kHello;
    header.source = rank_;
    auto* posted = new Posted{header, 0, 0, l.request_free};
    ucp_request_param_t send{};
    send.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    send.cb.send = ReleasePosted;
    send.user_data = posted;
    void* request = l.am_send_nbx(ep, kUcxMessageId, &posted->header, sizeof posted->header,
                                  nullptr, 0, &send);
    counters_.heartbeats.fetch_add(1, std::memory_order_relaxed);
    if (request == nullptr || UCS_PTR_IS_ERR(request)) delete posted;
  }
  peer.ep.store(ep, std::memory_order_release);
  return Status::Ok();
}

Status UcxTransport::Connected(int pe) {
  Peer& peer = peers_[pe];
  if (peer.ep.load(std::memory_order_acquire) != nullptr) [[likely]] return Status::Ok();
  HPS_RETURN_IF_ERROR(CheckPeer(pe, "ucp_ep_create"));
  MutexLock lock(&connect_mutex_);
  if (peer.ep.load(std::memory_order_acquire) != nullptr) return Status::Ok();
  return CreateEndpoint(peer, /*hello=*/true);
}

void UcxTransport::SendQueued() {
  std::vector<Queued> queued;
  {
    MutexLock lock(&queued_mutex_);
    queued.swap(queued_);
    has_queued_.store(false, std::memory_order_relaxed);
  }
  for (const Queued& message : queued) {
    if (!Connected(message.pe).ok()) continue;  // lost meanwhile: nobody to tell
    Post(message.pe, message.header, message.data, message.bytes, message.heartbeat);
  }
}

const UcxTransport::PeerPath& UcxTransport::PathFor(Path path) {
  static const MessagesPath messages;
  static const RmaPath rma;
  if (path == Path::kMessages) return messages;
  return rma;
}

std::string UcxTransport::PathName(int pe) const {
  if (peers_[pe].ep.load(std::memory_order_acquire) == nullptr) return "not connected";
  return std::string(peers_[pe].path->name());
}

int UcxTransport::endpoints() const {
  int count = 0;
  for (const Peer& peer : peers_) {
    count += peer.ep.load(std::memory_order_acquire) != nullptr ? 1 : 0;
  }
  return count;
}

#endif

}  // namespace hyper_parallel::shmem::transport
