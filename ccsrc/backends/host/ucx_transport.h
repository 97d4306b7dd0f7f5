// UcxTransport: how the host backend reaches PEs it cannot map (docs/scale-out.md).
//
// PEs on the same host map each other's segments and use plain loads and stores. A PE on
// another host (or every peer, with HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all) is reached through
// UCX's ucp API instead: this PE's whole segment (heap and control block) is registered with
// ucp_mem_map, and a peer writes into it with ucp_put_nbx, reads with ucp_get_nbx, and updates
// its words with ucp_atomic_op_nbx (64- or 32-bit ADD, or SWAP for a set), after a
// ucp_worker_fence, so that a signal lands after every earlier put of this PE. No network code
// is written here: UCX owns the sockets, the wire-up and the reliability.
//
// UCX is loaded at run time (dlopen of libucp.so.0, or HYPER_PARALLEL_SHMEM_UCX_LIBRARY): the
// package builds, installs and runs without it, and only a job that has remote peers needs it.
//
// Progress: over TCP (and with emulated atomics) a remote operation lands only while the
// target drives progress. One progress thread per PE sleeps on the worker's event fd
// (ucp_worker_arm + epoll) and progresses the worker whenever something arrives, then runs
// `activity` (the host backend rings this PE's doorbell, so a waiter asleep on its futex
// wakes). A spinning waiter also calls Poll(). So a remote put or signal completes while the
// target computes outside the library.
//
// Liveness: every endpoint is created with UCP_ERR_HANDLING_MODE_PEER and an error callback,
// which latches PEER_LOST for that PE (a peer process that exits closes its connections: the
// callback fires at once). A host that goes silent (link down, hung) is noticed by heartbeats:
// the progress thread adds 1 to a word of every remote peer every silence/8, and declares a
// peer lost when its word here has not moved for `silence` (HYPER_PARALLEL_SHMEM_PEER_SILENCE_MS).
// A PE that closes normally first sets its word at every peer to kFarewell (after its last
// heartbeat, on the same endpoint): the error its closing connections then raise is no loss.
//
// Thread-safety: the worker is created UCS_THREAD_MODE_MULTI; Put, Get, Atomic, Fence, Flush
// and Poll may be called from any thread at once (stream executors, copy workers, the
// progress thread). Load, Register, Connect, Start and Close are called from one thread while
// nothing else runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"

namespace hyper_parallel::shmem::host {

/// What remote operations a PE made, for debug_state() (per transport, since init).
struct RemoteCounters {
  std::uint64_t puts = 0;
  std::uint64_t gets = 0;
  std::uint64_t atomics = 0;
  std::uint64_t bytes_put = 0;
  std::uint64_t bytes_got = 0;
};

class UcxTransport {
 public:
  /// Called (from any thread) when peer `pe` is lost; `reason` says how it was noticed.
  using LostFn = std::function<void(int pe, const std::string& reason)>;
  /// Called after progress handled something (a remote write may have landed here).
  using ActivityFn = std::function<void()>;

  /// The heartbeat word's value once its writer closed normally (it says farewell).
  static constexpr std::uint64_t kFarewell = ~0ull;

  struct Liveness {
    std::chrono::milliseconds silence{3000};
    /// The segment offset, at peer `pe`, of the word this PE's heartbeats add to.
    std::function<std::uint64_t(int pe)> remote_beat_offset;
    /// This PE's word that peer `pe`'s heartbeats add to.
    std::function<std::uint64_t(int pe)> observed_beat;
  };

  ~UcxTransport();
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  /// Loads UCX from `library` (empty: libucp.so.0) and creates a context and a worker.
  /// UNSUPPORTED_CAPABILITY names what is missing (the library, a symbol, a too old version).
  static Status Load(const std::string& library, std::chrono::milliseconds timeout,
                     std::unique_ptr<UcxTransport>* out);

  /// The loaded library's version ("1.13.1").
  const std::string& version() const { return version_; }

  /// Registers this PE's segment [base, base + bytes) and returns what a peer needs to reach
  /// it: the worker address, the packed remote key and the base address.
  Status Register(void* base, std::uint64_t bytes, std::string* blob);

  /// Creates an endpoint to every PE with remote[pe] from its blob. No traffic yet.
  Status Connect(int rank, const std::vector<std::string>& blobs, const std::vector<bool>& remote,
                 LostFn lost);

  /// Starts the progress thread (and the heartbeats). `activity` runs after progress. Waits
  /// for remote completion give up once `abort` is set (this PE's failure latch: a lost
  /// peer's operations never complete).
  Status Start(ActivityFn activity, Liveness liveness, const std::atomic<bool>* abort);

  /// Stops the progress thread, flushes (bounded) and releases every UCX object. Idempotent.
  void Close();

  /// Copies `bytes` from `source` to segment offset `offset` of `pe`; returns once `source`
  /// may be reused (the data is on its way; Flush waits for it to land).
  Status Put(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes);
  /// Copies `bytes` from segment offset `offset` of `pe` to `destination`; returns once there.
  Status Get(int pe, void* destination, std::uint64_t offset, std::uint64_t bytes);
  /// Fence, then an atomic ADD (or SWAP, for a set) of `value` on the `width`-byte word at
  /// segment offset `offset` of `pe`: it lands after every earlier put of this PE. Not waited
  /// for (Flush does, replies included).
  Status Atomic(int pe, std::uint64_t offset, int width, bool set, std::int64_t value);
  /// Fence, then a put of the 8-byte word `value` at segment offset `offset` of `pe` (a
  /// monotonic control word with one writer: an epoch, a sequence). Not fetching: nothing
  /// answers it. Returns once `value` was taken.
  Status PutWord(int pe, std::uint64_t offset, std::uint64_t value);
  /// Waits until every operation this PE issued has landed at its target.
  Status Flush();
  /// Progresses the worker once (a spinning waiter's poll). Never blocks for long.
  void Poll();

  /// Whether `pe` is reached through this transport.
  bool remote(int pe) const {
    return pe >= 0 && pe < static_cast<int>(peers_.size()) && peers_[pe].ep != nullptr;
  }
  RemoteCounters counters() const;
  int endpoints() const;

 private:
  struct Library;
  struct Peer {
    void* ep = nullptr;    // ucp_ep_h
    void* rkey = nullptr;  // ucp_rkey_h
    std::uint64_t base = 0;
    int pe = -1;
    UcxTransport* owner = nullptr;
    std::uint64_t last_beat = 0;
    std::chrono::steady_clock::time_point last_change{};
  };

  UcxTransport() = default;
  // Peer `pe` said farewell: it closes normally, its endpoint's error is no loss.
  bool Departed(int pe) const;
  Status WaitRequest(void* request, int pe, const char* what);
  Status Failure(int pe, int ucs_status, const char* what) const;
  void Run();
  void Heartbeat(std::chrono::steady_clock::time_point now);
  static void OnEndpointError(void* arg, void* ep, int status);

  std::unique_ptr<Library> lib_;
  std::string version_;
  std::chrono::milliseconds timeout_{0};
  void* context_ = nullptr;  // ucp_context_h
  void* worker_ = nullptr;   // ucp_worker_h
  void* memh_ = nullptr;     // ucp_mem_h
  int rank_ = -1;
  std::vector<Peer> peers_;
  LostFn lost_;
  ActivityFn activity_;
  Liveness liveness_;
  const std::atomic<bool>* abort_ = nullptr;
  std::unique_ptr<std::atomic<bool>[]> failed_;  // by PE: its endpoint reported an error
  std::atomic<bool> stopping_{false};
  int stop_fd_ = -1;
  std::thread thread_;
  std::atomic<std::uint64_t> puts_{0}, gets_{0}, atomics_{0}, bytes_put_{0}, bytes_got_{0};
};

}  // namespace hyper_parallel::shmem::host
