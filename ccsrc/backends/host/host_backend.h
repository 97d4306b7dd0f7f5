// HostBackend: the symmetric heap in shared memory, mapped by every PE of the machine.
//
// Each PE's segment is a sealed memfd: anonymous (no name in any file system, so /dev/shm's
// size does not matter), reachable only by processes of the same user (peers reopen it through
// /proc/<pid>/fd), and gone when the last PE that maps it exits, also after a crash. Layout:
//
//   [ heap: heap_bytes, page-rounded ][ ControlBlock, page-rounded ]
//
// mapped at a kMaxAlignment-aligned address, so heap offsets aligned to A are addresses
// aligned to A. Put and get are one memcpy each into or out of a peer's mapping; signals are
// C++ atomics with release order after the data (data before signal); waits spin briefly and
// then sleep on the target PE's doorbell, bounded by the timeout. Collectives exchange their
// descriptors through the control blocks before any data moves (backends/collective_descriptor.h).
//
// Liveness: a PeerMonitor watches every peer's process from OpenPeers to DestroyHeap; a peer
// that exits latches PEER_LOST and every wait of this backend gives up at once (liveness.h).
//
// Several hosts: a PE on another host (every peer, with HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all)
// cannot be mapped. OpenPeers then opens the remote transport (backends/transport/: UCX),
// registers the segment, gathers every PE's address through the bootstrap and reaches those
// peers through it (puts, gets, atomics into their segment; progress; heartbeats and endpoint
// errors for liveness), while same-host peers stay mapped. Each PE's route, mapped or remote,
// is decided there once (peer_access.h; docs/scale-out.md).
//
// Closing: DestroyHeap releases every segment, but leaves the local heap's addresses reserved
// for the rest of the process as private zero pages, so a stale alias of a heap tensor reads
// zeros rather than crashing, and no later mapping can land there.
//
// Thread-safety: as Backend. Work on asynchronous streams only touches mapped memory, which
// stays mapped until DestroyHeap (called after Quiesce).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/host/affinity.h"
#include "backends/wait/call_sites.h"
#include "backends/host/control_block.h"
#include "backends/host/host_device.h"
#include "backends/host/host_stream.h"
#include "backends/host_identity.h"
#include "backends/host/liveness.h"
#include "backends/transport/remote_transport.h"

namespace hyper_parallel::shmem::host {

/// What a peer needs to map a PE's segment; exchanged through the bootstrap as bytes.
struct SegmentHandle {
  std::uint64_t magic = 0;
  std::uint32_t version = 0;
  std::int32_t rank = -1;
  std::int32_t pid = -1;
  std::int32_t fd = -1;
  std::uint64_t segment_bytes = 0;
  std::uint64_t heap_bytes = 0;
  HostIdentity host;  ///< where the segment can be mapped from
};

class HostBackend final : public Backend {
 public:
  HostBackend() = default;
  ~HostBackend() override;

  std::string_view name() const override { return "host"; }
  DeviceId CurrentDevice() const override { return DeviceId{DeviceType::kCpu, 0}; }

  Status CreateHeap(const HeapSpec& spec, std::string* local_handle) override;
  Status OpenPeers(const std::vector<std::string>& handles) override;
  Status DestroyHeap() override;
  /// Marks this PE departed in its control block: a PE of this host that sees it exit from now
  /// on neither fails nor passes the exit on (docs/scale-out.md, "Liveness").
  void Departing() override;
  std::byte* LocalHeapBase() const override;
  bool HostAddressableHeap() const override { return true; }

  Status Agree(const data_plane::CollectiveGroup& group, const CollectiveDescriptor& mine,
               std::string_view operation, Agreement* agreement) override;
  Status ExchangeWithPeers(std::span<const PeerRound> peers, const ExchangeWords& mine,
                           std::string_view operation,
                           std::vector<ExchangeWords>* theirs) override;
  Status Quiesce() override;
  StreamRef CurrentStream() const override;
  bool RunsInline(StreamRef stream) const override { return stream.native == nullptr; }
  std::string StreamLabel(StreamRef stream) const override;
  WaitInfo Wait() const override;
  std::vector<PeerPlacement> Placement() const override;
  NetworkInfo Network() const override;
  Status Health() const override {
    if (!latch_.failed()) [[likely]] return Status::Ok();
    return latch_.Get();
  }

  Status Put(StreamRef stream, std::uint64_t offset, const void* source, std::uint64_t bytes,
             int pe, KeepAlive keep_alive) override;
  Status Get(StreamRef stream, void* destination, std::uint64_t offset, std::uint64_t bytes,
             int pe, KeepAlive keep_alive) override;
  Status Signal(StreamRef stream, std::uint64_t offset, SignalWidth width, SignalOp op,
                std::int64_t value, int pe) override;
  Status PutSignal(StreamRef stream, std::uint64_t offset, const void* source,
                   std::uint64_t bytes, std::uint64_t signal_offset, SignalWidth width,
                   SignalOp op, std::int64_t value, int pe, KeepAlive keep_alive) override;
  Status WaitSignal(StreamRef stream, std::uint64_t offset, SignalWidth width,
                    Comparison comparison, std::int64_t value) override;
  Status LaunchCollective(StreamRef stream, const data_plane::CollectiveGroup& group,
                          const CollectiveDescriptor& descriptor,
                          std::string_view name, Kernel kernel, KeepAlive keep_alive) override;
  Status Launch(StreamRef stream, std::string_view name, Kernel kernel,
                KeepAlive keep_alive) override;

  // Atomics, ordering, non-blocking RMA and waits on several words (host_atomics.cc;
  // docs/atomics.md).
  Status Atomic(StreamRef stream, const AtomicRequest& request, int pe, void* fetched,
                KeepAlive keep_alive) override;
  Status Fence(StreamRef stream) override;
  Status Quiet(StreamRef stream) override;
  Status PutNbi(StreamRef stream, std::uint64_t offset, const void* source, std::uint64_t bytes,
                int pe, KeepAlive keep_alive) override;
  Status GetNbi(StreamRef stream, void* destination, std::uint64_t offset, std::uint64_t bytes,
                int pe, KeepAlive keep_alive) override;
  Status WaitSignals(StreamRef stream, const SignalSet& signals, std::uint8_t* satisfied,
                     KeepAlive keep_alive) override;

  /// Address of heap offset 0 of PE `pe` in this process: the PEs of this host; null for
  /// those reached through the network.
  std::byte* PeerHeapAddress(int pe) const override;
  /// The control block of PE `pe` as mapped in this process.
  ControlBlock* PeerControl(int pe) const;

  int rank() const { return spec_.rank; }
  int size() const { return spec_.size; }
  std::chrono::milliseconds timeout() const { return spec_.timeout; }

  /// The memfd name is "<prefix><rank>.<creator pid>"; /proc/<pid>/maps shows
  /// "/memfd:<name> (deleted)" for every mapping of it.
  static constexpr std::string_view kSegmentNamePrefix = "hyper_parallel_shmem.pe";

 private:
  struct Mapping {
    std::byte* base = nullptr;
    std::uint64_t bytes = 0;
  };

  // Runs `body` inline on the default stream (the caller) or queues it on a host stream.
  // A failure is tagged with `operation` and phase "execute", also when it surfaces later.
  template <class Body>
  Status Submit(StreamRef stream, std::string_view operation, Body body) {
    RequireCallable<HostCall::kEnqueue, CallSite::kHostThread>();
    auto* host_stream = static_cast<HostStream*>(stream.native);
    if (host_stream == nullptr) {
      Status status = body.template operator()<CallSite::kHostThread>();
      return status.At(operation, "execute");
    }
    host_stream->Enqueue([this, operation, body = std::move(body)]() mutable {
      // Once a peer is gone (or a collective timed out), queued work fails instead of running.
      Status status = latch_.failed() ? latch_.Get()
                                      : body.template operator()<CallSite::kStreamExecutor>();
      return status.At(operation, "execute");
    });
    return Status::Ok();
  }
  // Completes this PE's pending non-blocking puts and gets to other hosts (a collective and a
  // quiesce do first: their sources may be reused after).
  Status CompleteNbi() const;

  HeapSpec spec_;
  std::uint64_t heap_region_bytes_ = 0;  // heap_bytes rounded up to a page
  std::uint64_t segment_bytes_ = 0;
  int fd_ = -1;
  std::vector<Mapping> mappings_;  // by rank; [rank] is the local segment
  WaitMode wait_mode_ = WaitMode::kAuto;
  WaitPolicy wait_policy_;
  FailureLatch latch_;
  PeerMonitor monitor_;
  ThreadPin pin_;
  std::unique_ptr<CopyWorkers> workers_;
  std::unique_ptr<HostDevice> device_;
  std::unique_ptr<RemoteTransport> transport_;  // null: every peer is mapped
  std::vector<PeerPlacement> placement_;
  // By PE: this PE already passed on its loss (Lost); sized with the peers, before any thread
  // that reports a loss starts.
  std::unique_ptr<std::atomic<bool>[]> passed_on_;
  // Signal and PutSignal on the stream, under `name` (diagnostics).
  Status SubmitPutSignal(StreamRef stream, std::string_view name, std::uint64_t offset,
                         const void* source, std::uint64_t bytes, const RemoteSignal& signal,
                         int pe, KeepAlive keep_alive);
  // OpenPeers' steps. Each PE's host label and route (placement_), from the handles; returns
  // each PE's host as its lowest PE number and whether the PEs are on several hosts.
  std::vector<int> PlacePeers(const std::vector<SegmentHandle>& decoded, bool* several_hosts);
  // Checks the handle of PE `pe` of this host and maps its segment.
  Status MapPeer(int pe, const SegmentHandle& handle);
  // The copy workers and the device surface; with remote peers, the transport attached and
  // started.
  Status MakeDevice(int local_pes, std::vector<int> hosts, const std::vector<bool>& watched);
  // Watches every mapped peer's process (PeerMonitor).
  Status StartMonitor(const std::vector<int>& pids);
  // Loads UCX, publishes this PE's address and keeps every peer marked remote reachable, with
  // endpoints to the watched ones.
  Status ConnectRemotes(const std::vector<SegmentHandle>& handles, const std::vector<bool>& remote,
                        const std::vector<bool>& watched);
  // Starts the progress thread and checks that every watched peer answers.
  Status StartRemotes(const std::vector<bool>& watched);
  // A loss this PE noticed or was told of, in a job across hosts: latched (`status`), then, the
  // first time for `pe`, passed on to the watched peers on other hosts (kLost) and to this
  // host's PEs (ControlBlock::told_lost), so every survivor learns of it (docs/scale-out.md,
  // "Liveness"). Any thread.
  void Lost(int pe, Status status);
};

/// "host0 (net:[…]): pes 0,1; host1 (net:[…]): pes 2,3" and, in `others`, the PEs on hosts
/// other than handles[rank]'s ("2,3"); returns whether every PE is on rank's host.
bool HostsLayout(const std::vector<SegmentHandle>& handles, int rank, std::string* layout,
                 std::string* others);

/// Serialises a handle to the bytes CreateHeap publishes, and back (with validation).
std::string EncodeSegmentHandle(const SegmentHandle& handle);
Status DecodeSegmentHandle(std::string_view bytes, SegmentHandle* out);
/// UNSUPPORTED_CAPABILITY naming every host and its PEs unless every handle's host is that of
/// handles[rank]: the host backend maps its peers' memory, so it reaches only its own host.
Status CheckOneHost(const std::vector<SegmentHandle>& handles, int rank,
                    std::string_view reason = "this process has no network transport");

}  // namespace hyper_parallel::shmem::host
