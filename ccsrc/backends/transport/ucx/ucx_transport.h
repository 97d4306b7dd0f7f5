// UcxTransport: how the host backend reaches PEs it cannot map (docs/scale-out.md).
//
// PEs on the same host map each other's segments and use plain loads and stores. A PE on
// another host (or every peer, with HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all) is reached through
// UCX's ucp API instead, over one of two paths, chosen per peer at connection:
//   - messages (the default wherever UCX emulates RMA in software, e.g. TCP): every operation is
//     one active message carrying its data and what to do with it (wire.h). The
//     target's handler lands the data in its segment, then applies the signal or word that came
//     with it, in the order the source sent them (rendezvous data included), so a put_signal is
//     one message and a collective's data carries its flag. Get is a request answered by a
//     message; a flush is a request answered once everything before it landed.
//   - rma (where UCX reports hardware RMA and atomics for the peer: InfiniBand, RoCE): ucp_put_nbx
//     and ucp_get_nbx into the peer's registered segment, ucp_atomic_op_nbx for signals after a
//     ucp_worker_fence, ucp_worker_flush_nbx for a flush.
// HYPER_PARALLEL_SHMEM_REMOTE_PATH=messages|rma forces one path for every peer. The two paths are
// two implementations of PeerPath (paths.h: messages_path.cc, rma_path.cc), chosen per peer
// when its endpoint is made; the rest of the transport does not ask which one a peer has.
//
// UCX is loaded at run time (dlopen of libucp.so.0, or HYPER_PARALLEL_SHMEM_UCX_LIBRARY): the
// package builds, installs and runs without it, and only a job that has remote peers needs it.
// A UCX without active messages (or with too small a message header) falls back to rma
// (debug_state() shows each peer's path); forcing messages on it fails at Load, saying why.
//
// Progress: a remote operation lands only while its target drives the UCX worker. Threads
// that wait in the library drive it themselves: they progress while they spin (one at a time:
// the progress token), and one of them at a time sleeps on the worker's event fd (EventSleeper),
// so a message wakes the waiter itself. While any thread waits, the progress thread leaves the
// worker to the waiters; while none does, it sleeps on the event fd and progresses whatever
// arrives, so a target that computes outside the library still receives.
//
// Endpoints: made at init to the watched peers only (WatchPartners: at most 2 ceil(log2 N)),
// and to any other peer when this PE first sends it something (ucp_ep_create is not blocking;
// its first message says hello, so the peer knows to say farewell here at close). A reply
// that must go, from inside progress, to a peer without an endpoint yet is queued and sent by
// the thread that progressed, once out of UCX (ucp_ep_create takes the worker's lock, which
// progress holds). Where some PE's UCX cannot take active messages (no hello), every
// endpoint is made at init, as before.
//
// Liveness: every endpoint is created with UCP_ERR_HANDLING_MODE_PEER and an error callback,
// which latches PEER_LOST for that PE (a peer process that exits closes its connections: the
// callback fires at once). A host that goes silent (link down, hung) is noticed by heartbeats:
// the progress thread adds 1 to a word of every watched peer every silence/8, and declares a
// peer lost when its word here has not moved for `silence` (HYPER_PARALLEL_SHMEM_PEER_SILENCE_MS).
// A PE that closes normally first sets its word at every peer that has an endpoint either way
// to kFarewell (after its last heartbeat, on the same endpoint): the error its closing
// connections then raise is no loss. Whoever learns of a loss passes it on (ReportLost: one
// kLost message to each watched peer), so a PE with no endpoint to the lost one learns of it
// within ceil(log2 N) hops.
//
// Thread-safety: the worker is created UCS_THREAD_MODE_MULTI; Put, PutSignal, Get, Flush,
// Poll, Arm and Sleep may be called from any thread at once (stream executors, copy workers,
// the progress thread). Load, Register, Connect, Start and Close are called from one thread
// while nothing else runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "backends/wait/doorbell.h"
#include "backends/transport/ucx/wire.h"
#include "base/mutex.h"
#include "base/status.h"

namespace hyper_parallel::shmem::transport {

// The host's waiting primitives this transport waits and rings with (backends/wait/).
using host::NoBlockingNotice;
using host::Ring;
using host::RingAfterSeqCst;
using host::WaitOutcome;
using host::WaitUntil;
using host::WakeSocket;

class UcxTransport final : public RemoteTransport {
 public:
  /// How a remote peer is reached (see the file comment).
  enum class Path : std::uint8_t { kMessages, kRma };

  /// The path to one peer and, for rma, why: `setting` is HYPER_PARALLEL_SHMEM_REMOTE_PATH;
  /// `here_cannot` says why this PE's UCX cannot take messages (empty: it can);
  /// `peer_takes_messages` whether the peer's can; `hardware_rma` whether UCX drives RMA and
  /// atomics to the peer in hardware (LanesHaveHardwareRma). Pure.
  static std::pair<Path, std::string> ChoosePath(std::string_view setting,
                                                 std::string_view here_cannot,
                                                 bool peer_takes_messages, bool hardware_rma);
  /// Whether ucp_ep_print_info's text shows a lane for RMA and one for atomics (over TCP none
  /// does: UCX emulates both with messages). Pure.
  static bool LanesHaveHardwareRma(std::string_view endpoint_info);

  struct Options {
    std::string library;  ///< empty: libucp.so.0
    std::chrono::milliseconds timeout{120000};
    std::string path = "auto";  ///< auto, messages or rma (HYPER_PARALLEL_SHMEM_REMOTE_PATH)
  };

  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  /// Loads UCX and creates a context and a worker. UNSUPPORTED_CAPABILITY names what is
  /// missing (the library, a symbol, a too old version); INVALID_CONFIG a bad path setting.
  static Status Load(const Options& options, std::unique_ptr<RemoteTransport>* out);

  std::string name() const override { return "ucx"; }
  std::string version() const override { return version_; }

  /// Registers this PE's segment [base, base + bytes) and returns what a peer needs to reach
  /// it: the worker address, the packed remote key and the base address.
  Status Register(void* base, std::uint64_t bytes, std::string* blob) override;

  /// Keeps every PE with remote[pe] reachable from its blob, creates the endpoints of the PEs
  /// with watched[pe] (all of them where some PE cannot take active messages) and picks each
  /// one's path. `lost` is called for a loss this transport notices or is told of (kLost).
  /// No traffic yet.
  Status Connect(int rank, const std::vector<std::string>& blobs, const std::vector<bool>& remote,
                 const std::vector<bool>& watched, LostFn lost) override;

  /// Tells every watched peer but `pe` that PE `pe` is lost (one kLost message each, counted
  /// with the heartbeats); never waits. The caller does so once per lost PE.
  void ReportLost(int pe) override;

  /// Starts the progress thread (and the heartbeats) and publishes this PE's wake socket in
  /// `own_bell`, which is rung whenever progress handled something (a remote write may have
  /// landed here). Waits for remote completion give up once `abort` is set (this PE's failure
  /// latch: a lost peer's operations never complete). Waits of the transport itself (a
  /// request, a get's reply, a flush's answers) follow `policy` on `own_bell`.
  Status Start(Liveness liveness, const std::atomic<bool>* abort, Doorbell* own_bell,
               WaitPolicy policy) override;

  /// Stops the progress thread, flushes (bounded) and releases every UCX object. Idempotent.
  void Close() override;

  /// Copies `bytes` from `source` to segment offset `offset` of `pe`; returns once `source`
  /// may be reused (the data is on its way; Flush waits for it to land).
  Status Put(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
             Audience audience) override;
  /// Put (when bytes > 0), then `signal` on a word of the same PE, which lands after the data
  /// and after every earlier write of this PE to `pe`. One message on the messages path; a put,
  /// a fence and an atomic on the rma path. Returns once `source` may be reused.
  Status PutSignal(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
                   const RemoteSignal& signal, Audience audience) override;
  struct Sending;
  /// PutSignal without waiting: the message to `pe` is on its way when this returns (the rma
  /// path, which has no such message, puts and waits as PutSignal). `source` stays the
  /// caller's until Finish. Messages to one PE land in the order they were begun.
  Status Begin(Outbound* out, int pe, std::uint64_t offset, const void* source,
               std::uint64_t bytes, const RemoteSignal& signal, Audience audience) override;
  /// Waits until every message begun on `out` has left (its source may be reused); the first
  /// failure, if any.
  Status Finish(Outbound* out) override;

  /// `request` on the word of `pe` (docs/atomics.md): one kAtomic message, applied by the
  /// target's progress with the CPU's atomics (so it is atomic with the target's own and its
  /// host's PEs' atomics), after every earlier message of this PE to `pe`. A non-null `old`
  /// waits for the answer; otherwise the atomic counts as a write a flush waits for. The rma
  /// path takes the same message after a worker fence; a peer whose UCX takes no messages:
  /// UNSUPPORTED_CAPABILITY.
  Status Atomic(int pe, const AtomicRequest& request, std::uint64_t* old) override;
  /// This PE's next message to every peer lands after every earlier one's data (a message
  /// that orders: wire.h's kWireOrdered; the rma path: a worker fence).
  Status Fence() override;
  /// Put and Get that return before the copy completed (the rma path: as Put and Get).
  /// CompleteNbi completes them and then drops `hold`, which owns the local side.
  Status PutNbi(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
                std::shared_ptr<const void> hold) override;
  Status GetNbi(int pe, void* destination, std::uint64_t offset, std::uint64_t bytes,
                std::shared_ptr<const void> hold) override;
  /// Waits until every PutNbi and GetNbi begun before has completed (a put's source may be
  /// reused, a get's data is there); the first failure. Cheap when none is pending.
  Status CompleteNbi() override;
  /// CompleteNbi, then Flush: everything this PE issued is complete and visible at its target.
  Status Quiet() override;

  /// Copies `bytes` from segment offset `offset` of `pe` to `destination`; returns once there.
  /// It sees every earlier write of this PE to `pe`.
  Status Get(int pe, void* destination, std::uint64_t offset, std::uint64_t bytes) override;
  /// Waits until every kAnyone write this PE issued (before the call) has landed at its
  /// target, and every operation has left this PE.
  Status Flush() override;
  /// Progresses the worker unless another thread does right now; true when something
  /// happened. Never blocks for long.
  bool Poll() override;

  // EventSleeper: the worker's event fd plus this PE's wake socket.
  Armed Arm(Doorbell* bell) override;
  void Sleep(Doorbell* bell, std::chrono::nanoseconds timeout) override;

  /// Whether `pe` is reached through this transport.
  bool remote(int pe) const override {
    return pe >= 0 && pe < static_cast<int>(peers_.size()) && peers_[pe].reachable;
  }
  /// "messages" or "rma", for debug_state()'s peers; "not connected" while this PE has no
  /// endpoint to `pe` (the path is chosen when it is made).
  std::string PathName(int pe) const override;
  RemoteCounters counters() const override;
  int endpoints() const override;

 private:
  struct Library;
  struct Peer;
  // How one peer is reached, once it has an endpoint: one implementation per path (the file
  // comment), in messages_path.cc and rma_path.cc; Peer::path points at one of them. What
  // differs between the paths is here and nowhere else.
  class PeerPath {
   public:
    virtual ~PeerPath() = default;
    virtual std::string_view name() const = 0;
    /// PutSignal's work: the data (bytes > 0), then the signal (action kNone: none), counted
    /// as liveness traffic when `heartbeat`. Returns once `source` may be reused.
    virtual Status Transmit(UcxTransport& t, Peer& peer, std::uint64_t offset,
                            const void* source, std::uint64_t bytes, const RemoteSignal& signal,
                            Audience audience, bool heartbeat) const = 0;
    /// Begin's work (at most Outbound::kMaxInFlight in flight is the caller's).
    virtual Status Begin(UcxTransport& t, Outbound* out, Peer& peer, std::uint64_t offset,
                         const void* source, std::uint64_t bytes, const RemoteSignal& signal,
                         Audience audience) const = 0;
    virtual Status Get(UcxTransport& t, Peer& peer, void* destination, std::uint64_t offset,
                       std::uint64_t bytes) const = 0;
    virtual Status PutNbi(UcxTransport& t, Peer& peer, std::uint64_t offset, const void* source,
                          std::uint64_t bytes, std::shared_ptr<const void> hold) const = 0;
    virtual Status GetNbi(UcxTransport& t, Peer& peer, void* destination, std::uint64_t offset,
                          std::uint64_t bytes, std::shared_ptr<const void> hold) const = 0;
    /// What orders an atomic message after this PE's earlier writes to the peer.
    virtual Status BeforeAtomic(UcxTransport& t, Peer& peer) const = 0;
    /// One heartbeat, never waited for.
    virtual void Beat(UcxTransport& t, Peer& peer, const RemoteSignal& beat) const = 0;
    /// Whether fences and flushes to this peer go through the worker (ucp_worker_fence and
    /// ucp_worker_flush_nbx) rather than through messages of their own.
    virtual bool OrderedByWorker() const = 0;
  };
  class MessagesPath;
  class RmaPath;
  // The implementation of `path`.
  static const PeerPath& PathFor(Path path);
  struct Peer {
    // Set once (CreateEndpoint, with release; rkey and path before it), cleared at Close.
    std::atomic<void*> ep{nullptr};  // ucp_ep_h
    void* rkey = nullptr;            // ucp_rkey_h
    std::uint64_t base = 0;
    int pe = -1;
    bool reachable = false;  // reached through this transport
    bool watched = false;    // heartbeats both ways, endpoint made at init
    bool accepts_messages = false;
    std::string address;     // its worker address, for the endpoint made when first used
    std::string rkey_buffer;  // its packed remote key
    // It made an endpoint to this PE (its first message, a hello, came): it hears farewell.
    std::atomic<bool> contacted{false};
    const PeerPath* path = nullptr;  // set with the endpoint (PathFor)
    UcxTransport* owner = nullptr;
    std::uint64_t last_beat = 0;
    std::chrono::steady_clock::time_point last_change{};
  };
  // A message posted from inside progress to a peer without an endpoint yet (Post).
  struct Queued {
    int pe = -1;
    WireHeader header;
    const void* data = nullptr;
    std::uint64_t bytes = 0;
    bool heartbeat = false;
  };
  // What arrived from one source PE, delivered in the order it was sent (wire.h).
  struct Inbound {
    int receiving = 0;  // rendezvous receives from this source in flight
    std::vector<DeferredMessage> deferred;  // what arrived meanwhile, in order
    std::size_t next = 0;                   // the first of `deferred` not yet delivered
  };
  struct PendingGet;
  // Non-blocking operations not yet completed (CompleteNbi), with what they hold.
  struct NbiPut {
    std::unique_ptr<Outbound> out;
    std::shared_ptr<const void> hold;
  };
  struct NbiGet {
    std::shared_ptr<PendingGet> get;
    std::uint64_t token = 0;
    int pe = -1;
    std::shared_ptr<const void> hold;
  };
  // Beyond this many pending non-blocking operations, the oldest are completed first.
  static constexpr std::size_t kMaxNbi = 256;

  UcxTransport() = default;
  // The endpoint to `pe`, made now if this PE has none (a hello goes first). Never from
  // inside progress (see the file comment).
  Status Connected(int pe);
  Status CreateEndpoint(Peer& peer, bool hello) REQUIRES(connect_mutex_);
  // Sends what Post queued for peers without an endpoint; called out of progress.
  void SendQueued();
  // Peer `pe` said farewell: it closes normally, its endpoint's error is no loss.
  bool Departed(int pe) const;
  Status Failure(int pe, int ucs_status, const char* what) const;
  Status CheckPeer(int pe, const char* what) const;
  // Waits (spinning with progress, then sleeping on the events) until done() or the deadline,
  // a lost peer, or the latch; `pe` and `what` name it in errors.
  template <class Done>
  Status Await(Done&& done, int pe, const char* what);
  Status WaitRequest(void* request, int pe, const char* what);
  // Counts one operation in puts (data) or atomics (a signal alone) (RemoteCounters).
  void CountOperation(std::uint64_t bytes, const RemoteSignal& signal);
  // Waits for sending_[finished_] of `out` and moves past it.
  Status FinishOldest(Outbound* out);
  // `heartbeat`: liveness traffic, counted as a heartbeat rather than a message.
  Status Send(int pe, const WireHeader& header, const void* data, std::uint64_t bytes,
              bool heartbeat = false);
  // PutSignal without counting it as an operation; `heartbeat`: liveness traffic, counted as
  // one heartbeat on either path (the messages path's Send counts it, the rma path here).
  Status Transmit(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
                  const RemoteSignal& signal, Audience audience, bool heartbeat = false);
  // Sends without waiting (heartbeats; replies from inside progress): `header` is copied,
  // `data` (if any) is this PE's segment; nothing when the peer is lost. `heartbeat`: counted
  // as one, not as a message.
  void Post(int pe, const WireHeader& header, const void* data = nullptr,
            std::uint64_t bytes = 0, bool heartbeat = false);
  // Inbound messages (messages.cc).
  Status RegisterHandler();
  int OnMessage(const void* header, std::size_t header_length, void* data, std::size_t length,
                bool rendezvous);
  // Lands one message; false when a rendezvous receive is now in flight (the rest of its
  // source's messages wait for it).
  bool Deliver(const WireHeader& header, void* data, std::size_t length, bool rendezvous);
  // A put's data has landed: its signal, then the doorbell.
  void Landed(const WireHeader& header);
  // A rendezvous receive from `source` ended: one fewer in flight, then Resume.
  void Received(int source);
  // Delivers, in order, what waits from `source` and may go now.
  void Resume(int source);
  void OnGetReply(const WireHeader& header, void* data, std::size_t length, bool rendezvous);
  // An atomic's answer: the old value into its waiting PendingGet.
  void OnAtomicReply(const WireHeader& header);
  // The first message to `pe` after a fence orders (kWireOrdered).
  void MarkFenced(int pe, WireHeader* header);
  // A request whose answer fills `pending` (a kGet, or a fetching kAtomic), on the messages
  // path: registered under a new token (in `header` and *token) and sent.
  Status Request(int pe, WireHeader header, const std::shared_ptr<PendingGet>& pending,
                 std::uint64_t* token);
  WireHeader GetHeader(std::uint64_t offset, std::uint64_t bytes) const;
  // Waits for a request's answer (AwaitGet: a get's or an atomic's) and forgets its token.
  Status AwaitGet(int pe, const std::shared_ptr<PendingGet>& pending, std::uint64_t token);
  void Run();
  void Heartbeat(std::chrono::steady_clock::time_point now);
  static void OnEndpointError(void* arg, void* ep, int status);

  std::unique_ptr<Library> lib_;
  std::string version_;
  std::chrono::milliseconds timeout_{0};
  std::string path_setting_ = "auto";
  std::string path_reason_;  // why this UCX cannot take messages ("" when it can)
  bool messages_supported_ = false;
  void* context_ = nullptr;  // ucp_context_h
  void* worker_ = nullptr;   // ucp_worker_h
  void* memh_ = nullptr;     // ucp_mem_h
  std::byte* segment_ = nullptr;
  std::uint64_t segment_bytes_ = 0;
  int rank_ = -1;
  std::vector<Peer> peers_;  // sized at Connect (Peer is not movable), cleared at Close
  bool lazy_ = false;        // endpoints made when first used (every PE takes messages)
  Mutex connect_mutex_;      // one endpoint made at a time
  Mutex queued_mutex_;
  std::vector<Queued> queued_ GUARDED_BY(queued_mutex_);
  std::atomic<bool> has_queued_{false};
  LostFn lost_;
  Liveness liveness_;
  const std::atomic<bool>* abort_ = nullptr;
  Doorbell* own_bell_ = nullptr;
  WaitPolicy wait_policy_;
  std::unique_ptr<std::atomic<bool>[]> failed_;  // by PE: its endpoint reported an error
  // Flush bookkeeping per peer (messages path): a kAnyone write not yet confirmed, the last
  // flush request sent and the last one answered.
  std::unique_ptr<std::atomic<bool>[]> unconfirmed_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> flush_sent_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> flush_answered_;
  // Inbound ordering; touched only inside progress, guarded all the same (UCX may call a
  // completion from another thread that progresses).
  Mutex inbound_mutex_;
  std::vector<Inbound> inbound_ GUARDED_BY(inbound_mutex_);
  // Gets waiting for their reply, by token.
  Mutex gets_mutex_;
  std::vector<std::pair<std::uint64_t, std::shared_ptr<PendingGet>>> gets_ GUARDED_BY(gets_mutex_);
  std::atomic<std::uint64_t> next_token_{1};
  Mutex nbi_mutex_;
  std::vector<NbiPut> nbi_puts_ GUARDED_BY(nbi_mutex_);
  std::vector<NbiGet> nbi_gets_ GUARDED_BY(nbi_mutex_);
  std::atomic<bool> has_nbi_{false};
  std::unique_ptr<std::atomic<bool>[]> fenced_;  // by PE: its next message orders
  // Progress: one thread at a time drives the worker; waiters count themselves; one waiter at a
  // time sleeps on the event fd.
  std::atomic<bool> progressing_{false};
  // Bulk transfers in flight, either way (rendezvous receives, large sends): while any are,
  // waiters keep polling instead of sleeping, so the data keeps streaming (progress.cc).
  std::atomic<int> streaming_{0};
  // When progress last handled something (steady clock, ns): messages come in runs, so a
  // waiter that just saw one keeps polling a while rather than sleep (progress.cc).
  std::atomic<std::int64_t> last_activity_{0};

  std::atomic<bool> event_role_{false};
  int event_fd_ = -1;      // the worker's
  int sleep_epoll_ = -1;   // {event_fd_, wake_}
  WakeSocket wake_;
  std::atomic<bool> stopping_{false};
  int stop_fd_ = -1;
  std::thread thread_;
  LiveCounters counters_;
};

}  // namespace hyper_parallel::shmem::transport
