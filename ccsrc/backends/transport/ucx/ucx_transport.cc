// UcxTransport: loading UCX, registering the segment, the operations a PE issues, closing
// (ucx_transport.h). Endpoints and their paths, and losses passed on: ucx_endpoints.cc;
// progress and waiting: ucx_progress.cc; what arrives on the messages path: ucx_messages.cc.
#include "backends/transport/ucx/library.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace hyper_parallel::shmem::transport {

#if HPS_HAVE_UCX_HEADERS

namespace {

// The oldest UCX whose ucp API (the *_nbx calls, ucp_ep_close_nbx) this transport uses.
constexpr unsigned kMinMajor = 1;
constexpr unsigned kMinMinor = 10;

// A send at least this large streams while it is in flight (Arm keeps waiters polling).
constexpr std::uint64_t kBulkBytes = 16 << 10;
// A collective's or a kernel's block (Begin) up to this size goes eager: a rendezvous would hold
// the sender until the target's progress pulls it (docs/scale-out.md, "The messages path").
constexpr std::uint64_t kEagerBlockBytes = 256 << 10;

template <class T>
bool Resolve(void* handle, const char* name, T* out, std::string* missing) {
  *out = reinterpret_cast<T>(::dlsym(handle, name));
  if (*out == nullptr && missing != nullptr) {
    *missing += (missing->empty() ? "" : ",") + std::string(name);
  }
  return *out != nullptr;
}



}  // namespace

UcxTransport::~UcxTransport() { Close(); }

#endif

std::pair<UcxTransport::Path, std::string> UcxTransport::ChoosePath(std::string_view setting,
                                                                    std::string_view here_cannot,
                                                                    bool peer_takes_messages,
                                                                    bool hardware_rma) {
  // Messages unless forced to rma, unless either side cannot take them, or, on auto, unless
  // UCX drives RMA and atomics to the peer in hardware.
  if (setting == "rma") return {Path::kRma, "HYPER_PARALLEL_SHMEM_REMOTE_PATH=rma"};
  if (!here_cannot.empty()) return {Path::kRma, std::string(here_cannot)};
  if (!peer_takes_messages) return {Path::kRma, "the peer's UCX has no active messages"};
  if (setting == "auto" && hardware_rma) {
    return {Path::kRma, "UCX drives RMA and atomics to the peer in hardware"};
  }
  return {Path::kMessages, ""};
}

bool UcxTransport::LanesHaveHardwareRma(std::string_view info) {
  // Lane lines read like "lane[1]: 3:rc_mlx5/mlx5_0:1.0 md[0] -> md[0]/ib rma#0 rma_bw#0 amo#0".
  bool rma = false, amo = false;
  std::size_t start = 0;
  while (start < info.size()) {
    std::size_t end = info.find('\n', start);
    if (end == std::string_view::npos) end = info.size();
    const std::string_view line = info.substr(start, end - start);
    if (line.find("lane[") != std::string_view::npos) {
      rma = rma || line.find(" rma#") != std::string_view::npos ||
            line.find(" rma_bw#") != std::string_view::npos;
      amo = amo || line.find(" amo#") != std::string_view::npos;
    }
    start = end + 1;
  }
  return rma && amo;
}

#if HPS_HAVE_UCX_HEADERS

Status UcxTransport::Load(const Options& options, std::unique_ptr<RemoteTransport>* out) {
  const std::string path = options.library.empty() ? "libucp.so.0" : options.library;
  auto lib = std::make_unique<Library>();
  lib->handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (lib->handle == nullptr) {
    const char* error = ::dlerror();
    return Status::Assertion(
        ErrorCode::kUnsupportedCapability,
        "UCX is needed to reach PEs on other hosts and could not be loaded (install libucx0, "
        "e.g. Debian's libucx-dev, or set HYPER_PARALLEL_SHMEM_UCX_LIBRARY)",
        {{"library", path}, {"error", error != nullptr ? error : "unknown"}});
  }
  std::string missing;
  void* h = lib->handle;
  Resolve(h, "ucp_get_version", &lib->get_version, &missing);
  Resolve(h, "ucp_config_read", &lib->config_read, &missing);
  Resolve(h, "ucp_config_release", &lib->config_release, &missing);
  Resolve(h, "ucp_init_version", &lib->init_version, &missing);
  Resolve(h, "ucp_cleanup", &lib->cleanup, &missing);
  Resolve(h, "ucp_worker_create", &lib->worker_create, &missing);
  Resolve(h, "ucp_worker_destroy", &lib->worker_destroy, &missing);
  Resolve(h, "ucp_worker_get_address", &lib->worker_get_address, &missing);
  Resolve(h, "ucp_worker_release_address", &lib->worker_release_address, &missing);
  Resolve(h, "ucp_worker_progress", &lib->worker_progress, &missing);
  Resolve(h, "ucp_worker_arm", &lib->worker_arm, &missing);
  Resolve(h, "ucp_worker_get_efd", &lib->worker_get_efd, &missing);
  Resolve(h, "ucp_worker_fence", &lib->worker_fence, &missing);
  Resolve(h, "ucp_worker_flush_nbx", &lib->worker_flush_nbx, &missing);
  Resolve(h, "ucp_ep_create", &lib->ep_create, &missing);
  Resolve(h, "ucp_ep_close_nbx", &lib->ep_close_nbx, &missing);
  Resolve(h, "ucp_mem_map", &lib->mem_map, &missing);
  Resolve(h, "ucp_mem_unmap", &lib->mem_unmap, &missing);
  Resolve(h, "ucp_rkey_pack", &lib->rkey_pack, &missing);
  Resolve(h, "ucp_rkey_buffer_release", &lib->rkey_buffer_release, &missing);
  Resolve(h, "ucp_ep_rkey_unpack", &lib->ep_rkey_unpack, &missing);
  Resolve(h, "ucp_rkey_destroy", &lib->rkey_destroy, &missing);
  Resolve(h, "ucp_put_nbx", &lib->put_nbx, &missing);
  Resolve(h, "ucp_get_nbx", &lib->get_nbx, &missing);
  Resolve(h, "ucp_atomic_op_nbx", &lib->atomic_op_nbx, &missing);
  Resolve(h, "ucp_request_check_status", &lib->request_check_status, &missing);
  Resolve(h, "ucp_request_free", &lib->request_free, &missing);
  // The messages path's entry points are optional: without them every peer takes rma.
  Resolve(h, "ucp_worker_set_am_recv_handler", &lib->set_am_recv_handler, nullptr);
  Resolve(h, "ucp_am_send_nbx", &lib->am_send_nbx, nullptr);
  Resolve(h, "ucp_am_recv_data_nbx", &lib->am_recv_data_nbx, nullptr);
  Resolve(h, "ucp_am_data_release", &lib->am_data_release, nullptr);
  Resolve(h, "ucp_worker_query", &lib->worker_query, nullptr);
  Resolve(h, "ucp_ep_print_info", &lib->ep_print_info, nullptr);
  // ucs_status_string lives in libucs, which libucp depends on.
  lib->status_string =
      reinterpret_cast<const char* (*)(ucs_status_t)>(::dlsym(RTLD_DEFAULT, "ucs_status_string"));
  if (lib->status_string == nullptr) {
    lib->status_string =
        reinterpret_cast<const char* (*)(ucs_status_t)>(::dlsym(h, "ucs_status_string"));
  }
  unsigned major = 0, minor = 0, release = 0;
  if (lib->get_version != nullptr) lib->get_version(&major, &minor, &release);
  const std::string version =
      std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
  if (!missing.empty() || major < kMinMajor || (major == kMinMajor && minor < kMinMinor)) {
    return Status::Assertion(
        ErrorCode::kUnsupportedCapability,
        "the UCX found is too old for reaching PEs on other hosts (ucp 1.10 or newer is needed)",
        {{"library", path}, {"version", version},
         {"missing_symbols", missing.empty() ? "none" : missing}});
  }

  std::unique_ptr<UcxTransport> transport(new UcxTransport());
  transport->lib_ = std::move(lib);
  transport->version_ = version;
  transport->timeout_ = options.timeout;
  transport->path_setting_ = options.path;
  Library& l = *transport->lib_;

  // UCX reads its own settings (UCX_TLS, UCX_NET_DEVICES, ...) from the environment here.
  ucp_config_t* config = nullptr;
  ucs_status_t status = l.config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) return transport->Failure(-1, status, "ucp_config_read");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64 | UCP_FEATURE_WAKEUP;
  if (l.has_messages()) params.features |= UCP_FEATURE_AM;
  params.mt_workers_shared = 0;
  ucp_context_h context = nullptr;
  status = l.init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &context);
  l.config_release(config);
  if (status != UCS_OK) return transport->Failure(-1, status, "ucp_init");
  transport->context_ = context;

  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_MULTI;
  ucp_worker_h worker = nullptr;
  status = l.worker_create(context, &worker_params, &worker);
  if (status != UCS_OK) return transport->Failure(-1, status, "ucp_worker_create");
  transport->worker_ = worker;

  // The messages path needs active messages with room for our header.
  if (!l.has_messages()) {
    transport->path_reason_ = "UCX " + version + " has no active messages (ucp_am_send_nbx)";
  } else {
    ucp_worker_attr_t attributes{};
    attributes.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
    if (l.worker_query(worker, &attributes) != UCS_OK ||
        attributes.max_am_header < sizeof(WireHeader)) {
      transport->path_reason_ = "UCX's active message header is too small (max_am_header=" +
                                std::to_string(attributes.max_am_header) + ")";
    } else {
      HPS_RETURN_IF_ERROR(transport->RegisterHandler());
      transport->messages_supported_ = true;
    }
  }
  if (options.path == "messages" && !transport->messages_supported_) {
    return Status::Assertion(ErrorCode::kUnsupportedCapability,
                             "HYPER_PARALLEL_SHMEM_REMOTE_PATH=messages needs UCX active "
                             "messages, which this UCX cannot give",
                             {{"library", path}, {"version", version},
                              {"reason", transport->path_reason_}});
  }
  *out = std::move(transport);
  return Status::Ok();
}

Status UcxTransport::Failure(int pe, int ucs_status, const char* what) const {
  const auto status = static_cast<ucs_status_t>(ucs_status);
  std::vector<Field> fields;
  if (pe >= 0) fields.push_back({"pe", std::to_string(pe)});
  fields.push_back({"call", what});
  fields.push_back({"ucx_status", UcxStatusText(status, lib_ ? lib_->status_string : nullptr)});
  if (pe >= 0 && failed_ && failed_[pe].load(std::memory_order_acquire)) {
    return Status::Assertion(ErrorCode::kPeerLost,
                             "a remote peer was lost (its UCX endpoint reported an error)",
                             std::move(fields));
  }
  return Status::Assertion(ErrorCode::kBackendError, "a UCX call failed", std::move(fields));
}

Status UcxTransport::CheckPeer(int pe, const char* what) const {
  if (failed_[pe].load(std::memory_order_acquire)) {
    return Failure(pe, UCS_ERR_ENDPOINT_TIMEOUT, what);
  }
  return Status::Ok();
}

Status UcxTransport::Register(void* base, std::uint64_t bytes, std::string* blob) {
  Library& l = *lib_;
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = base;
  params.length = bytes;
  ucp_mem_h memh = nullptr;
  ucs_status_t status = l.mem_map(static_cast<ucp_context_h>(context_), &params, &memh);
  if (status != UCS_OK) return Failure(-1, status, "ucp_mem_map");
  memh_ = memh;
  segment_ = static_cast<std::byte*>(base);
  segment_bytes_ = bytes;
  void* rkey = nullptr;
  std::size_t rkey_bytes = 0;
  status = l.rkey_pack(static_cast<ucp_context_h>(context_), memh, &rkey, &rkey_bytes);
  if (status != UCS_OK) return Failure(-1, status, "ucp_rkey_pack");
  ucp_address_t* address = nullptr;
  std::size_t address_bytes = 0;
  status = l.worker_get_address(static_cast<ucp_worker_h>(worker_), &address, &address_bytes);
  if (status != UCS_OK) {
    l.rkey_buffer_release(rkey);
    return Failure(-1, status, "ucp_worker_get_address");
  }
  // [u64 base][u64 rkey bytes][u64 address bytes][u64 flags][rkey][address]
  const std::uint64_t header[4] = {reinterpret_cast<std::uint64_t>(base), rkey_bytes,
                                   address_bytes, messages_supported_ ? kAcceptsMessages : 0};
  blob->assign(reinterpret_cast<const char*>(header), sizeof header);
  blob->append(static_cast<const char*>(rkey), rkey_bytes);
  blob->append(reinterpret_cast<const char*>(address), address_bytes);
  l.rkey_buffer_release(rkey);
  l.worker_release_address(static_cast<ucp_worker_h>(worker_), address);
  return Status::Ok();
}

Status UcxTransport::WaitRequest(void* request, int pe, const char* what) {
  if (request == nullptr) return Status::Ok();  // completed at once
  if (UCS_PTR_IS_ERR(request)) return Failure(pe, UCS_PTR_STATUS(request), what);
  Library& l = *lib_;
  Status waited =
      Await([&] { return l.request_check_status(request) != UCS_INPROGRESS; }, pe, what);
  if (!waited.ok()) {
    l.request_free(request);  // released by UCX when it completes
    return waited;
  }
  const ucs_status_t status = l.request_check_status(request);
  l.request_free(request);
  return status == UCS_OK ? Status::Ok() : Failure(pe, status, what);
}

Status UcxTransport::Send(int pe, const WireHeader& header, const void* data,
                          std::uint64_t bytes, bool heartbeat) {
  HPS_RETURN_IF_ERROR(CheckPeer(pe, "ucp_am_send_nbx"));
  HPS_RETURN_IF_ERROR(Connected(pe));
  WireHeader sent = header;
  if (!heartbeat) MarkFenced(pe, &sent);
  ucp_request_param_t params{};
  void* request =
      lib_->am_send_nbx(static_cast<ucp_ep_h>(peers_[pe].ep.load(std::memory_order_acquire)),
                        kUcxMessageId, &sent, sizeof sent, data, bytes, &params);
  (heartbeat ? counters_.heartbeats : counters_.messages).fetch_add(1, std::memory_order_relaxed);
  // The header and the data stay ours until the request completes; a bulk one streams.
  const bool bulk = request != nullptr && !UCS_PTR_IS_ERR(request) && bytes >= kBulkBytes;
  if (bulk) streaming_.fetch_add(1, std::memory_order_relaxed);
  Status status = WaitRequest(request, pe, "ucp_am_send_nbx");
  if (bulk) streaming_.fetch_sub(1, std::memory_order_relaxed);
  return status;
}

void UcxTransport::Post(int pe, const WireHeader& header, const void* data,
                        std::uint64_t bytes, bool heartbeat) {
  if (failed_[pe].load(std::memory_order_acquire)) return;  // nobody to tell
  void* ep = peers_[pe].ep.load(std::memory_order_acquire);
  if (ep == nullptr) {
    // Possibly inside progress, where no endpoint may be made: the thread that progressed
    // sends it once out (SendQueued).
    MutexLock lock(&queued_mutex_);
    queued_.push_back(Queued{pe, header, data, bytes, heartbeat});
    has_queued_.store(true, std::memory_order_release);
    return;
  }
  auto* posted = new Posted{header, 0, 0, lib_->request_free};
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  params.cb.send = ReleasePosted;
  params.user_data = posted;
  // `data` is this PE's segment, which outlives every posted message (Close flushes first).
  void* request = lib_->am_send_nbx(static_cast<ucp_ep_h>(ep), kUcxMessageId, &posted->header,
                                    sizeof posted->header, data, bytes, &params);
  (heartbeat ? counters_.heartbeats : counters_.messages).fetch_add(1, std::memory_order_relaxed);
  if (request == nullptr || UCS_PTR_IS_ERR(request)) delete posted;
}

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

void UcxTransport::Close() {
  if (!lib_) return;
  Library& l = *lib_;
  if (thread_.joinable()) {
    stopping_.store(true, std::memory_order_release);
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
  stopping_.store(true, std::memory_order_release);
  if (stop_fd_ >= 0) ::close(stop_fd_);
  stop_fd_ = -1;
  auto* worker = static_cast<ucp_worker_h>(worker_);
  if (worker != nullptr && !peers_.empty()) {
    // Lands what is still in flight; operations to a lost peer complete with its error. A
    // short bound: a silent host never answers.
    const auto timeout = timeout_;
    timeout_ = std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(2));
    // Farewell: every peer with an endpoint either way learns that this PE's connections are
    // about to close normally (after its last heartbeat, on the same endpoint), so it does not
    // count it lost. Messages queued for a peer without an endpoint go first.
    SendQueued();
    if (liveness_.remote_beat_offset) {
      for (Peer& peer : peers_) {
        if (!peer.reachable || failed_[peer.pe].load(std::memory_order_acquire)) continue;
        if (peer.ep.load(std::memory_order_acquire) == nullptr &&
            !peer.contacted.load(std::memory_order_acquire)) {
          continue;
        }
        (void)Transmit(peer.pe, 0, nullptr, 0,
                       RemoteSignal{liveness_.remote_beat_offset(peer.pe), 8, SignalAction::kSet,
                                    static_cast<std::int64_t>(kFarewell)},
                       Audience::kTarget, /*heartbeat=*/true);
      }
    }
    (void)Flush();
    // Every posted message and reply has left (UCX 1.13 aborts a target whose reply endpoint
    // is gone, so nothing may be outstanding when the endpoints close).
    {
      ucp_request_param_t params{};
      void* request = l.worker_flush_nbx(worker, &params);
      (void)WaitRequest(request, -1, "ucp_worker_flush_nbx");
    }
    timeout_ = timeout;
    for (Peer& peer : peers_) {
      if (peer.rkey != nullptr) l.rkey_destroy(static_cast<ucp_rkey_h>(peer.rkey));
      peer.rkey = nullptr;
      void* ep = peer.ep.load(std::memory_order_acquire);
      if (ep == nullptr) continue;
      // Force: a flushing close waits for the peer, which may be gone or closing too.
      ucp_request_param_t params{};
      params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      params.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void* request = l.ep_close_nbx(static_cast<ucp_ep_h>(ep), &params);
      if (request != nullptr && !UCS_PTR_IS_ERR(request)) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (l.request_check_status(request) == UCS_INPROGRESS &&
               std::chrono::steady_clock::now() < deadline) {
          l.worker_progress(worker);
        }
        l.request_free(request);
      }
      peer.ep.store(nullptr, std::memory_order_release);
    }
  }
  {
    // Deferred rendezvous descriptors belong to the worker: let it go with them.
    MutexLock lock(&inbound_mutex_);
    inbound_.clear();
  }
  if (sleep_epoll_ >= 0) ::close(sleep_epoll_);
  sleep_epoll_ = -1;
  wake_.Close();
  if (own_bell_ != nullptr) own_bell_->wake_name.store(0, std::memory_order_relaxed);
  if (memh_ != nullptr) {
    l.mem_unmap(static_cast<ucp_context_h>(context_), static_cast<ucp_mem_h>(memh_));
  }
  memh_ = nullptr;
  bool lost_any = false;
  for (std::size_t pe = 0; pe < peers_.size(); ++pe) {
    lost_any = lost_any || failed_[pe].load(std::memory_order_acquire);
  }
  if (lost_any) {
    // After a lost peer UCX 1.13 may abort in ucp_worker_destroy, deleting an endpoint it made
    // itself for the lost peer's connection (ucp_ep.c: "refcounts.create == 1" failed; seen in
    // the scale-out loss tests): the worker, its context and the library are left to the
    // process's exit, as the rest of a terminal lifecycle's network state (kept reachable, so
    // a leak checker does not count them).
    struct Abandoned {
      std::unique_ptr<Library> lib;
      void* worker;
      void* context;
    };
    static auto* abandoned = new std::vector<Abandoned>();
    static Mutex abandoned_mutex;
    {
      MutexLock lock(&abandoned_mutex);
      abandoned->push_back(Abandoned{std::move(lib_), worker_, context_});
    }
    worker_ = nullptr;
    context_ = nullptr;
    peers_.clear();
    return;
  }
  if (worker != nullptr) l.worker_destroy(worker);
  worker_ = nullptr;
  if (context_ != nullptr) l.cleanup(static_cast<ucp_context_h>(context_));
  context_ = nullptr;
  peers_.clear();
  lib_.reset();
}

RemoteCounters UcxTransport::counters() const { return counters_.Snapshot(); }

#else  // !HPS_HAVE_UCX_HEADERS

// Without UCX's headers there is no UcxTransport to make: Load fails, naming the cause, and
// nothing else of the class exists (no operation can pretend to have sent anything).
Status UcxTransport::Load(const Options&, std::unique_ptr<RemoteTransport>*) {
  return Status::Assertion(ErrorCode::kUnsupportedCapability,
                           "this build has no UCX support (it was compiled without UCX's headers, "
                           "libucx-dev); PEs on other hosts cannot be reached",
                           {});
}

#endif

}  // namespace hyper_parallel::shmem::transport
