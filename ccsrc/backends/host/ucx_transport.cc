#include "backends/host/ucx_transport.h"

#include <dlfcn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#if __has_include(<ucp/api/ucp.h>)
#include <ucp/api/ucp.h>
#define HPS_HAVE_UCX_HEADERS 1
#else
#define HPS_HAVE_UCX_HEADERS 0
#endif

namespace hyper_parallel::shmem::host {

#if HPS_HAVE_UCX_HEADERS

namespace {

// The oldest UCX whose ucp API (the *_nbx calls, ucp_ep_close_nbx) this transport uses.
constexpr unsigned kMinMajor = 1;
constexpr unsigned kMinMinor = 10;

std::string Text(ucs_status_t status, const char* (*name)(ucs_status_t)) {
  return name != nullptr ? std::string(name(status)) : std::to_string(static_cast<int>(status));
}

// A fire-and-forget atomic's operand and reply: released by the completion callback (or at
// once when the operation completed immediately).
struct AmoBuffers {
  std::uint64_t operand = 0;
  std::uint64_t reply = 0;
  void (*request_free)(void*) = nullptr;
};

void ReleaseAmo(void* request, ucs_status_t, void* user_data);

}  // namespace

// The ucp entry points, resolved with dlsym from the library loaded at run time.
struct UcxTransport::Library {
  void* handle = nullptr;
  decltype(&ucp_get_version) get_version = nullptr;
  decltype(&ucp_config_read) config_read = nullptr;
  decltype(&ucp_config_release) config_release = nullptr;
  decltype(&ucp_init_version) init_version = nullptr;
  decltype(&ucp_cleanup) cleanup = nullptr;
  decltype(&ucp_worker_create) worker_create = nullptr;
  decltype(&ucp_worker_destroy) worker_destroy = nullptr;
  decltype(&ucp_worker_get_address) worker_get_address = nullptr;
  decltype(&ucp_worker_release_address) worker_release_address = nullptr;
  decltype(&ucp_worker_progress) worker_progress = nullptr;
  decltype(&ucp_worker_arm) worker_arm = nullptr;
  decltype(&ucp_worker_get_efd) worker_get_efd = nullptr;
  decltype(&ucp_worker_fence) worker_fence = nullptr;
  decltype(&ucp_worker_flush_nbx) worker_flush_nbx = nullptr;
  decltype(&ucp_ep_create) ep_create = nullptr;
  decltype(&ucp_ep_close_nbx) ep_close_nbx = nullptr;
  decltype(&ucp_mem_map) mem_map = nullptr;
  decltype(&ucp_mem_unmap) mem_unmap = nullptr;
  decltype(&ucp_rkey_pack) rkey_pack = nullptr;
  decltype(&ucp_rkey_buffer_release) rkey_buffer_release = nullptr;
  decltype(&ucp_ep_rkey_unpack) ep_rkey_unpack = nullptr;
  decltype(&ucp_rkey_destroy) rkey_destroy = nullptr;
  decltype(&ucp_put_nbx) put_nbx = nullptr;
  decltype(&ucp_get_nbx) get_nbx = nullptr;
  decltype(&ucp_atomic_op_nbx) atomic_op_nbx = nullptr;
  decltype(&ucp_request_check_status) request_check_status = nullptr;
  decltype(&ucp_request_free) request_free = nullptr;
  const char* (*status_string)(ucs_status_t) = nullptr;

  ~Library() {
    if (handle != nullptr) ::dlclose(handle);
  }
};

namespace {

// A library loaded once per process stays loaded: UCX registers global state (memory hooks,
// signal handlers) that must not be unloaded under it.
template <class T>
bool Resolve(void* handle, const char* name, T* out, std::string* missing) {
  *out = reinterpret_cast<T>(::dlsym(handle, name));
  if (*out == nullptr) *missing += (missing->empty() ? "" : ",") + std::string(name);
  return *out != nullptr;
}

void ReleaseAmo(void* request, ucs_status_t, void* user_data) {
  auto* buffers = static_cast<AmoBuffers*>(user_data);
  buffers->request_free(request);  // a completion callback may free its request
  delete buffers;
}

}  // namespace

UcxTransport::~UcxTransport() { Close(); }

Status UcxTransport::Load(const std::string& library, std::chrono::milliseconds timeout,
                          std::unique_ptr<UcxTransport>* out) {
  const std::string path = library.empty() ? "libucp.so.0" : library;
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
  transport->timeout_ = timeout;
  Library& l = *transport->lib_;

  // UCX reads its own settings (UCX_TLS, UCX_NET_DEVICES, ...) from the environment here.
  ucp_config_t* config = nullptr;
  ucs_status_t status = l.config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) return transport->Failure(-1, status, "ucp_config_read");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64 | UCP_FEATURE_WAKEUP;
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
  *out = std::move(transport);
  return Status::Ok();
}

Status UcxTransport::Failure(int pe, int ucs_status, const char* what) const {
  const auto status = static_cast<ucs_status_t>(ucs_status);
  std::vector<Field> fields;
  if (pe >= 0) fields.push_back({"pe", std::to_string(pe)});
  fields.push_back({"call", what});
  fields.push_back({"ucx_status", Text(status, lib_ ? lib_->status_string : nullptr)});
  if (pe >= 0 && failed_ && failed_[pe].load(std::memory_order_acquire)) {
    return Status::Assertion(ErrorCode::kPeerLost,
                             "a remote peer was lost (its UCX endpoint reported an error)",
                             std::move(fields));
  }
  return Status::Assertion(ErrorCode::kBackendError, "a UCX call failed", std::move(fields));
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
  // [u64 base][u64 rkey bytes][u64 address bytes][rkey][address]
  const std::uint64_t header[3] = {reinterpret_cast<std::uint64_t>(base), rkey_bytes,
                                   address_bytes};
  blob->assign(reinterpret_cast<const char*>(header), sizeof header);
  blob->append(static_cast<const char*>(rkey), rkey_bytes);
  blob->append(reinterpret_cast<const char*>(address), address_bytes);
  l.rkey_buffer_release(rkey);
  l.worker_release_address(static_cast<ucp_worker_h>(worker_), address);
  return Status::Ok();
}

void UcxTransport::OnEndpointError(void* arg, void* /*ep*/, int status) {
  auto* peer = static_cast<Peer*>(arg);
  UcxTransport* self = peer->owner;
  self->failed_[peer->pe].store(true, std::memory_order_release);
  // A peer that said farewell closed normally (its connections go with it): not a loss.
  if (self->Departed(peer->pe)) return;
  if (self->lost_ && !self->stopping_.load(std::memory_order_acquire)) {
    self->lost_(peer->pe, "its UCX endpoint reported " +
                              Text(static_cast<ucs_status_t>(status), self->lib_->status_string));
  }
}

Status UcxTransport::Connect(int rank, const std::vector<std::string>& blobs,
                             const std::vector<bool>& remote, LostFn lost) {
  Library& l = *lib_;
  rank_ = rank;
  lost_ = std::move(lost);
  peers_.assign(blobs.size(), Peer{});
  failed_ = std::make_unique<std::atomic<bool>[]>(blobs.size());
  for (std::size_t pe = 0; pe < blobs.size(); ++pe) {
    Peer& peer = peers_[pe];
    peer.pe = static_cast<int>(pe);
    peer.owner = this;
    if (!remote[pe]) continue;
    const std::string& blob = blobs[pe];
    std::uint64_t header[3] = {};
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
    const char* rkey = blob.data() + sizeof header;
    const char* address = rkey + header[1];
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(address);
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = [](void* arg, ucp_ep_h ep, ucs_status_t status) {
      OnEndpointError(arg, ep, static_cast<int>(status));
    };
    params.err_handler.arg = &peer;
    ucp_ep_h ep = nullptr;
    ucs_status_t status = l.ep_create(static_cast<ucp_worker_h>(worker_), &params, &ep);
    if (status != UCS_OK) return Failure(static_cast<int>(pe), status, "ucp_ep_create");
    peer.ep = ep;
    ucp_rkey_h key = nullptr;
    status = l.ep_rkey_unpack(ep, rkey, &key);
    if (status != UCS_OK) return Failure(static_cast<int>(pe), status, "ucp_ep_rkey_unpack");
    peer.rkey = key;
  }
  return Status::Ok();
}

Status UcxTransport::WaitRequest(void* request, int pe, const char* what) {
  if (request == nullptr) return Status::Ok();  // completed at once
  if (UCS_PTR_IS_ERR(request)) return Failure(pe, UCS_PTR_STATUS(request), what);
  Library& l = *lib_;
  auto* worker = static_cast<ucp_worker_h>(worker_);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (std::uint64_t spins = 0;; ++spins) {
    const ucs_status_t status = l.request_check_status(request);
    if (status != UCS_INPROGRESS) {
      l.request_free(request);
      return status == UCS_OK ? Status::Ok() : Failure(pe, status, what);
    }
    if (l.worker_progress(worker) != 0 && activity_) activity_();
    if ((spins & 1023) == 1023) {
      if (abort_ != nullptr && abort_->load(std::memory_order_acquire)) {
        l.request_free(request);  // the lifecycle is over: a lost peer never answers
        return Status::Assertion(ErrorCode::kPeerLost,
                                 "a remote operation was abandoned: a peer was lost",
                                 {{"pe", std::to_string(pe)}, {"call", what}});
      }
      if (std::chrono::steady_clock::now() > deadline) {
        l.request_free(request);  // released by UCX when it completes
        return Status::Assertion(ErrorCode::kTimeout, "a remote operation did not complete",
                                 {{"pe", std::to_string(pe)}, {"call", what},
                                  {"timeout_ms", std::to_string(timeout_.count())}});
      }
      std::this_thread::yield();
    }
  }
}

Status UcxTransport::Put(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes) {
  Peer& peer = peers_[pe];
  ucp_request_param_t params{};
  void* request = lib_->put_nbx(static_cast<ucp_ep_h>(peer.ep), source, bytes, peer.base + offset,
                                static_cast<ucp_rkey_h>(peer.rkey), &params);
  puts_.fetch_add(1, std::memory_order_relaxed);
  bytes_put_.fetch_add(bytes, std::memory_order_relaxed);
  return WaitRequest(request, pe, "ucp_put_nbx");
}

Status UcxTransport::Get(int pe, void* destination, std::uint64_t offset, std::uint64_t bytes) {
  Peer& peer = peers_[pe];
  ucp_request_param_t params{};
  void* request = lib_->get_nbx(static_cast<ucp_ep_h>(peer.ep), destination, bytes,
                                peer.base + offset, static_cast<ucp_rkey_h>(peer.rkey), &params);
  gets_.fetch_add(1, std::memory_order_relaxed);
  bytes_got_.fetch_add(bytes, std::memory_order_relaxed);
  return WaitRequest(request, pe, "ucp_get_nbx");
}

Status UcxTransport::Atomic(int pe, std::uint64_t offset, int width, bool set, std::int64_t value) {
  Library& l = *lib_;
  Peer& peer = peers_[pe];
  if (failed_[pe].load(std::memory_order_acquire)) {
    return Failure(pe, UCS_ERR_ENDPOINT_TIMEOUT, "ucp_atomic_op_nbx");
  }
  ucs_status_t fenced = l.worker_fence(static_cast<ucp_worker_h>(worker_));
  if (fenced != UCS_OK) return Failure(pe, fenced, "ucp_worker_fence");
  // A SWAP (a set) is a fetching operation: its target replies into buffers->reply. It is not
  // waited for either (that would add a round trip to every set); Close flushes before it
  // closes the endpoints, so no reply outlives them (UCX 1.13 aborts a target whose reply
  // endpoint is gone).
  auto* buffers = new AmoBuffers();
  buffers->request_free = l.request_free;
  if (width == 4) {
    const auto word = static_cast<std::uint32_t>(static_cast<std::int32_t>(value));
    std::memcpy(&buffers->operand, &word, sizeof word);
  } else {
    buffers->operand = static_cast<std::uint64_t>(value);
  }
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA;
  params.datatype = ucp_dt_make_contig(static_cast<std::size_t>(width));
  params.cb.send = ReleaseAmo;
  params.user_data = buffers;
  if (set) {
    params.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    params.reply_buffer = &buffers->reply;
  }
  void* request =
      l.atomic_op_nbx(static_cast<ucp_ep_h>(peer.ep), set ? UCP_ATOMIC_OP_SWAP : UCP_ATOMIC_OP_ADD,
                      &buffers->operand, 1, peer.base + offset,
                      static_cast<ucp_rkey_h>(peer.rkey), &params);
  atomics_.fetch_add(1, std::memory_order_relaxed);
  if (request == nullptr) {  // completed at once: the callback is not called
    delete buffers;
    return Status::Ok();
  }
  if (UCS_PTR_IS_ERR(request)) {
    delete buffers;
    return Failure(pe, UCS_PTR_STATUS(request), "ucp_atomic_op_nbx");
  }
  // Not waited for: the operation is ordered after the fence, and Flush (or the next fence)
  // waits for it. Its completion callback frees the request and the buffers.
  return Status::Ok();
}

Status UcxTransport::PutWord(int pe, std::uint64_t offset, std::uint64_t value) {
  if (failed_[pe].load(std::memory_order_acquire)) {
    return Failure(pe, UCS_ERR_ENDPOINT_TIMEOUT, "ucp_put_nbx");
  }
  ucs_status_t fenced = lib_->worker_fence(static_cast<ucp_worker_h>(worker_));
  if (fenced != UCS_OK) return Failure(pe, fenced, "ucp_worker_fence");
  return Put(pe, offset, &value, sizeof value);
}

Status UcxTransport::Flush() {
  ucp_request_param_t params{};
  void* request = lib_->worker_flush_nbx(static_cast<ucp_worker_h>(worker_), &params);
  return WaitRequest(request, -1, "ucp_worker_flush_nbx");
}

void UcxTransport::Poll() {
  if (worker_ == nullptr) return;
  if (lib_->worker_progress(static_cast<ucp_worker_h>(worker_)) != 0 && activity_) activity_();
}

Status UcxTransport::Start(ActivityFn activity, Liveness liveness,
                           const std::atomic<bool>* abort) {
  abort_ = abort;
  activity_ = std::move(activity);
  liveness_ = std::move(liveness);
  const auto now = std::chrono::steady_clock::now();
  for (Peer& peer : peers_) {
    if (peer.ep == nullptr) continue;
    peer.last_beat = liveness_.observed_beat ? liveness_.observed_beat(peer.pe) : 0;
    peer.last_change = now;
  }
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) {
    return Status::Assertion(ErrorCode::kBackendError, "eventfd failed",
                             {{"errno", std::strerror(errno)}});
  }
  stopping_.store(false);
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void UcxTransport::Heartbeat(std::chrono::steady_clock::time_point now) {
  if (!liveness_.remote_beat_offset || !liveness_.observed_beat) return;
  for (Peer& peer : peers_) {
    if (peer.ep == nullptr || failed_[peer.pe].load(std::memory_order_acquire)) continue;
    if (Departed(peer.pe)) continue;
    (void)Atomic(peer.pe, liveness_.remote_beat_offset(peer.pe), 8, false, 1);
    const std::uint64_t beat = liveness_.observed_beat(peer.pe);
    if (beat != peer.last_beat) {
      peer.last_beat = beat;
      peer.last_change = now;
    } else if (now - peer.last_change > liveness_.silence) {
      failed_[peer.pe].store(true, std::memory_order_release);
      if (lost_) {
        lost_(peer.pe, "no heartbeat from its host for " +
                           std::to_string(liveness_.silence.count()) +
                           " ms (HYPER_PARALLEL_SHMEM_PEER_SILENCE_MS)");
      }
    }
  }
}

void UcxTransport::Run() {
  Library& l = *lib_;
  auto* worker = static_cast<ucp_worker_h>(worker_);
  int event_fd = -1;
  const int epoll = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll >= 0 && l.worker_get_efd(worker, &event_fd) == UCS_OK) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = event_fd;
    ::epoll_ctl(epoll, EPOLL_CTL_ADD, event_fd, &event);
  }
  if (epoll >= 0) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = stop_fd_;
    ::epoll_ctl(epoll, EPOLL_CTL_ADD, stop_fd_, &event);
  }
  const auto beat_every =
      std::max(std::chrono::milliseconds(10), liveness_.silence / 8);
  auto next_beat = std::chrono::steady_clock::now();
  while (!stopping_.load(std::memory_order_acquire)) {
    while (l.worker_progress(worker) != 0) {
    }
    if (activity_) activity_();
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_beat) {
      Heartbeat(now);
      next_beat = now + beat_every;
    }
    if (l.worker_arm(worker) == UCS_ERR_BUSY) continue;
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
        next_beat - std::chrono::steady_clock::now());
    epoll_event events[2];
    if (epoll >= 0 && event_fd >= 0) {
      ::epoll_wait(epoll, events, 2, static_cast<int>(std::max<long>(1, wait.count())));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (epoll >= 0) ::close(epoll);
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
  if (worker != nullptr) {
    // Lands what is still in flight; operations to a lost peer complete with its error. A
    // short bound: a silent host never answers.
    const auto timeout = timeout_;
    timeout_ = std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(2));
    // Farewell: every peer learns that this PE's connections are about to close normally
    // (after its last heartbeat, on the same endpoint), so it does not count it lost.
    if (liveness_.remote_beat_offset) {
      for (Peer& peer : peers_) {
        if (peer.ep == nullptr || failed_[peer.pe].load(std::memory_order_acquire)) continue;
        (void)PutWord(peer.pe, liveness_.remote_beat_offset(peer.pe), kFarewell);
      }
    }
    (void)Flush();
    timeout_ = timeout;
    for (Peer& peer : peers_) {
      if (peer.rkey != nullptr) l.rkey_destroy(static_cast<ucp_rkey_h>(peer.rkey));
      peer.rkey = nullptr;
      if (peer.ep == nullptr) continue;
      // Force: a flushing close waits for the peer, which may be gone or closing too.
      ucp_request_param_t params{};
      params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      params.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void* request = l.ep_close_nbx(static_cast<ucp_ep_h>(peer.ep), &params);
      if (request != nullptr && !UCS_PTR_IS_ERR(request)) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (l.request_check_status(request) == UCS_INPROGRESS &&
               std::chrono::steady_clock::now() < deadline) {
          l.worker_progress(worker);
        }
        l.request_free(request);
      }
      peer.ep = nullptr;
    }
  }
  if (memh_ != nullptr) l.mem_unmap(static_cast<ucp_context_h>(context_), static_cast<ucp_mem_h>(memh_));
  memh_ = nullptr;
  if (worker != nullptr) l.worker_destroy(worker);
  worker_ = nullptr;
  if (context_ != nullptr) l.cleanup(static_cast<ucp_context_h>(context_));
  context_ = nullptr;
  peers_.clear();
  lib_.reset();
}

bool UcxTransport::Departed(int pe) const {
  return liveness_.observed_beat && liveness_.observed_beat(pe) == kFarewell;
}

RemoteCounters UcxTransport::counters() const {
  RemoteCounters counters;
  counters.puts = puts_.load(std::memory_order_relaxed);
  counters.gets = gets_.load(std::memory_order_relaxed);
  counters.atomics = atomics_.load(std::memory_order_relaxed);
  counters.bytes_put = bytes_put_.load(std::memory_order_relaxed);
  counters.bytes_got = bytes_got_.load(std::memory_order_relaxed);
  return counters;
}

int UcxTransport::endpoints() const {
  int count = 0;
  for (const Peer& peer : peers_) count += peer.ep != nullptr ? 1 : 0;
  return count;
}

#else  // !HPS_HAVE_UCX_HEADERS

struct UcxTransport::Library {};

UcxTransport::~UcxTransport() = default;

Status UcxTransport::Load(const std::string&, std::chrono::milliseconds,
                          std::unique_ptr<UcxTransport>*) {
  return Status::Assertion(ErrorCode::kUnsupportedCapability,
                           "this build has no UCX support (it was compiled without UCX's headers, "
                           "libucx-dev); PEs on other hosts cannot be reached",
                           {});
}
Status UcxTransport::Register(void*, std::uint64_t, std::string*) { return Status::Ok(); }
Status UcxTransport::Connect(int, const std::vector<std::string>&, const std::vector<bool>&, LostFn) {
  return Status::Ok();
}
Status UcxTransport::Start(ActivityFn, Liveness, const std::atomic<bool>*) { return Status::Ok(); }
void UcxTransport::Close() {}
Status UcxTransport::Put(int, std::uint64_t, const void*, std::uint64_t) { return Status::Ok(); }
Status UcxTransport::Get(int, void*, std::uint64_t, std::uint64_t) { return Status::Ok(); }
Status UcxTransport::Atomic(int, std::uint64_t, int, bool, std::int64_t) { return Status::Ok(); }
Status UcxTransport::Flush() { return Status::Ok(); }
Status UcxTransport::PutWord(int, std::uint64_t, std::uint64_t) { return Status::Ok(); }
void UcxTransport::Poll() {}
RemoteCounters UcxTransport::counters() const { return {}; }
int UcxTransport::endpoints() const { return 0; }

#endif

}  // namespace hyper_parallel::shmem::host
