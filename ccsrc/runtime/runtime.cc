#include "runtime/runtime.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>
#include <thread>

#include "backends/host_identity.h"
#include "backends/registry.h"
#include "data_plane/pe_address.h"
#include "data_plane/team_kernel_api.h"
#include "base/log.h"

namespace hyper_parallel::shmem {

static_assert(HeapAllocator::kMaxAlignment == kHeapBaseAlignment,
              "an offset the allocator aligns must be an address aligned alike");
namespace {

std::string JoinInts(const std::vector<int>& values) {
  std::string text = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ",";
    text += std::to_string(values[i]);
  }
  return text + "]";
}

// The fields every PE must share, compared at init.
std::string InitRecord(const Config& config, std::string_view backend, const DeviceId& device,
                       int size, const std::vector<int>& global_ranks) {
  std::ostringstream text;
  text << "heap_bytes=" << config.heap_bytes << ";timeout_sec=" << config.timeout_sec
       << ";backend=" << backend << ";device_type=" << static_cast<int>(device.type)
       << ";quarantine_bytes=" << config.quarantine() << ";max_teams=" << config.max_teams
       << ";size=" << size << ";global_ranks=" << JoinInts(global_ranks)
       << ";remote_peers=" << config.remote_peers << ";peer_silence_ms=" << config.peer_silence_ms;
  return text.str();
}

// FNV-1a over (offset, bytes) of the leaked allocations: equal on PEs that leaked alike.
std::uint64_t LeakDigest(const std::vector<AllocationRecord>& leaks) {
  std::uint64_t digest = 1469598103934665603ull;
  for (const AllocationRecord& record : leaks) {
    for (std::uint64_t word : {record.offset, record.bytes}) {
      for (int byte = 0; byte < 8; ++byte) {
        digest = (digest ^ ((word >> (8 * byte)) & 0xff)) * 1099511628211ull;
      }
    }
  }
  return digest;
}

// Work that cannot wait and is this small (or only enqueued) runs under the entry mutex: a few
// microseconds of copying cost less than counting a call in flight. Larger inline copies run
// outside it, so another thread is never held up behind a big put.
constexpr std::uint64_t kUnderMutexBytes = 64ull << 10;

// The shutdown facts a close descriptor carries in its extra words.
enum CloseFact : int { kLiveCount = 0, kLeakedCount = 1, kLeakDigest = 2 };

}  // namespace


std::string_view RuntimeStateName(RuntimeState state) {
  switch (state) {
    case RuntimeState::kUninitialized: return "uninitialized";
    case RuntimeState::kInitializing: return "initializing";
    case RuntimeState::kReady: return "ready";
    case RuntimeState::kClosing: return "closing";
    case RuntimeState::kFailed: return "failed";
  }
  return "unknown";
}

Status DefaultBackendFactory(BackendKind kind, std::unique_ptr<Backend>* out) {
  return CreateBackend(kind, out);
}

Runtime& Runtime::Process() {
  static Runtime* runtime = new Runtime();  // never destroyed: deleters may run at exit
  return *runtime;
}

Runtime::Runtime() = default;

Runtime::~Runtime() {
  MutexLock lock(&mutex_);
  if (backend_) backend_->DestroyHeap();
}

RuntimeState Runtime::state() {
  MutexLock lock(&mutex_);
  if (state_ == RuntimeState::kReady && backend_) {
    if (Status health = backend_->Health(); !health.ok()) EnterTerminal(health);
  }
  return state_;
}

int Runtime::rank() const {
  MutexLock lock(&mutex_);
  return rank_;
}

int Runtime::size() const {
  MutexLock lock(&mutex_);
  return size_;
}

std::chrono::milliseconds Runtime::timeout() const {
  MutexLock lock(&mutex_);
  return config_.timeout();
}

Status Runtime::KeepFailureLocked(Status status, std::string_view operation,
                                  std::string_view phase, bool backend_work) {
  if (backend_work && backend_) {
    if (Status health = backend_->Health(); !health.ok()) EnterTerminal(health);
  }
  status.At(operation, phase);
  latest_failure_ = status;
  return status;
}

void Runtime::EnterTerminal(const Status& failure) {
  if (state_ == RuntimeState::kFailed) return;
  state_ = RuntimeState::kFailed;
  terminal_ = failure;
  HPS_LOG_ERROR("the runtime is terminal; every later call fails and close() only releases "
                "this process's resources: " + failure.ToString());
}

void Runtime::RollBackInit() {
  if (backend_) backend_->DestroyHeap();
  backend_.reset();
  bootstrap_.reset();
  heap_base_ = nullptr;
  rank_ = -1;
  size_ = 0;
  global_ranks_.clear();
  teams_.clear();
  slot_high_.clear();
  pair_rounds_.clear();
  creating_team_ = false;
  collectives_in_flight_.store(0);
  backend_name_.clear();
  state_ = RuntimeState::kUninitialized;
}

Status Runtime::Init(InitOptions options) {
  constexpr std::string_view kOp = "init";
  {
    MutexLock lock(&mutex_);
    if (state_ == RuntimeState::kFailed) {
      return RejectLocked(terminal_.Retagged(kOp, "state"), kOp, "state");
    }
    if (state_ != RuntimeState::kUninitialized) {
      return RejectLocked(
          Status::Assertion(ErrorCode::kInvalidState,
                            state_ == RuntimeState::kReady
                                ? "runtime is already initialised"
                                : "runtime is initialising or closing on another thread",
                            {{"state", std::string(RuntimeStateName(state_))},
                             {"rank", std::to_string(rank_)},
                             {"lifecycle", std::to_string(registry_.lifecycle())}}),
          kOp, "state");
    }
    if (!options.bootstrap) {
      return RejectLocked(
          Status::Contract(ErrorCode::kInvalidArgument, "bootstrap", "non-null", "null"), kOp,
          "validate");
    }
    state_ = RuntimeState::kInitializing;  // other entries are refused until it is done
  }
  // Everything below waits on peers, so it runs without the mutex, on locals; the outcome is
  // committed (or the state rolled back) under the mutex at the end.
  auto fail = [&](Status status, std::string_view phase, std::unique_ptr<Backend> backend) {
    if (backend) backend->DestroyHeap();
    MutexLock lock(&mutex_);
    state_ = RuntimeState::kUninitialized;
    return RejectLocked(std::move(status), kOp, phase);
  };
  Config config;
  if (Status parsed = Config::FromEnvironment(options.env ? options.env : ProcessEnvironment(),
                                              &config);
      !parsed.ok()) {
    return fail(parsed, "config", nullptr);
  }
  BackendKind kind = BackendKind::kAuto;
  if (Status checked = CheckBackendSettings(config, &kind); !checked.ok()) {
    return fail(checked, "config", nullptr);
  }
  const int rank = options.bootstrap->rank();
  const int size = options.bootstrap->size();
  std::vector<int> global_ranks = options.global_ranks;
  if (global_ranks.empty()) {
    for (int r = 0; r < size; ++r) global_ranks.push_back(r);
  }
  const bool increasing =
      std::adjacent_find(global_ranks.begin(), global_ranks.end(),
                         [](int a, int b) { return a >= b; }) == global_ranks.end();
  if (static_cast<int>(global_ranks.size()) != size || !increasing || global_ranks.front() < 0) {
    return fail(Status::Contract(ErrorCode::kInvalidArgument, "global ranks",
                                 std::to_string(size) + " non-negative ranks in increasing order",
                                 JoinInts(global_ranks)),
                "validate", nullptr);
  }

  std::unique_ptr<Backend> backend;
  const BackendFactory& factory =
      options.backend_factory ? options.backend_factory : BackendFactory(DefaultBackendFactory);
  if (Status made = factory(kind, &backend); !made.ok()) {
    return fail(made, "backend", nullptr);
  }
  log::SetLevel(config.log_level);
  log::SetRank(rank);
  DeviceId device = backend->CurrentDevice();
  Bootstrap& bootstrap = *options.bootstrap;
  const auto timeout = config.timeout();

  // 1. Every PE must run with the same configuration.
  //    Each record also says where its PE runs ("|host=..."), compared apart.
  std::vector<std::string> records;
  const std::string mine = InitRecord(config, backend->name(), device, size, global_ranks);
  const HostIdentity here = HostIdentity::Current();
  const std::string where = "|host=" + std::string(reinterpret_cast<const char*>(&here), sizeof here);
  if (Status gathered = bootstrap.AllGather(mine + where, timeout, &records); !gathered.ok()) {
    return fail(gathered, "bootstrap", std::move(backend));
  }
  std::vector<HostIdentity> hosts(size);
  for (int pe = 0; pe < size; ++pe) {
    const std::size_t bar = records[pe].rfind("|host=");
    if (bar != std::string::npos && records[pe].size() - bar - 6 == sizeof(HostIdentity)) {
      std::memcpy(&hosts[pe], records[pe].data() + bar + 6, sizeof(HostIdentity));
      records[pe].resize(bar);
    }
    if (records[pe] != mine) {
      return fail(Status::Assertion(ErrorCode::kInvalidConfig,
                                    "PEs disagree on the configuration",
                                    {{"pe", std::to_string(pe)},
                                     {"theirs", records[pe]},
                                     {"ours", mine}}),
                  "bootstrap", std::move(backend));
    }
  }

  // A device backend maps its peers' memory (CUDA IPC, the CANN library's own heap): it
  //    reaches one host only. The host backend reaches other hosts over UCX
  //    (docs/scale-out.md).
  if (const std::string backend_name(backend->name()); backend_name != "host") {
    std::string layout, others;
    for (int pe = 0; pe < size; ++pe) {
      if (!hosts[pe].SameHost(hosts[rank])) others += (others.empty() ? "" : ",") + std::to_string(pe);
    }
    if (!others.empty()) {
      for (int pe = 0; pe < size; ++pe) {
        layout += (layout.empty() ? "" : "; ") + std::to_string(pe) + "@" + hosts[pe].Label();
      }
      return fail(Status::Assertion(ErrorCode::kUnsupportedCapability,
                                    "this backend reaches PEs on its own host only; PEs on "
                                    "several hosts need the host backend (over UCX)",
                                    {{"backend", backend_name},
                                     {"pe", std::to_string(rank)},
                                     {"other_host_pes", others},
                                     {"pes", layout}}),
                  "bootstrap", std::move(backend));
    }
  }

  // 2. Create the local heap, publish it, map every peer's; each step tells every PE whether
  //    every other one succeeded, so a failure anywhere rolls back everywhere at once.
  auto exchange_outcome = [&](const Status& local, std::string_view step,
                              std::string payload, std::vector<std::string>* all) -> Status {
    const std::string message = local.ok() ? "K" + payload : "E" + local.message();
    HPS_RETURN_IF_ERROR(bootstrap.AllGather(message, timeout, all));
    if (!local.ok()) return local;
    for (int pe = 0; pe < size; ++pe) {
      if ((*all)[pe].empty() || (*all)[pe][0] != 'K') {
        return Status::Assertion(ErrorCode::kBackendError, "a peer failed to initialise",
                                 {{"pe", std::to_string(pe)},
                                  {"step", std::string(step)},
                                  {"reason", (*all)[pe].substr(std::min<std::size_t>(1, (*all)[pe].size()))}});
      }
      (*all)[pe].erase(0, 1);
    }
    return Status::Ok();
  };

  HeapSpec spec;
  spec.rank = rank;
  spec.size = size;
  spec.heap_bytes = config.heap_bytes;
  spec.timeout = timeout;
  spec.copy_workers = static_cast<int>(config.copy_workers);
  spec.blocking_ops = &blocking_ops_;
  spec.wait = config.wait;
  spec.teams = static_cast<int>(config.max_teams);
  spec.remote_peers = config.remote_peers;
  spec.ucx_library = config.ucx_library;
  spec.peer_silence = std::chrono::milliseconds(config.peer_silence_ms);
  // A backend that learns from the handles that it needs a second round (the host backend's
  // network addresses, once it knows some peer is remote) gathers it through the bootstrap.
  spec.all_gather = [&bootstrap, timeout](std::string_view bytes, std::vector<std::string>* all) {
    return bootstrap.AllGather(bytes, timeout, all);
  };
  std::string handle;
  std::vector<std::string> handles;
  Status created = backend->CreateHeap(spec, &handle);
  if (Status step = exchange_outcome(created, "create_heap", handle, &handles); !step.ok()) {
    return fail(step, "create_heap", std::move(backend));
  }
  Status opened = backend->OpenPeers(handles);
  std::vector<std::string> outcomes;
  if (Status step = exchange_outcome(opened, "open_peers", "", &outcomes); !step.ok()) {
    return fail(step, "open_peers", std::move(backend));
  }
  // Frozen now: a device backend may have selected the device while it made the heap.
  device = backend->CurrentDevice();

  MutexLock lock(&mutex_);
  config_ = config;
  device_ = device;
  rank_ = rank;
  size_ = size;
  global_ranks_ = global_ranks;
  {
    auto members = std::make_shared<std::vector<int>>(size);
    for (int pe = 0; pe < size; ++pe) (*members)[pe] = pe;
    auto world = std::make_shared<TeamState>();
    world->group = data_plane::CollectiveGroup{std::move(members), rank, /*sync_slot=*/0};
    world->predefined = true;
    teams_.assign(config.max_teams, nullptr);
    teams_[0] = std::move(world);
    slot_high_.assign(config.max_teams, 0);
    pair_rounds_.assign(static_cast<std::size_t>(size), 0);
    creating_team_ = false;
  }
  bootstrap_ = std::move(options.bootstrap);
  backend_ = std::move(backend);
  backend_name_ = std::string(backend_->name());
  heap_base_ = backend_->LocalHeapBase();
  allocator_.Reset(config.heap_bytes);
  allocator_.SetQuarantine(config.quarantine());
  registry_.BeginLifecycle();
  heap_lifecycle_.store(registry_.lifecycle(), std::memory_order_release);
  collectives_in_flight_.store(0);
  latest_failure_ = Status::Ok();  // diagnostics describe this lifecycle
  state_ = RuntimeState::kReady;
  HPS_LOG_INFO("runtime ready: lifecycle=" + std::to_string(registry_.lifecycle()) +
               ", size=" + std::to_string(size) + ", backend=" + backend_name_ +
               ", device=" + device_.ToString() + ", heap_bytes=" +
               std::to_string(config.heap_bytes) + ", heap_base=" + Hex(heap_base_));
  return Status::Ok();
}

bool Runtime::WaitForCallsToEnd() {
  const auto deadline = std::chrono::steady_clock::now() + config_.timeout();
  // Inline collectives are counted as collectives in flight, not as calls.
  while (calls_in_flight_.load(std::memory_order_acquire) > 0 ||
         collectives_in_flight_.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    mutex_.Unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    mutex_.Lock();
  }
  return true;
}

Status Runtime::TerminalShutdown() {
  constexpr std::string_view kOp = "shutdown";
  if (backend_) {
    // Calls in flight give up at once (the backend's failure latch aborts every wait); queued
    // work fails without running. Only then may the heap go.
    const bool ended = WaitForCallsToEnd();
    Backend* backend = backend_.get();
    mutex_.Unlock();
    const Status drained = backend->Quiesce();
    mutex_.Lock();
    if (ended && drained.ok() && backend_) {
      backend_->DestroyHeap();
      backend_.reset();
      bootstrap_.reset();
      heap_base_ = nullptr;
      heap_lifecycle_.store(0, std::memory_order_release);
      registry_.EndLifecycle();
      allocator_.Reset(0);
      HPS_LOG_INFO("terminal runtime released this process's resources");
    }
  }
  return RejectLocked(terminal_.Retagged(kOp, "state"), kOp, "state");
}

Status Runtime::Shutdown() {
  constexpr std::string_view kOp = "shutdown";
  MutexLock lock(&mutex_);
  if (Status ready = CheckReady(kOp); !ready.ok()) {
    if (state_ == RuntimeState::kFailed) return TerminalShutdown();
    return RejectLocked(std::move(ready), kOp, "state");
  }
  std::uint64_t sequence = 0;
  HPS_REJECT_IF_ERROR(WaitForOtherCollectives(World(), kOp), kOp, "state");
  HPS_REJECT_IF_ERROR(ClaimCollective(World(), OwnerOf({}, true), kOp, &sequence), kOp, "state");
  // Close the gate: from here on every other entry is refused, so nothing new is queued while
  // the streams drain. Calls still executing on other threads make this PE refuse.
  state_ = RuntimeState::kClosing;
  int other_calls = calls_in_flight_.load(std::memory_order_acquire);
  Backend* backend = backend_.get();
  const data_plane::CollectiveGroup world_group = World().group;
  auto call = std::make_unique<CallScope>(this);  // a terminal shutdown elsewhere waits for it
  lock.Unlock();
  const Status drained = backend->Quiesce();
  lock.Lock();
  // A team collective another thread runs on its default stream right now is a call in flight
  // too (queued ones drained above).
  for (std::size_t slot = 1; slot < teams_.size(); ++slot) {
    const TeamState* team = teams_[slot].get();
    if (team != nullptr && team->in_flight.load() > 0 && team->owner.stream == nullptr) {
      ++other_calls;
    }
  }

  AdoptOrphans();  // work that just drained may have dropped the last reference to a leak
  const std::vector<AllocationRecord> leaks = registry_.Leaked();
  // Close compares kind and number only: its facts are what every PE reads below.
  CollectiveDescriptor mine = CollectiveDescriptor::Of("close", 0);
  mine.sequence = sequence;
  mine.local = other_calls > 0 ? ErrorCode::kInvalidState
                               : drained.ok() ? ErrorCode::kOk : drained.code();
  mine.extra[kLiveCount] = registry_.live_count();
  mine.extra[kLeakedCount] = leaks.size();
  mine.extra[kLeakDigest] = LeakDigest(leaks);
  lock.Unlock();
  std::vector<CollectiveDescriptor> all;
  Status agreed = backend->ExchangeDescriptors(world_group, mine, kOp, &all);
  if (agreed.ok()) agreed = MatchDescriptors(mine, all);
  lock.Lock();
  ReleaseCollectiveLocked(World());
  call.reset();

  auto refuse = [&](Status reason, std::string_view phase) {
    mutex_.AssertHeld();  // called below, where `lock` holds it
    // Every PE refuses alike: nothing changed anywhere.
    if (state_ == RuntimeState::kClosing) state_ = RuntimeState::kReady;
    return RejectLocked(std::move(reason), kOp, phase);
  };
  if (!agreed.ok()) {
    if (Status health = backend_->Health(); !health.ok()) EnterTerminal(health);
  }
  if (state_ == RuntimeState::kFailed) {
    if (!agreed.ok()) RejectLocked(agreed, kOp, "agree");
    return TerminalShutdown();
  }
  if (!agreed.ok()) return refuse(std::move(agreed), "agree");
  std::vector<int> busy, holders;
  bool same_leaks = true;
  for (int pe = 0; pe < size_; ++pe) {
    const CollectiveDescriptor& theirs = all[pe];
    if (theirs.local != ErrorCode::kOk) busy.push_back(pe);
    if (theirs.extra[kLiveCount] != 0) holders.push_back(pe);
    if (theirs.extra[kLiveCount] != theirs.extra[kLeakedCount] ||
        theirs.extra[kLeakedCount] != mine.extra[kLeakedCount] ||
        theirs.extra[kLeakDigest] != mine.extra[kLeakDigest]) {
      same_leaks = false;
    }
  }
  if (!busy.empty()) {
    return refuse(Status::Assertion(ErrorCode::kInvalidState,
                                    "shutdown refused: PEs still had calls in flight on other "
                                    "threads, or queued work that did not drain",
                                    {{"pes", JoinInts(busy)},
                                     {"calls_in_flight_here", std::to_string(other_calls)},
                                     {"drain", drained.ok() ? "ok" : drained.message()}}),
                  "validate");
  }
  if (!holders.empty() && !same_leaks) {
    std::string ids;
    for (const AllocationRecord& record : registry_.Live()) {
      ids += (ids.empty() ? "" : ",") + std::to_string(record.id);
    }
    return refuse(Status::Assertion(ErrorCode::kInvalidState,
                                    "shutdown refused: live allocations remain",
                                    {{"pes_with_live_allocations", JoinInts(holders)},
                                     {"live_count", std::to_string(mine.extra[kLiveCount])},
                                     {"leaked_count", std::to_string(leaks.size())},
                                     {"live_ids", "[" + ids + "]"}}),
                  "validate");
  }
  // Every PE is quiescent, past the barrier, and agreed: only now is anything reclaimed.
  if (!leaks.empty()) {
    std::string ids;
    for (const AllocationRecord& record : leaks) {
      ids += (ids.empty() ? "" : ",") + std::to_string(record.id);
      allocator_.Release(record.offset);
      registry_.Release(record.id);
    }
    HPS_LOG_ERROR("reclaimed leaked allocations collectively at shutdown (every PE leaked the "
                  "same ones): count=" + std::to_string(leaks.size()) + ", ids=[" + ids + "]");
  }
  // Where peers map this PE's heap, it may be freed only once every PE has closed its mappings
  // of the others': each closes, all meet at a barrier, then each frees its own
  // (backends/backend.h, PeersMapTheHeap). The gate is closed: the waits run without the mutex.
  Status unmapped;
  if (backend_->PeersMapTheHeap()) {
    Bootstrap* bootstrap = bootstrap_.get();
    const auto timeout = config_.timeout();
    lock.Unlock();
    unmapped = backend->ClosePeers();
    if (unmapped.ok()) unmapped = bootstrap->Barrier(timeout);
    lock.Lock();
    if (unmapped.ok()) backend_->PeersClosed();
  }
  Status destroyed = backend_->DestroyHeap();
  if (destroyed.ok() && !unmapped.ok()) destroyed = std::move(unmapped);
  if (!destroyed.ok()) {
    backend_.reset();
    EnterTerminal(destroyed);
    HPS_LOG_ERROR("native shutdown failed; the runtime is terminal: " + destroyed.message());
    return RejectLocked(destroyed, kOp, "native_shutdown");
  }
  heap_lifecycle_.store(0, std::memory_order_release);
  registry_.EndLifecycle();
  allocator_.Reset(0);
  const std::uint64_t lifecycle = registry_.lifecycle();
  RollBackInit();
  HPS_LOG_INFO("runtime shut down: lifecycle=" + std::to_string(lifecycle));
  return Status::Ok();
}

Status Runtime::CheckReady(std::string_view operation) {
  if (state_ != RuntimeState::kReady) [[unlikely]] {
    if (state_ == RuntimeState::kFailed) return terminal_.Retagged(operation, "state");
    return Status::Assertion(ErrorCode::kInvalidState,
                             state_ == RuntimeState::kClosing
                                 ? "runtime is closing"
                                 : state_ == RuntimeState::kInitializing
                                       ? "runtime is initialising"
                                       : "runtime is not initialised",
                             {{"operation", std::string(operation)},
                              {"state", std::string(RuntimeStateName(state_))}});
  }
  if (Status health = backend_->Health(); !health.ok()) [[unlikely]] {
    EnterTerminal(health);
    return terminal_.Retagged(operation, "state");
  }
  const DeviceId current = backend_->CurrentDevice();
  if (!(current == device_)) {
    return Status::Assertion(ErrorCode::kDeviceMismatch,
                             "current device differs from the one frozen at initialisation",
                             {{"initial_device", device_.ToString()},
                              {"current_device", current.ToString()}});
  }
  return Status::Ok();
}

Status Runtime::CheckPe(int pe) const {
  if (pe < 0 || pe >= size_) {
    return Status::Contract(ErrorCode::kInvalidArgument, "pe",
                            "in [0, " + std::to_string(size_) + ")", std::to_string(pe));
  }
  return Status::Ok();
}

Status Runtime::ResolveOperand(const SymmetricView& view, std::uint64_t* offset,
                               AllocationRecord* record, ErrorCode freed_code) const {
  if (!data_plane::InsideHeap(view.data, view.bytes, heap_base_, config_.heap_bytes)) {
    // A stale or freed tensor is reported as such wherever its pointer lies.
    HPS_RETURN_IF_ERROR(registry_.CheckId(view.id, freed_code));
    return Status::Contract(
        ErrorCode::kInvalidArgument, "symmetric operand",
        "inside the symmetric heap [" + Hex(heap_base_) + ", " +
            Hex(static_cast<const void*>(heap_base_ + config_.heap_bytes)) + ")",
        "[" + Hex(view.data) + ", +" + std::to_string(view.bytes) + ")");
  }
  *offset = data_plane::HeapOffset(view.data, heap_base_);
  return freed_code == ErrorCode::kDoubleFree
             ? registry_.ResolveWhole(view.id, *offset, view.bytes, record)
             : registry_.Resolve(view.id, *offset, view.bytes, record);
}

Runtime::CollectiveOwner Runtime::OwnerOf(StreamRef stream, bool runs_inline) const {
  return runs_inline ? CollectiveOwner{nullptr, CurrentThreadId()}
                     : CollectiveOwner{stream.native, 0};
}

std::string Runtime::OwnerLabel(const CollectiveOwner& owner) const {
  if (owner.stream == nullptr) return DefaultStreamLabel(owner.thread);
  return backend_ ? backend_->StreamLabel(StreamRef{owner.stream}) : "a stream";
}

Status Runtime::ClaimCollective(TeamState& team, const CollectiveOwner& owner,
                                std::string_view operation, std::uint64_t* sequence) {
  const int in_flight = team.in_flight.load();
  if (in_flight > 0 && !(team.owner == owner)) {
    std::vector<Field> fields{{"operation", std::string(operation)}};
    if (team.group.sync_slot != 0) fields.push_back({"team", GroupLabel(team.group)});
    fields.push_back({"this_stream", OwnerLabel(owner)});
    fields.push_back({"in_flight_on", OwnerLabel(team.owner)});
    fields.push_back({"in_flight", std::to_string(in_flight)});
    fields.push_back({"latest_sequence", std::to_string(team.sequence)});
    return Status::Assertion(
        ErrorCode::kInvalidState,
        "a collective of this PE is already in flight on another stream; keep a PE's "
        "collectives of one team on one stream at a time (synchronize that stream first)",
        fields);
  }
  team.owner = owner;
  team.in_flight.fetch_add(1);
  collectives_in_flight_.fetch_add(1);
  *sequence = ++team.sequence;
  std::uint64_t& high = slot_high_[static_cast<std::size_t>(team.group.sync_slot)];
  high = std::max(high, team.sequence);
  return Status::Ok();
}

Status Runtime::WaitForOtherCollectives(TeamState& team, std::string_view operation) {
  const CollectiveOwner mine{nullptr, CurrentThreadId()};
  // Collectives queued on asynchronous streams finish by themselves: wait for them. One
  // running on another thread's default stream is a race between threads: the claim refuses.
  if (team.in_flight.load() > 0 && !(team.owner == mine) && team.owner.stream != nullptr) {
    BlockingOpTable::Scope scope = blocking_ops_.Enter(
        operation, DefaultStreamLabel(),
        [label = OwnerLabel(team.owner)] {
          return "collectives queued on " + label + " to finish";
        });
    collective_waiters_.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + config_.timeout();
    bool done = true;
    while (team.in_flight.load() != 0 && state_ == RuntimeState::kReady) {
      if (!collectives_done_.WaitUntil(&mutex_, deadline) && team.in_flight.load() != 0 &&
          state_ == RuntimeState::kReady) {
        done = false;
        break;
      }
    }
    collective_waiters_.fetch_sub(1);
    HPS_RETURN_IF_ERROR(CheckReady(operation));
    if (!done) {
      return Status::Assertion(ErrorCode::kTimeout,
                               "collectives queued on another stream did not finish in time",
                               {{"operation", std::string(operation)},
                                {"in_flight_on", OwnerLabel(team.owner)},
                                {"timeout_ms", std::to_string(config_.timeout().count())}});
    }
  }
  return Status::Ok();
}

void Runtime::ReleaseCollective(TeamState& team) {
  collectives_in_flight_.fetch_sub(1);
  if (team.in_flight.fetch_sub(1) != 1 || collective_waiters_.load() == 0) return;
  // Taking the mutex orders this wake after the waiter's predicate check (it holds the mutex
  // from the check until it sleeps), so the wake is never lost.
  MutexLock lock(&mutex_);
  collectives_done_.SignalAll();
}

void Runtime::ReleaseCollectiveLocked(TeamState& team) {
  collectives_in_flight_.fetch_sub(1);
  if (team.in_flight.fetch_sub(1) != 1 || collective_waiters_.load() == 0) return;
  collectives_done_.SignalAll();
}

KeepAlive Runtime::CollectiveTicket(KeepAlive inner, std::shared_ptr<TeamState> team) {
  struct Ticket {
    Runtime* runtime;
    std::shared_ptr<TeamState> team;
    KeepAlive inner;
    ~Ticket() { runtime->ReleaseCollective(*team); }
  };
  // Built in place: a moved-from temporary would release the claim early.
  return std::shared_ptr<const Ticket>(new Ticket{this, std::move(team), std::move(inner)});
}

Status Runtime::Allocate(std::uint64_t bytes, std::uint64_t alignment, Allocation* out,
                         std::string_view note) {
  constexpr std::string_view kOp = "empty";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  AdoptOrphans();
  HPS_REJECT_IF_ERROR(WaitForOtherCollectives(World(), kOp), kOp, "state");
  // Every PE's heap has seen the same agreed allocations and frees, so a request one PE cannot
  // place (bad alignment, no room) fails alike on every PE: rejected here, before anything
  // collective, and without taking a collective number.
  HeapBlock block;
  const Status placed = allocator_.Place(bytes, alignment, &block);
  HPS_REJECT_IF_ERROR(placed, kOp, "allocate");
  CollectiveDescriptor mine = CollectiveDescriptor::Of(
      "empty", data_plane::kAgreeBytes | data_plane::kAgreeAlignment | data_plane::kAgreeOffset |
                   data_plane::kAgreeLocal);
  HPS_REJECT_IF_ERROR(ClaimCollective(World(), OwnerOf({}, true), kOp, &mine.sequence), kOp, "state");
  // Only collectives change the allocator, and this PE has one in flight: the block is still
  // free when it is committed below.
  mine.bytes = bytes;
  mine.alignment = alignment;
  mine.offset = block.offset;
  HPS_REJECT_IF_ERROR(Agree(World(), kOp, mine), kOp, "agree");
  allocator_.Commit(block);

  const AllocationId id =
      registry_.Register(block.offset, bytes, block.reserved_bytes, alignment);
  *out = Allocation{id, registry_.lifecycle(), heap_base_ + block.offset, bytes, alignment};
  HPS_LOG_DEBUG("op=Empty id=" + std::to_string(id) + " base=" + Hex(out->data) +
                " bytes=" + std::to_string(bytes) + " alignment=" + std::to_string(alignment) +
                (note.empty() ? "" : " ") + std::string(note));
  return Status::Ok();
}

Status Runtime::Agree(TeamState& team, std::string_view operation,
                      const CollectiveDescriptor& mine) {
  Backend& backend = *backend_;
  // Kept alive while the mutex is released (another thread may end the team meanwhile).
  const std::shared_ptr<TeamState> hold = teams_[static_cast<std::size_t>(team.group.sync_slot)];
  const data_plane::CollectiveGroup group = team.group;
  std::vector<CollectiveDescriptor> all;
  Status agreed;
  {
    CallScope call(this);
    mutex_.Unlock();
    agreed = backend.ExchangeDescriptors(group, mine, operation, &all);
    if (agreed.ok()) agreed = MatchDescriptors(mine, all, &group);
    mutex_.Lock();
  }
  ReleaseCollectiveLocked(team);
  if (!agreed.ok()) {
    if (Status health = backend_->Health(); !health.ok()) EnterTerminal(health);
  }
  return agreed;
}

Status Runtime::Free(const SymmetricView& whole, std::string_view note) {
  constexpr std::string_view kOp = "free";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  AdoptOrphans();
  AllocationRecord record;
  std::uint64_t offset = 0;
  HPS_REJECT_IF_ERROR(ResolveOperand(whole, &offset, &record, ErrorCode::kDoubleFree), kOp,
                      "validate");
  Backend* backend = backend_.get();
  Status drained;
  {
    // Queued work may still touch the allocation: drain before any PE can reuse it.
    CallScope call(this);
    lock.Unlock();
    drained = backend->Quiesce();
    lock.Lock();
  }
  HPS_REJECT_IF_ERROR(drained, kOp, "quiesce");
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  HPS_REJECT_IF_ERROR(WaitForOtherCollectives(World(), kOp), kOp, "state");
  // Another thread may have freed it meanwhile.
  HPS_REJECT_IF_ERROR(ResolveOperand(whole, &offset, &record, ErrorCode::kDoubleFree), kOp,
                      "validate");
  CollectiveDescriptor mine =
      CollectiveDescriptor::Of("free", data_plane::kAgreeBytes | data_plane::kAgreeOffset);
  HPS_REJECT_IF_ERROR(ClaimCollective(World(), OwnerOf({}, true), kOp, &mine.sequence), kOp, "state");
  mine.bytes = record.bytes;
  mine.offset = record.offset;
  HPS_REJECT_IF_ERROR(Agree(World(), kOp, mine), kOp, "agree");
  // Poison: a stale alias (a numpy array, a DLPack capsule) reads NaN in every IEEE float
  // dtype (all bits set) and -1 in signed integers, not the data it had; no queued work of any
  // PE touches the allocation any more (each drained before agreeing).
  if (backend_->HostAddressableHeap() && record.bytes > 0) {
    std::memset(heap_base_ + record.offset, kPoisonByte, record.bytes);
  }
  HPS_REJECT_IF_ERROR(allocator_.Release(record.offset), kOp, "release");
  registry_.Release(record.id);
  HPS_LOG_DEBUG("op=Free id=" + std::to_string(record.id) + " base=" + Hex(whole.data) +
                " bytes=" + std::to_string(record.bytes) + (note.empty() ? "" : " ") +
                std::string(note));
  return Status::Ok();
}

Status Runtime::CheckTransfer(const SymmetricView& symmetric, int pe,
                              const void* local, std::string_view local_name,
                              std::uint64_t* offset) const {
  HPS_RETURN_IF_ERROR(CheckPe(pe));
  AllocationRecord record;
  HPS_RETURN_IF_ERROR(ResolveOperand(symmetric, offset, &record));
  if (local == nullptr && symmetric.bytes > 0) {
    return Status::Contract(ErrorCode::kInvalidArgument, local_name, "non-null", "null");
  }
  return Status::Ok();
}

template <class Work>
Status Runtime::Execute(std::string_view operation, bool small, StreamRef stream, Work work) {
  Backend& backend = *backend_;
  // Only enqueued, or a little work on this thread's CPU: it cannot wait.
  if (!backend.RunsInline(stream) || (small && !backend.SynchronizesInline())) {
    return ConcludeLocked(work(backend), operation, "execute");
  }
  Status done;
  {
    CallScope call(this);
    mutex_.Unlock();
    done = work(backend);
    mutex_.Lock();
  }
  return ConcludeLocked(std::move(done), operation, "execute");
}

Status Runtime::Put(const SymmetricView& destination, const void* source, int pe,
                    StreamRef stream, KeepAlive keep_alive) {
  constexpr std::string_view kOp = "put";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::uint64_t offset = 0;
  HPS_REJECT_IF_ERROR(CheckTransfer(destination, pe, source, "put source", &offset), kOp,
                      "validate");
  if (destination.bytes == 0) return Status::Ok();
  return Execute(kOp, destination.bytes <= kUnderMutexBytes, stream, [&](Backend& backend) {
    return backend.Put(stream, offset, source, destination.bytes, pe, std::move(keep_alive));
  });
}

Status Runtime::Get(void* destination, const SymmetricView& source, int pe, StreamRef stream,
                    KeepAlive keep_alive) {
  constexpr std::string_view kOp = "get";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::uint64_t offset = 0;
  HPS_REJECT_IF_ERROR(CheckTransfer(source, pe, destination, "get destination", &offset), kOp,
                      "validate");
  if (source.bytes == 0) return Status::Ok();
  return Execute(kOp, source.bytes <= kUnderMutexBytes, stream, [&](Backend& backend) {
    return backend.Get(stream, destination, offset, source.bytes, pe, std::move(keep_alive));
  });
}

namespace {

Status CheckSignalOperand(const SymmetricView& view, std::uint64_t offset, SignalWidth width,
                          std::int64_t value) {
  const std::uint64_t word = width == SignalWidth::k32 ? 4 : 8;
  if (view.bytes != word) {
    return Status::Contract(ErrorCode::kInvalidArgument, "signal operand",
                            "exactly one " + std::to_string(word) + "-byte word",
                            std::to_string(view.bytes) + " bytes");
  }
  if (offset % word != 0) {
    return Status::Contract(ErrorCode::kInvalidArgument, "signal address",
                            "aligned to " + std::to_string(word) + " bytes", Hex(view.data));
  }
  if (width == SignalWidth::k32 && (value < std::numeric_limits<std::int32_t>::min() ||
                                    value > std::numeric_limits<std::int32_t>::max())) {
    return Status::Contract(ErrorCode::kInvalidArgument, "signal value",
                            "representable as int32", std::to_string(value));
  }
  return Status::Ok();
}

}  // namespace

Status Runtime::Signal(const SymmetricView& signal, SignalWidth width, std::int64_t value, int pe,
                       SignalOp op, StreamRef stream) {
  constexpr std::string_view kOp = "signal";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  HPS_REJECT_IF_ERROR(CheckPe(pe), kOp, "validate");
  std::uint64_t offset = 0;
  AllocationRecord record;
  HPS_REJECT_IF_ERROR(ResolveOperand(signal, &offset, &record), kOp, "validate");
  HPS_REJECT_IF_ERROR(CheckSignalOperand(signal, offset, width, value), kOp, "validate");
  // One atomic and a wake, or an enqueue (a device backend's inline signal synchronises its
  // stream: outside the mutex).
  return Execute(kOp, /*small=*/true, stream, [&](Backend& backend) {
    return backend.Signal(stream, offset, width, op, value, pe);
  });
}

Status Runtime::PutSignal(const SymmetricView& destination, const void* source,
                          const SymmetricView& signal, SignalWidth width, std::int64_t value,
                          int pe, SignalOp op, StreamRef stream, KeepAlive keep_alive) {
  constexpr std::string_view kOp = "put_signal";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::uint64_t offset = 0, signal_offset = 0;
  HPS_REJECT_IF_ERROR(CheckTransfer(destination, pe, source, "put source", &offset), kOp,
                      "validate");
  AllocationRecord record;
  HPS_REJECT_IF_ERROR(ResolveOperand(signal, &signal_offset, &record), kOp, "validate");
  HPS_REJECT_IF_ERROR(CheckSignalOperand(signal, signal_offset, width, value), kOp, "validate");
  return Execute(kOp, destination.bytes <= kUnderMutexBytes, stream, [&](Backend& backend) {
    return backend.PutSignal(stream, offset, source, destination.bytes, signal_offset, width, op,
                             value, pe, std::move(keep_alive));
  });
}

Status Runtime::WaitSignal(const SymmetricView& signal, SignalWidth width, std::int64_t value,
                           Comparison comparison, StreamRef stream) {
  constexpr std::string_view kOp = "wait_signal";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::uint64_t offset = 0;
  AllocationRecord record;
  HPS_REJECT_IF_ERROR(ResolveOperand(signal, &offset, &record), kOp, "validate");
  HPS_REJECT_IF_ERROR(CheckSignalOperand(signal, offset, width, value), kOp, "validate");
  Backend* backend = backend_.get();
  Status done;
  {
    CallScope call(this);  // it waits: outside the mutex
    lock.Unlock();
    done = backend->WaitSignal(stream, offset, width, comparison, value);
  }
  return ConcludeOutside(std::move(done), kOp, "execute");
}

Status Runtime::RunCollective(const data_plane::Collective& collective,
                              const CollectiveOperands& operands, StreamRef stream,
                              KeepAlive keep_alive) {
  return RunCollective(kWorldTeam, collective, operands, stream, std::move(keep_alive));
}

Status Runtime::RunCollective(const TeamHandle& team_handle,
                              const data_plane::Collective& collective,
                              const CollectiveOperands& operands, StreamRef stream,
                              KeepAlive keep_alive) {
  const std::string_view op = collective.name();
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(op), op, "state");
  std::shared_ptr<TeamState> team;
  HPS_REJECT_IF_ERROR(ResolveTeam(team_handle, &team), op, "validate");
  data_plane::CollectivePlan plan;
  plan.group = team->group;
  CollectiveDescriptor mine = CollectiveDescriptor::Of(op, collective.AgreedFields());
  if (collective.TakesOperands()) {
    AllocationRecord record;
    HPS_REJECT_IF_ERROR(ResolveOperand(operands.output, &plan.output_offset, &record), op,
                        "validate");
    data_plane::CollectiveCall call;
    call.group = team->group;
    call.output = operands.output.data;
    call.output_bytes = operands.output.bytes;
    call.input = operands.input;
    call.input_bytes = operands.input_bytes;
    call.element_bytes = operands.element_bytes;
    call.dtype = operands.dtype;
    HPS_REJECT_IF_ERROR(collective.Check(call), op, "validate");
    if (collective.MovesNothing(call)) return Status::Ok();
    plan.input = operands.input;
    plan.input_bytes = operands.input_bytes;
    mine.bytes = operands.input_bytes;
    mine.offset = plan.output_offset;
    mine.SetDtype(operands.dtype);
  }
  const bool runs_inline = backend_->CollectiveRunsInline(stream);
  HPS_REJECT_IF_ERROR(ClaimCollective(*team, OwnerOf(stream, runs_inline), op, &mine.sequence),
                      op, "state");
  plan.sequence = mine.sequence;
  Kernel kernel;
  if (collective.HasKernel()) {
    kernel = [&collective, plan](data_plane::KernelApi& api) { return collective.Run(api, plan); };
  }
  if (!runs_inline) {  // only enqueued: cannot wait
    return ConcludeLocked(
        backend_->LaunchCollective(stream, team->group, mine, op, std::move(kernel),
                                   CollectiveTicket(std::move(keep_alive), team)),
        op, "execute");
  }
  // The claim keeps the heap mapped meanwhile (a shutdown waits for collectives in flight).
  Backend* backend = backend_.get();
  lock.Unlock();
  Status done = backend->LaunchCollective(stream, team->group, mine, op, std::move(kernel),
                                          std::move(keep_alive));
  ReleaseCollective(*team);
  return ConcludeOutside(std::move(done), op, "execute");
}

Status Runtime::Launch(std::string_view name, const std::vector<SymmetricView>& operands,
                       StreamRef stream, LaunchKernel kernel, KeepAlive keep_alive) {
  return Launch(kWorldTeam, name, operands, stream, std::move(kernel), std::move(keep_alive));
}

Status Runtime::Launch(const TeamHandle& team_handle, std::string_view name,
                       const std::vector<SymmetricView>& operands, StreamRef stream,
                       LaunchKernel kernel, KeepAlive keep_alive) {
  constexpr std::string_view kOp = "launch";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::shared_ptr<TeamState> team;
  HPS_REJECT_IF_ERROR(ResolveTeam(team_handle, &team), kOp, "validate");
  std::vector<std::uint64_t> offsets(operands.size());
  for (std::size_t i = 0; i < operands.size(); ++i) {
    AllocationRecord record;
    HPS_REJECT_IF_ERROR(ResolveOperand(operands[i], &offsets[i], &record), kOp, "validate");
  }
  Kernel run;
  if (team->group.sync_slot == 0) {
    run = [kernel = std::move(kernel), offsets = std::move(offsets)](data_plane::KernelApi& api) {
      return kernel(api, offsets);
    };
  } else {  // the kernel sees team PEs (data_plane/team_kernel_api.h)
    run = [kernel = std::move(kernel), offsets = std::move(offsets),
           group = team->group](data_plane::KernelApi& api) {
      data_plane::TeamKernelApi team_api(api, group);
      return kernel(team_api, offsets);
    };
  }
  // A kernel may wait: outside the mutex unless it is only enqueued.
  return Execute(kOp, /*small=*/false, stream, [&](Backend& backend) {
    return backend.Launch(stream, name, std::move(run), std::move(keep_alive));
  });
}

Status Runtime::CurrentStream(StreamRef* out, std::string_view operation) {
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(operation), operation, "state");
  *out = backend_->CurrentStream();
  return Status::Ok();
}

Status Runtime::RequireHostAddressableHeap(std::string_view operation) {
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(operation), operation, "state");
  if (backend_->HostAddressableHeap()) return Status::Ok();
  return RejectLocked(
      Status::Assertion(ErrorCode::kUnsupportedCapability,
                        "the heap is device memory this process cannot address, and tensors "
                        "over this device's memory are not supported by this binding yet",
                        {{"backend", backend_name_}, {"device", device_.ToString()}}),
      operation, "validate");
}

Status Runtime::HeapPlacement(std::string_view operation, DeviceId* device,
                              bool* host_addressable) {
  MutexLock lock(&mutex_);
  HPS_RETURN_IF_ERROR(CheckReady(operation));  // a question, not a failed call: not recorded
  *device = device_;
  *host_addressable = backend_->HostAddressableHeap();
  return Status::Ok();
}

Status Runtime::DescribeBackend(std::string_view operation, BackendDescription* out) {
  MutexLock lock(&mutex_);
  HPS_RETURN_IF_ERROR(CheckReady(operation));
  BackendDescription description;
  description.name = backend_name_;
  description.own_core = backend_->Wait().pinned;
  description.host_addressable_heap = backend_->HostAddressableHeap();
  description.granule_bytes = HeapAllocator::kGranule;
  description.timeout = config_.timeout();
  *out = std::move(description);
  return Status::Ok();
}

void Runtime::ReportOrphan(const OrphanReport& report) {
  if (report.lifecycle != heap_lifecycle_.load(std::memory_order_acquire)) {
    HPS_LOG_INFO("a tensor of a lifecycle whose heap is gone was released: id=" +
                 std::to_string(report.id) + ", lifecycle=" + std::to_string(report.lifecycle));
    return;
  }
  HPS_LOG_ERROR("symmetric allocation lost its last reference without free (leak): id=" +
                std::to_string(report.id) + ", base=" + Hex(report.base) +
                ", bytes=" + std::to_string(report.bytes) + ", rank=" +
                std::to_string(report.rank) + ", lifecycle=" + std::to_string(report.lifecycle));
  MutexLock lock(&orphan_mutex_);
  pending_orphans_.push_back(report);
}

void Runtime::AdoptOrphans() {
  std::vector<OrphanReport> pending;
  {
    MutexLock lock(&orphan_mutex_);
    pending.swap(pending_orphans_);
  }
  for (const OrphanReport& report : pending) {
    if (report.lifecycle == registry_.lifecycle()) registry_.MarkLeaked(report.id);
  }
}

void Runtime::NoteFailure(const Status& status) {
  if (status.ok()) return;
  MutexLock lock(&mutex_);
  latest_failure_ = status;
}

Diagnostics Runtime::Snapshot() {
  Diagnostics d;
  {
    MutexLock lock(&mutex_);
    AdoptOrphans();
    if (state_ == RuntimeState::kReady && backend_) {
      if (Status health = backend_->Health(); !health.ok()) EnterTerminal(health);
    }
    d.state = state_;
    d.lifecycle = registry_.lifecycle();
    d.rank = rank_;
    d.size = size_;
    d.global_ranks = global_ranks_;
    d.device = state_ == RuntimeState::kUninitialized || state_ == RuntimeState::kInitializing
                   ? ""
                   : device_.ToString();
    d.backend = backend_name_;
    d.config = config_;
    d.heap_base = heap_base_;
    d.heap = allocator_.Usage();
    d.peaks = registry_.peaks();
    d.live = registry_.Live();
    d.leaks = registry_.Leaked();
    d.latest_failure = latest_failure_;
    d.terminal_failure = terminal_;
    if (!teams_.empty()) {
      TeamState& world = World();
      d.collective_sequence = world.sequence;
      d.collectives_in_flight = world.in_flight.load();
      d.collective_stream =
          d.collectives_in_flight > 0 ? OwnerLabel(world.owner) : std::string();
    }
    for (const std::shared_ptr<TeamState>& team : teams_) {
      if (team == nullptr) continue;
      Diagnostics::TeamRow row;
      DescribeTeamLocked(*team, &row.info);
      row.in_flight = team->in_flight.load();
      row.stream = row.in_flight > 0 ? OwnerLabel(team->owner) : std::string();
      d.teams.push_back(std::move(row));
    }
    d.calls_in_flight = calls_in_flight_.load(std::memory_order_acquire);
    if (backend_) {
      d.wait = backend_->Wait();
      d.peers = backend_->Placement();
      d.network = backend_->Network();
    }
    d.wait.mode = config_.wait;
  }
  d.blocking = blocking_ops_.Snapshot();
  return d;
}

}  // namespace hyper_parallel::shmem
