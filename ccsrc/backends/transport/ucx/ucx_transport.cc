// UcxTransport: loading UCX, registering the segment, sending, closing (ucx_transport.h). The
// operations a PE issues: operations.cc; endpoints and their paths, and losses passed on:
// endpoints.cc; progress and waiting: progress.cc; what arrives on the messages path:
// messages.cc; atomics, fences and non-blocking operations: atomics.cc.
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
