// The ucp entry points UcxTransport uses, resolved with dlsym from the library loaded at run
// time (ucx_transport.h). Private to the transport's sources: only they include UCX's headers,
// and only when the build found them (HPS_HAVE_UCX_HEADERS).
#pragma once

#if __has_include(<ucp/api/ucp.h>)
#include <ucp/api/ucp.h>
#define HPS_HAVE_UCX_HEADERS 1
#else
#define HPS_HAVE_UCX_HEADERS 0
#endif

#include <dlfcn.h>

#include <string>
#include <thread>

#include "backends/transport/ucx/ucx_transport.h"

namespace hyper_parallel::shmem::transport {

#if HPS_HAVE_UCX_HEADERS

// A library loaded once per process stays loaded (RTLD_NODELETE): UCX registers global state
// (memory hooks, signal handlers) that must not be unloaded under it.
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
  // The messages path (ucp 1.11 and newer); null when this UCX lacks them.
  decltype(&ucp_worker_set_am_recv_handler) set_am_recv_handler = nullptr;
  decltype(&ucp_am_send_nbx) am_send_nbx = nullptr;
  decltype(&ucp_am_recv_data_nbx) am_recv_data_nbx = nullptr;
  decltype(&ucp_am_data_release) am_data_release = nullptr;
  decltype(&ucp_worker_query) worker_query = nullptr;
  decltype(&ucp_ep_print_info) ep_print_info = nullptr;

  bool has_messages() const {
    return set_am_recv_handler != nullptr && am_send_nbx != nullptr &&
           am_recv_data_nbx != nullptr && am_data_release != nullptr && worker_query != nullptr;
  }

  ~Library() {
    if (handle != nullptr) ::dlclose(handle);
  }
};

// A get on the messages path waiting for its reply (the reply's handler fills it).
struct UcxTransport::PendingGet {
  void* destination = nullptr;
  std::uint64_t bytes = 0;
  std::atomic<bool> done{false};
  std::atomic<int> status{UCS_OK};
};

// What a peer's blob says about it besides its address ([u64 flags]).
inline constexpr std::uint64_t kAcceptsMessages = 1;

// A fire-and-forget operation's state (an atomic's operand and reply, a posted message's
// header): released by its completion callback, or at once when it completed immediately.
struct Posted {
  WireHeader header;
  std::uint64_t operand = 0;
  std::uint64_t reply = 0;
  void (*request_free)(void*) = nullptr;
};

inline void ReleasePosted(void* request, ucs_status_t, void* user_data) {
  auto* posted = static_cast<Posted*>(user_data);
  posted->request_free(request);  // a completion callback may free its request
  delete posted;
}

/// The active message id of the messages path (one handler, wire.h's kinds).
inline constexpr unsigned kUcxMessageId = 0x4853;  // "HS"

// A send at least this large streams while it is in flight (Arm keeps waiters polling).
inline constexpr std::uint64_t kBulkBytes = 16 << 10;
// A collective's or a kernel's block (Begin) up to this size goes eager: a rendezvous would hold
// the sender until the target's progress pulls it (docs/scale-out.md, "The messages path").
inline constexpr std::uint64_t kEagerBlockBytes = 256 << 10;


inline std::string UcxStatusText(ucs_status_t status, const char* (*name)(ucs_status_t)) {
  return name != nullptr ? std::string(name(status)) : std::to_string(static_cast<int>(status));
}

// The transport's own waits: progress while spinning, then sleep on the worker's events (or,
// when another thread holds that role, on this PE's doorbell, which progress rings), as every
// wait of the PE does (doorbell.h). Bounded by the timeout; gives up once `pe` (when >= 0) is
// lost or the latch is set.
template <class Done>
Status UcxTransport::Await(Done&& done, int pe, const char* what) {
  if (done()) return Status::Ok();
  Waiting waiting(this);
  auto lost = [&] { return pe >= 0 && failed_[pe].load(std::memory_order_acquire); };
  auto ready = [&] {
    Poll();
    return done() || lost();
  };
  WaitOutcome outcome = WaitOutcome::kTimedOut;
  if (own_bell_ != nullptr) {
    outcome = WaitUntil<CallSite::kHostThread>(own_bell_, ready, timeout_, wait_policy_, abort_,
                                               NoBlockingNotice(), this);
  } else {  // before Start (a failed init's close): spin and yield
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (;;) {
      if (ready()) {
        outcome = WaitOutcome::kReady;
        break;
      }
      if (abort_ != nullptr && abort_->load(std::memory_order_acquire)) {
        outcome = WaitOutcome::kAborted;
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::yield();
    }
  }
  if (done()) return Status::Ok();
  if (lost()) return Failure(pe, UCS_ERR_ENDPOINT_TIMEOUT, what);
  if (outcome == WaitOutcome::kAborted) {
    return Status::Assertion(ErrorCode::kPeerLost,
                             "a remote operation was abandoned: a peer was lost",
                             {{"pe", std::to_string(pe)}, {"call", what}});
  }
  return Status::Assertion(ErrorCode::kTimeout, "a remote operation did not complete",
                           {{"pe", std::to_string(pe)}, {"call", what},
                            {"timeout_ms", std::to_string(timeout_.count())}});
}

#endif

}  // namespace hyper_parallel::shmem::transport
