#include "backends/host/host_backend.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "backends/host/host_kernel_api.h"
#include "backends/host/host_stream.h"
#include "base/config.h"
#include "data_plane/pe_address.h"

namespace hyper_parallel::shmem::host {
namespace {

constexpr std::uint64_t kHandleMagic = 0x4850534d53454731ull;  // "HPSMSEG1"
constexpr std::uint32_t kHandleVersion = 2;  // 2: the host identity

std::uint64_t PageSize() {
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

std::uint64_t RoundUp(std::uint64_t value, std::uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

Status Errno(std::string_view fact, int error, std::string key = {}, std::string value = {}) {
  if (key.empty()) {
    return Status::Assertion(ErrorCode::kBackendError, fact,
                             {{"errno", std::string(std::strerror(error))}});
  }
  return Status::Assertion(ErrorCode::kBackendError, fact,
                           {{key, std::move(value)}, {"errno", std::string(std::strerror(error))}});
}

// Maps `bytes` of `fd` shared, at an address aligned to kHeapBaseAlignment.
template <CallSite kSite>
Status MapAligned(int fd, std::uint64_t bytes, std::byte** out) {
  static_assert(kSite == CallSite::kHostThread);
  constexpr std::uint64_t kAlign = kHeapBaseAlignment;
  void* reserved = ::mmap(nullptr, bytes + kAlign, PROT_NONE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) return Errno("reserving address space failed", errno);
  const auto start = reinterpret_cast<std::uintptr_t>(reserved);
  const auto aligned = RoundUp(start, kAlign);
  void* mapped = ::mmap(reinterpret_cast<void*>(aligned), bytes, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_FIXED, fd, 0);
  if (mapped == MAP_FAILED) {
    const int error = errno;
    ::munmap(reserved, bytes + kAlign);
    return Errno("mapping a heap segment failed", error, "bytes", std::to_string(bytes));
  }
  if (aligned > start) ::munmap(reserved, aligned - start);
  const std::uintptr_t tail = aligned + bytes;
  const std::uintptr_t reserved_end = start + bytes + kAlign;
  if (reserved_end > tail) ::munmap(reinterpret_cast<void*>(tail), reserved_end - tail);
  *out = static_cast<std::byte*>(mapped);
  return Status::Ok();
}

// Signal words are read seq_cst, as they are written (peer_access.h).
template <class Word>
Word LoadSignal(const std::byte* address) {
  return std::atomic_ref<Word>(*reinterpret_cast<Word*>(const_cast<std::byte*>(address)))
      .load(std::memory_order_seq_cst);
}

}  // namespace

std::string EncodeSegmentHandle(const SegmentHandle& handle) {
  return std::string(reinterpret_cast<const char*>(&handle), sizeof handle);
}

Status DecodeSegmentHandle(std::string_view bytes, SegmentHandle* out) {
  SegmentHandle handle;
  if (bytes.size() != sizeof handle) {
    return Status::Contract(ErrorCode::kBackendError, "host segment handle",
                            std::to_string(sizeof handle) + " bytes",
                            std::to_string(bytes.size()) + " bytes");
  }
  std::memcpy(&handle, bytes.data(), sizeof handle);
  if (handle.magic != kHandleMagic || handle.version != kHandleVersion) {
    return Status::Assertion(ErrorCode::kBackendError,
                             "host segment handle is not from this library version",
                             {{"magic", Hex(handle.magic)},
                              {"version", std::to_string(handle.version)}});
  }
  *out = handle;
  return Status::Ok();
}

Status HostBackend::CreateHeap(const HeapSpec& spec, std::string* local_handle) {
  RequireCallable<HostCall::kCreateSegment, CallSite::kHostThread>();
  if (fd_ >= 0 || !mappings_.empty()) {
    return Status::Assertion(ErrorCode::kInvalidState, "host heap already exists",
                             {{"rank", std::to_string(spec_.rank)}});
  }
  if (spec.size < 1) {  // the largest world is the Runtime's check (HYPER_PARALLEL_SHMEM_MAX_PES)
    return Status::Contract(ErrorCode::kInvalidArgument, "host backend world size", "at least 1",
                            std::to_string(spec.size));
  }
  HPS_RETURN_IF_ERROR(ParseWaitMode(spec.wait, &wait_mode_));
  spec_ = spec;
  latch_.Reset();
  wait_policy_ = WaitPolicy::For(wait_mode_, spec.size, UsableCores());
  heap_region_bytes_ = RoundUp(spec.heap_bytes, PageSize());
  if (spec.teams < 1) {
    return Status::Contract(ErrorCode::kInvalidArgument, "team slots", "at least 1",
                            std::to_string(spec.teams));
  }
  segment_bytes_ = heap_region_bytes_ +
                   RoundUp(ControlLayout(spec.teams, spec.size).bytes, PageSize());

  // The creator's pid in the name lets a test tell this job's segments from everyone else's.
  const std::string name = std::string(kSegmentNamePrefix) + std::to_string(spec.rank) + "." +
                           std::to_string(::getpid());
  fd_ = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd_ < 0) return Errno("memfd_create failed", errno);
  if (::ftruncate(fd_, static_cast<off_t>(segment_bytes_)) != 0) {
    const int error = errno;
    DestroyHeap();
    return Errno("sizing the heap segment failed", error, "bytes",
                 std::to_string(segment_bytes_));
  }
  // A peer can neither shrink the segment under our mappings (SIGBUS) nor change the seals.
  if (::fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int error = errno;
    DestroyHeap();
    return Errno("sealing the heap segment failed", error);
  }
  mappings_.assign(spec.size, Mapping{});
  std::byte* base = nullptr;
  if (Status mapped = MapAligned<CallSite::kHostThread>(fd_, segment_bytes_, &base);
      !mapped.ok()) {
    DestroyHeap();
    return mapped;
  }
  mappings_[spec.rank] = Mapping{base, segment_bytes_};
  auto* control = new (base + heap_region_bytes_) ControlBlock();
  ControlLayout(spec.teams, spec.size).Construct(control);
  control->rank = spec.rank;
  control->size = spec.size;
  control->teams = spec.teams;
  control->heap_bytes = spec.heap_bytes;

  SegmentHandle handle;
  handle.magic = kHandleMagic;
  handle.version = kHandleVersion;
  handle.rank = spec.rank;
  handle.pid = static_cast<std::int32_t>(::getpid());
  handle.fd = fd_;
  handle.host = HostIdentity::Current();
  handle.segment_bytes = segment_bytes_;
  handle.heap_bytes = spec.heap_bytes;
  *local_handle = EncodeSegmentHandle(handle);
  return Status::Ok();
}

// Opening the peers, in steps: the handles, each PE's host and route, the network where some
// PE is on another host, the mappings of this host's PEs, the device surface, the monitor.
Status HostBackend::OpenPeers(const std::vector<std::string>& handles) {
  RequireCallable<HostCall::kOpenPeerSegment, CallSite::kHostThread>();
  if (static_cast<int>(handles.size()) != spec_.size || mappings_.empty()) {
    return Status::Assertion(ErrorCode::kInvalidState, "peer handles do not match the heap",
                             {{"handles", std::to_string(handles.size())},
                              {"size", std::to_string(spec_.size)}});
  }
  std::vector<SegmentHandle> decoded(spec_.size);
  for (int pe = 0; pe < spec_.size; ++pe) {
    HPS_RETURN_IF_ERROR(DecodeSegmentHandle(handles[pe], &decoded[pe]));
  }
  bool several_hosts = false;
  const std::vector<int> hosts = PlacePeers(decoded, &several_hosts);
  std::vector<bool> remote(spec_.size, false);
  for (int pe = 0; pe < spec_.size; ++pe) remote[pe] = placement_[pe].route == PeerRoute::kRemote;
  // The peers on other hosts this PE watches (heartbeats, endpoints made at init); the others
  // get an endpoint when first used.
  std::vector<bool> watched(spec_.size, false);
  for (int pe : WatchPartners(spec_.rank, spec_.size)) watched[pe] = remote[pe];
  passed_on_ = std::make_unique<std::atomic<bool>[]>(spec_.size);
  // Every PE decides alike from the same handles whether the job needs the network at all, so
  // either every PE takes part in the second exchange (ConnectRemotes) or none does.
  if (several_hosts) {
    HPS_RETURN_IF_ERROR(ConnectRemotes(decoded, remote, watched));
  }
  // The wait policy, the pinning and the copy workers count the PEs that share this machine's
  // cores (one kernel: namespace hosts of one machine included), not the world.
  int local_pes = 0;
  int local_index = 0;
  for (int pe = 0; pe < spec_.size; ++pe) {
    if (!decoded[pe].host.SameCores(decoded[spec_.rank].host)) continue;
    if (pe < spec_.rank) ++local_index;
    ++local_pes;
  }
  wait_policy_ = WaitPolicy::For(wait_mode_, local_pes, UsableCores());
  std::vector<int> pids(spec_.size, static_cast<int>(::getpid()));
  for (int pe = 0; pe < spec_.size; ++pe) {
    if (pe == spec_.rank) continue;
    pids[pe] = remote[pe] ? -1 : decoded[pe].pid;  // a remote PE's liveness is the transport's
    if (!remote[pe]) HPS_RETURN_IF_ERROR(MapPeer(pe, decoded[pe]));
  }
  HPS_RETURN_IF_ERROR(MakeDevice(local_pes, hosts, watched));
  if (wait_mode_ == WaitMode::kAuto) {
    RequireCallable<HostCall::kPinThread, CallSite::kHostThread>();
    pin_.PinForPe(local_index, local_pes);
  }
  return StartMonitor(pids);
}

std::vector<int> HostBackend::PlacePeers(const std::vector<SegmentHandle>& decoded,
                                         bool* several_hosts) {
  // REMOTE_PEERS=all: every PE a host of its own; blocks:K: blocks of K consecutive PEs act
  // as hosts within each machine (0: the machines themselves).
  const std::uint64_t block = spec_.remote_peers == "all"
                                  ? 1
                                  : RemotePeerBlock(spec_.remote_peers).value_or(0);
  const auto same_host = [&](int a, int b) {
    const bool same_block =
        block == 0 || static_cast<std::uint64_t>(a) / block == static_cast<std::uint64_t>(b) / block;
    return same_block && decoded[a].host.SameHost(decoded[b].host);
  };
  *several_hosts = false;
  for (int pe = 1; pe < spec_.size; ++pe) {
    if (!same_host(pe, 0)) *several_hosts = true;
  }
  // Each PE's host as its lowest PE number: the same on every PE (collectives across hosts
  // go through each host's leader, HostDevice::AgreeAcrossHosts).
  std::vector<int> hosts(spec_.size);
  for (int pe = 0; pe < spec_.size; ++pe) {
    hosts[pe] = pe;
    for (int lower = 0; lower < pe; ++lower) {
      if (hosts[lower] == lower && same_host(lower, pe)) {
        hosts[pe] = lower;
        break;
      }
    }
  }
  // Each PE's route, decided here once (peer_access.h).
  placement_.assign(spec_.size, PeerPlacement{});
  for (int pe = 0; pe < spec_.size; ++pe) {
    // A block of blocks:K is a host of its own, for TEAM_NODE too.
    placement_[pe].host = decoded[pe].host.Label();
    if (block > 1) placement_[pe].host += "/block" + std::to_string(pe / block);
    placement_[pe].route = pe == spec_.rank              ? PeerRoute::kSelf
                           : !same_host(pe, spec_.rank) ? PeerRoute::kRemote
                                                        : PeerRoute::kMapped;
  }
  return hosts;
}

Status HostBackend::MapPeer(int pe, const SegmentHandle& handle) {
  if (handle.rank != pe || handle.segment_bytes != segment_bytes_ ||
      handle.heap_bytes != spec_.heap_bytes) {
    return Status::Assertion(ErrorCode::kBackendError, "peer segment does not match ours",
                             {{"pe", std::to_string(pe)},
                              {"peer_rank", std::to_string(handle.rank)},
                              {"peer_heap_bytes", std::to_string(handle.heap_bytes)},
                              {"heap_bytes", std::to_string(spec_.heap_bytes)}});
  }
  // The kernel grants this only to processes allowed to inspect the owner (same user).
  const std::string path =
      "/proc/" + std::to_string(handle.pid) + "/fd/" + std::to_string(handle.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Errno("opening a peer heap segment failed", errno, "pe", std::to_string(pe));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || static_cast<std::uint64_t>(info.st_size) != segment_bytes_) {
    ::close(fd);
    return Status::Assertion(ErrorCode::kBackendError, "peer heap segment has the wrong size",
                             {{"pe", std::to_string(pe)},
                              {"bytes", std::to_string(info.st_size)},
                              {"expected_bytes", std::to_string(segment_bytes_)}});
  }
  std::byte* base = nullptr;
  Status mapped = MapAligned<CallSite::kHostThread>(fd, segment_bytes_, &base);
  ::close(fd);  // the mapping keeps the segment alive
  HPS_RETURN_IF_ERROR(mapped);
  mappings_[pe] = Mapping{base, segment_bytes_};
  const ControlBlock* control = PeerControl(pe);
  if (control->magic != kControlMagic || control->version != kControlVersion ||
      control->rank != pe || control->teams != spec_.teams) {
    return Status::Assertion(ErrorCode::kBackendError, "peer control block is not valid",
                             {{"pe", std::to_string(pe)}, {"magic", Hex(control->magic)},
                              {"version", std::to_string(control->version)}});
  }
  return Status::Ok();
}

Status HostBackend::MakeDevice(int local_pes, std::vector<int> hosts,
                               const std::vector<bool>& watched) {
  const int workers =
      spec_.copy_workers > 0 ? spec_.copy_workers : DefaultCopyWorkers(local_pes);
  workers_ = std::make_unique<CopyWorkers>(workers - 1);
  std::vector<std::byte*> heaps(spec_.size);
  std::vector<ControlBlock*> controls(spec_.size);
  for (int pe = 0; pe < spec_.size; ++pe) {
    heaps[pe] = PeerHeapAddress(pe);
    controls[pe] = PeerControl(pe);
  }
  device_ = std::make_unique<HostDevice>(spec_.rank, spec_.size, spec_.teams, spec_.timeout,
                                         wait_policy_,
                                         std::move(heaps), std::move(controls), workers_.get(),
                                         &latch_, spec_.blocking_ops);
  if (!transport_) return Status::Ok();
  std::vector<PeerRoute> routes(spec_.size);
  for (int pe = 0; pe < spec_.size; ++pe) routes[pe] = placement_[pe].route;
  device_->AttachRemote(transport_.get(), std::move(routes), heap_region_bytes_,
                        std::move(hosts), [this](int pe) {
    Lost(pe, Status::Assertion(ErrorCode::kPeerLost, "a peer PE was lost",
                               {{"pe", std::to_string(pe)},
                                {"host", placement_[pe].host},
                                {"noticed", "a PE of this host passed it on"}}));
  });
  return StartRemotes(watched);
}

Status HostBackend::StartMonitor(const std::vector<int>& pids) {
  std::vector<std::atomic<std::int32_t>*> lost_words(spec_.size);
  std::vector<std::atomic<std::int32_t>*> departed(spec_.size);
  for (int pe = 0; pe < spec_.size; ++pe) {
    const bool mapped = placement_[pe].route != PeerRoute::kRemote;
    lost_words[pe] = mapped ? &PeerControl(pe)->lost_peer : nullptr;
    departed[pe] = mapped ? &PeerControl(pe)->departed : nullptr;
  }
  // In a job across hosts a PE of this host that exits is passed on to the other hosts.
  std::function<void(int)> exited;
  if (transport_) {
    exited = [this](int pe) { Lost(pe, Status::Ok()); };
  }
  return monitor_.Start(spec_.rank, pids, &latch_, &PeerControl(spec_.rank)->doorbell,
                        std::move(lost_words), std::move(exited), std::move(departed));
}

void HostBackend::Departing() {
  if (ControlBlock* own = PeerControl(spec_.rank); own != nullptr) {
    own->departed.store(1, std::memory_order_seq_cst);
  }
}

Status HostBackend::DestroyHeap() {
  RequireCallable<HostCall::kUnmapSegments, CallSite::kHostThread>();
  monitor_.Stop();  // it rings the local doorbell, which is about to be unmapped
  // Before the segment goes: once the worker is destroyed no remote write can land here.
  if (transport_) transport_->Close();
  transport_.reset();
  pin_.Restore();
  device_.reset();
  workers_.reset();  // joins the copy threads
  Status result;
  for (std::size_t pe = 0; pe < mappings_.size(); ++pe) {
    Mapping& mapping = mappings_[pe];
    if (mapping.base == nullptr) continue;
    if (static_cast<int>(pe) == spec_.rank && heap_region_bytes_ > 0 &&
        heap_region_bytes_ < mapping.bytes) {
      // The local heap's addresses stay reserved for the rest of the process, as fresh private
      // zero pages (committed only where touched): a stale alias of a heap tensor (a numpy
      // array, a DLPack capsule) reads zeros instead of crashing the process, and the address
      // space is never reused for unrelated memory it could corrupt. The segment itself (and
      // its control block) is released.
      void* zeros = ::mmap(mapping.base, heap_region_bytes_, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
      if (zeros == MAP_FAILED && result.ok()) {
        result = Errno("reserving the closed heap's addresses failed", errno);
      }
      if (::munmap(mapping.base + heap_region_bytes_, mapping.bytes - heap_region_bytes_) != 0 &&
          result.ok()) {
        result = Errno("unmapping a heap segment failed", errno);
      }
    } else if (::munmap(mapping.base, mapping.bytes) != 0 && result.ok()) {
      result = Errno("unmapping a heap segment failed", errno);
    }
    mapping = Mapping{};
  }
  mappings_.clear();
  if (fd_ >= 0) {
    if (::close(fd_) != 0 && result.ok()) result = Errno("closing the heap segment failed", errno);
    fd_ = -1;
  }
  return result;
}

std::byte* HostBackend::LocalHeapBase() const { return PeerHeapAddress(spec_.rank); }

std::byte* HostBackend::PeerHeapAddress(int pe) const {
  if (pe < 0 || pe >= static_cast<int>(mappings_.size())) return nullptr;
  return mappings_[pe].base;
}

ControlBlock* HostBackend::PeerControl(int pe) const {
  std::byte* base = PeerHeapAddress(pe);
  return base == nullptr ? nullptr
                         : std::launder(reinterpret_cast<ControlBlock*>(base + heap_region_bytes_));
}

Status HostBackend::Agree(const data_plane::CollectiveGroup& group,
                          const CollectiveDescriptor& mine, std::string_view operation,
                          Agreement* agreement) {
  RequireCallable<HostCall::kExchange, CallSite::kHostThread>();
  HPS_RETURN_IF_ERROR(CompleteNbi());
  return device_->Agree<CallSite::kHostThread>(group, mine, operation, nullptr, agreement);
}

Status HostBackend::ExchangeWithPeers(std::span<const PeerRound> peers, const ExchangeWords& mine,
                                      std::string_view operation,
                                      std::vector<ExchangeWords>* theirs) {
  RequireCallable<HostCall::kExchange, CallSite::kHostThread>();
  return device_->ExchangeWithPeers<CallSite::kHostThread>(peers, mine, operation, theirs);
}

WaitInfo HostBackend::Wait() const {
  WaitInfo info;
  info.mode = std::string(WaitModeName(wait_mode_));
  info.spin = wait_policy_.spin;
  info.yield = wait_policy_.yield;
  info.sleeps = !wait_policy_.spins_forever();
  info.pinning = wait_mode_ == WaitMode::kAuto
                     ? pin_.description()
                     : "none (HYPER_PARALLEL_SHMEM_WAIT=" + info.mode + ")";
  info.pinned = wait_mode_ == WaitMode::kAuto && pin_.pinned();
  return info;
}

std::string HostBackend::StreamLabel(StreamRef stream) const {
  return host::StreamLabel(static_cast<const HostStream*>(stream.native));
}

Status HostBackend::Quiesce() {
  HPS_RETURN_IF_ERROR(DrainAllStreams(spec_.timeout));
  // Remote operations have left this PE; wait until they landed (a quiet). Not once a peer is
  // lost: its operations never land.
  return transport_ && !latch_.failed() ? transport_->Quiet() : Status::Ok();
}

StreamRef HostBackend::CurrentStream() const { return StreamRef{host::CurrentStream()}; }

// Put, get and signal follow PE `pe`'s route (PeerAccess): a copy into its mapping or the
// remote transport's call, on the stream's executor.
Status HostBackend::Put(StreamRef stream, std::uint64_t offset, const void* source,
                        std::uint64_t bytes, int pe, KeepAlive keep_alive) {
  if (bytes == 0) return Status::Ok();
  const PeerAccess* access = &device_->access();
  return Submit(stream, "put", [access, offset, source, bytes, pe,
                                hold = std::move(keep_alive)]<CallSite kSite>() {
    return access->Put<kSite>(pe, offset, source, bytes);
  });
}

Status HostBackend::Get(StreamRef stream, void* destination, std::uint64_t offset,
                        std::uint64_t bytes, int pe, KeepAlive keep_alive) {
  if (bytes == 0) return Status::Ok();
  const PeerAccess* access = &device_->access();
  return Submit(stream, "get", [access, destination, offset, bytes, pe,
                                hold = std::move(keep_alive)]<CallSite kSite>() {
    return access->Get<kSite>(pe, destination, offset, bytes);
  });
}

Status HostBackend::Signal(StreamRef stream, std::uint64_t offset, SignalWidth width, SignalOp op,
                           std::int64_t value, int pe) {
  return SubmitPutSignal(stream, "signal", 0, nullptr, 0,
                         ToRemoteSignal(offset, width, op, value), pe, nullptr);
}

Status HostBackend::PutSignal(StreamRef stream, std::uint64_t offset, const void* source,
                              std::uint64_t bytes, std::uint64_t signal_offset,
                              SignalWidth width, SignalOp op, std::int64_t value, int pe,
                              KeepAlive keep_alive) {
  return SubmitPutSignal(stream, "put_signal", offset, source, bytes,
                         ToRemoteSignal(signal_offset, width, op, value), pe,
                         std::move(keep_alive));
}

Status HostBackend::SubmitPutSignal(StreamRef stream, std::string_view name,
                                    std::uint64_t offset, const void* source,
                                    std::uint64_t bytes, const RemoteSignal& signal, int pe,
                                    KeepAlive keep_alive) {
  const PeerAccess* access = &device_->access();
  // Data before signal: a copy then a seq_cst write, or one message (a put, a fence and an
  // atomic on UCX's rma path).
  return Submit(stream, name,
                [access, offset, source, bytes, signal, pe,
                 hold = std::move(keep_alive)]<CallSite kSite>() {
                  return access->PutSignal<kSite>(pe, offset, source, bytes, signal);
                });
}

Status HostBackend::WaitSignal(StreamRef stream, std::uint64_t offset, SignalWidth width,
                               Comparison comparison, std::int64_t value) {
  const std::byte* address = LocalHeapBase() + offset;
  const int rank = spec_.rank;
  const auto timeout = spec_.timeout;
  const HostDevice* device = device_.get();
  const auto* host_stream = static_cast<const HostStream*>(stream.native);
  return Submit(stream, "wait_signal", [=]<CallSite kSite>() {
    auto observe = [address, width]() -> std::int64_t {
      return width == SignalWidth::k32 ? LoadSignal<std::int32_t>(address)
                                       : LoadSignal<std::int64_t>(address);
    };
    auto notice = [&] {
      return device->Register("wait_signal", host_stream, [=] {
        return "signal=" + Hex(address) + ", comparison=" +
               std::string(ComparisonName(comparison)) + ", expected=" + std::to_string(value) +
               ", observed=" + std::to_string(observe());
      });
    };
    const WaitOutcome outcome = device->Await<kSite>(
        [&] { return Compare(observe(), comparison, value); }, notice);
    if (outcome == WaitOutcome::kReady) return Status::Ok();
    if (outcome == WaitOutcome::kAborted) return device->latch().Get();
    return Status::Assertion(ErrorCode::kTimeout, "wait_signal timed out",
                             {{"pe", std::to_string(rank)},
                              {"address", Hex(address)},
                              {"comparison", std::string(ComparisonName(comparison))},
                              {"expected", std::to_string(value)},
                              {"observed", std::to_string(observe())},
                              {"timeout_ms", std::to_string(timeout.count())}});
  });
}

Status HostBackend::LaunchCollective(StreamRef stream, const data_plane::CollectiveGroup& group,
                                     const CollectiveDescriptor& descriptor,
                                     std::string_view name, Kernel kernel, KeepAlive keep_alive) {
  const HostDevice* device = device_.get();
  const auto* host_stream = static_cast<const HostStream*>(stream.native);
  return Submit(stream, "launch", [this, device, host_stream, group, descriptor,
                                   kernel = std::move(kernel),
                                   label = std::string(name),
                                   hold = std::move(keep_alive)]<CallSite kSite>() {
    // Non-blocking operations complete first: after a collective their sources may be reused.
    Status status = CompleteNbi();
    // The exchange publishes this PE's arrival after its earlier writes and acquires every
    // peer's: without a kernel it is the barrier.
    if (status.ok()) status = device->ExchangeAndMatch<kSite>(group, descriptor, label, host_stream);
    // A refusal (CollectiveDescriptor::Refusal): this PE raised its own reason when it refused;
    // the peers' mismatch is theirs to report.
    if (descriptor.refused && status.code() == ErrorCode::kCollectiveMismatch) {
      status = Status::Ok();
    }
    if (status.ok() && kernel) {
      HostKernelApi<kSite> api(*device, host_stream);
      status = kernel(api);
    }
    return std::move(status).At(label, "execute");
  });
}

Status HostBackend::Launch(StreamRef stream, std::string_view name, Kernel kernel,
                          KeepAlive keep_alive) {
  const HostDevice* device = device_.get();
  const auto* host_stream = static_cast<const HostStream*>(stream.native);
  // The name outlives the call: it tags a failure of work queued on a stream.
  return Submit(stream, "launch", [device, host_stream, kernel = std::move(kernel),
                                   label = std::string(name),
                                   hold = std::move(keep_alive)]<CallSite kSite>() {
    HostKernelApi<kSite> api(*device, host_stream);
    Status status = kernel(api);
    return status.At(label, "execute");
  });
}

}  // namespace hyper_parallel::shmem::host
