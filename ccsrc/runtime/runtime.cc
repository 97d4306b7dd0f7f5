// Runtime: the process Runtime and its lifecycle up to Ready (runtime.h; docs/architecture.md,
// "Lifecycle"): the state and the failure it keeps, the entry check every call makes, Init and
// its rollback. Shutdown is runtime_shutdown.cc; allocation, one-sided operations, collectives,
// teams and diagnostics each have a runtime_*.cc of their own.
#include "runtime/runtime.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "backends/host_identity.h"
#include "backends/registry.h"
#include "base/log.h"
#include "runtime/runtime_internal.h"

namespace hyper_parallel::shmem {
namespace {

// The fields every PE must share, compared at init.
std::string InitRecord(const Config& config, std::string_view backend, const DeviceId& device,
                       int size, const std::vector<int>& global_ranks) {
  std::ostringstream text;
  text << "heap_bytes=" << config.heap_bytes << ";timeout_sec=" << config.timeout_sec
       << ";backend=" << backend << ";device_type=" << static_cast<int>(device.type)
       << ";quarantine_bytes=" << config.quarantine() << ";max_teams=" << config.max_teams
       << ";reduce_workspace=" << config.reduce_workspace << ";max_pes=" << config.max_pes
       << ";size=" << size << ";global_ranks=" << JoinInts(global_ranks)
       << ";remote_peers=" << config.remote_peers << ";remote_path=" << config.remote_path
       << ";remote_transport=" << config.remote_transport << ";peer_silence_ms=" << config.peer_silence_ms;
  text << ";algorithms=";
  for (const auto& [collective, algorithm] : config.algorithms) text << collective << '=' << algorithm << ',';
  return text.str();
}

// The first setting in which two InitRecords differ: its name (with the variable that sets it,
// where one does) and both values.
std::vector<Field> ConfigDifference(const std::string& theirs, const std::string& ours, int pe) {
  auto settings = [](const std::string& record) {
    std::vector<std::pair<std::string, std::string>> out;
    std::size_t start = 0;
    while (start <= record.size()) {
      std::size_t end = record.find(';', start);
      if (end == std::string::npos) end = record.size();
      const std::string item = record.substr(start, end - start);
      const std::size_t eq = item.find('=');
      std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
      if (!value.empty() && value.back() == ',') value.pop_back();  // a list's last separator
      out.push_back({item.substr(0, eq), value});
      start = end + 1;
    }
    return out;
  };
  static const std::pair<std::string_view, std::string_view> kSetBy[] = {
      {"heap_bytes", kEnvHeapSize},           {"timeout_sec", kEnvTimeoutSec},
      {"backend", kEnvBackend},               {"quarantine_bytes", kEnvQuarantineBytes},
      {"max_teams", kEnvMaxTeams},            {"reduce_workspace", kEnvReduceWorkspace},
      {"max_pes", kEnvMaxPes},                {"remote_peers", kEnvRemotePeers},
      {"remote_path", kEnvRemotePath},        {"remote_transport", kEnvRemoteTransport},
      {"peer_silence_ms", kEnvPeerSilenceMs},
      {"algorithms", kEnvAlgorithms}};
  const auto mine = settings(ours);
  const auto other = settings(theirs);
  for (std::size_t i = 0; i < std::max(mine.size(), other.size()); ++i) {
    const auto ours_item = i < mine.size() ? mine[i] : std::pair<std::string, std::string>{};
    const auto theirs_item = i < other.size() ? other[i] : std::pair<std::string, std::string>{};
    if (ours_item == theirs_item) continue;
    std::string setting = ours_item.first.empty() ? theirs_item.first : ours_item.first;
    for (const auto& [key, variable] : kSetBy) {
      if (setting == key) setting += " (" + std::string(variable) + ")";
    }
    return {{"setting", setting},
            {"pe", std::to_string(pe)},
            {"theirs", theirs_item.second},
            {"ours", ours_item.second}};
  }
  return {{"pe", std::to_string(pe)}, {"theirs", theirs}, {"ours", ours}};
}

// HYPER_PARALLEL_SHMEM_ALGORITHMS names collectives of `collectives` (the build's, as the
// binding passes them) and, for each, "auto" or one of the algorithms it offers.
Status CheckAlgorithms(const Config& config,
                       std::span<const data_plane::Collective* const> collectives) {
  for (const auto& [name, algorithm] : config.algorithms) {
    const data_plane::Collective* collective = nullptr;
    for (const data_plane::Collective* each : collectives) {
      if (each->name() == name) collective = each;
    }
    std::string known;
    if (collective == nullptr) {
      for (const data_plane::Collective* each : collectives) {
        if (each->Algorithms().empty()) continue;
        known += (known.empty() ? "" : ", ") + std::string(each->name());
      }
      return Status::Contract(ErrorCode::kInvalidConfig,
                              std::string(kEnvAlgorithms) + " collective",
                              "one with algorithms to choose from (" + known + ")", name);
    }
    known = "auto";
    bool found = algorithm == "auto";
    for (std::string_view each : collective->Algorithms()) {
      known += ", " + std::string(each);
      found = found || each == algorithm;
    }
    if (!found) {
      return Status::Contract(ErrorCode::kInvalidConfig,
                              std::string(kEnvAlgorithms) + " algorithm of " + name,
                              "one of " + known, algorithm);
    }
  }
  return Status::Ok();
}


// Init's configuration: the environment's (or the options') settings, the backend they name,
// and the algorithms they choose, each checked.
Status ReadInitConfig(const InitOptions& options, Config* config, BackendKind* kind) {
  HPS_RETURN_IF_ERROR(
      Config::FromEnvironment(options.env ? options.env : ProcessEnvironment(), config));
  HPS_RETURN_IF_ERROR(CheckBackendSettings(*config, kind));
  return CheckAlgorithms(*config, options.collectives);
}

// Mismatch messages name the calls' arguments ("op: sum on PE 0, max on PE 1").
void NoteInitArgumentNames(std::span<const data_plane::Collective* const> collectives) {
  for (const data_plane::Collective* each : collectives) NoteArgumentNames(*each);
  NoteArgumentNames("split_strided", {"start", "stride", "size"});
  NoteArgumentNames("split_2d", {"xrange", "", ""});
  NoteArgumentNames("team_destroy", {"handles left", "", ""});
}

// The Root WORLD's global ranks: `given`, or 0 .. size-1 when it is empty; `size` non-negative
// ranks in increasing order.
Status ResolveGlobalRanks(const std::vector<int>& given, int size, std::vector<int>* out) {
  *out = given;
  if (out->empty()) {
    for (int r = 0; r < size; ++r) out->push_back(r);
  }
  const bool increasing = std::adjacent_find(out->begin(), out->end(), [](int a, int b) {
                            return a >= b;
                          }) == out->end();
  if (static_cast<int>(out->size()) != size || !increasing || out->front() < 0) {
    return Status::Contract(ErrorCode::kInvalidArgument, "global ranks",
                            std::to_string(size) + " non-negative ranks in increasing order",
                            JoinInts(*out));
  }
  return Status::Ok();
}

Status CheckWorldSize(const Config& config, int size) {
  if (static_cast<std::uint64_t>(size) > config.max_pes) {
    return Status::Contract(ErrorCode::kInvalidConfig, "world size",
                            "at most " + std::to_string(config.max_pes) + " PEs (" +
                                std::string(kEnvMaxPes) + ", at most " +
                                std::to_string(Config::kMaxMaxPes) + ")",
                            std::to_string(size));
  }
  return Status::Ok();
}

// Gathers every PE's InitRecord (`mine`) and fails on the first that differs. Each record also
// says where its PE runs ("|host=..."), compared apart: `hosts` gets every PE's host.
Status AgreeOnConfiguration(Bootstrap& bootstrap, std::chrono::milliseconds timeout,
                            const std::string& mine, std::vector<HostIdentity>* hosts) {
  std::vector<std::string> records;
  const HostIdentity here = HostIdentity::Current();
  const std::string where =
      "|host=" + std::string(reinterpret_cast<const char*>(&here), sizeof here);
  HPS_RETURN_IF_ERROR(bootstrap.AllGather(mine + where, timeout, &records));
  const int size = bootstrap.size();
  hosts->assign(static_cast<std::size_t>(size), HostIdentity{});
  for (int pe = 0; pe < size; ++pe) {
    const std::size_t bar = records[pe].rfind("|host=");
    if (bar != std::string::npos && records[pe].size() - bar - 6 == sizeof(HostIdentity)) {
      std::memcpy(&(*hosts)[pe], records[pe].data() + bar + 6, sizeof(HostIdentity));
      records[pe].resize(bar);
    }
    if (records[pe] != mine) {
      return Status::Assertion(ErrorCode::kInvalidConfig, "PEs disagree on the configuration",
                               ConfigDifference(records[pe], mine, pe));
    }
  }
  return Status::Ok();
}

// A device backend maps its peers' memory (CUDA IPC, the CANN library's own heap): it reaches
// one host only. The host backend reaches other hosts over UCX (docs/scale-out.md).
Status CheckHostsReached(std::string_view backend, const std::vector<HostIdentity>& hosts,
                         int rank) {
  if (backend == "host") return Status::Ok();
  const int size = static_cast<int>(hosts.size());
  std::string layout, others;
  for (int pe = 0; pe < size; ++pe) {
    if (!hosts[pe].SameHost(hosts[rank])) others += (others.empty() ? "" : ",") + std::to_string(pe);
  }
  if (others.empty()) return Status::Ok();
  for (int pe = 0; pe < size; ++pe) {
    layout += (layout.empty() ? "" : "; ") + std::to_string(pe) + "@" + hosts[pe].Label();
  }
  return Status::Assertion(ErrorCode::kUnsupportedCapability,
                           "this backend reaches PEs on its own host only; PEs on "
                           "several hosts need the host backend (over UCX)",
                           {{"backend", std::string(backend)},
                            {"pe", std::to_string(rank)},
                            {"other_host_pes", others},
                            {"pes", layout}});
}

// What the backend's heap is made from: the configuration, this PE's place, and the bootstrap
// (for a backend that gathers a second round, such as the host backend's network addresses).
HeapSpec MakeHeapSpec(const Config& config, int rank, int size, Bootstrap& bootstrap,
                      BlockingOpTable* blocking_ops) {
  const auto timeout = config.timeout();
  HeapSpec spec;
  spec.rank = rank;
  spec.size = size;
  // The reductions' workspaces, one per team slot, lie past the allocator's heap.
  spec.heap_bytes = config.heap_bytes + config.max_teams * config.reduce_workspace;
  spec.timeout = timeout;
  spec.copy_workers = static_cast<int>(config.copy_workers);
  spec.blocking_ops = blocking_ops;
  spec.wait = config.wait;
  spec.teams = static_cast<int>(config.max_teams);
  spec.remote_peers = config.remote_peers;
  spec.ucx_library = config.ucx_library;
  spec.remote_path = config.remote_path;
  spec.remote_transport = config.remote_transport;
  spec.peer_silence = std::chrono::milliseconds(config.peer_silence_ms);
  // A backend that learns from the handles that it needs a second round (the host backend's
  // network addresses, once it knows some peer is remote) gathers it through the bootstrap.
  spec.all_gather = [&bootstrap, timeout](std::string_view bytes, std::vector<std::string>* all) {
    return bootstrap.AllGather(bytes, timeout, all);
  };
  return spec;
}

// One step of making the heaps: tells every PE this PE's outcome (`local`, with `payload` on
// success) and learns theirs; `all` gets every PE's payload. A peer's failure fails here too.
Status ExchangeOutcome(Bootstrap& bootstrap, std::chrono::milliseconds timeout,
                       const Status& local, std::string_view step, const std::string& payload,
                       std::vector<std::string>* all) {
  const std::string message = local.ok() ? "K" + payload : "E" + local.message();
  HPS_RETURN_IF_ERROR(bootstrap.AllGather(message, timeout, all));
  if (!local.ok()) return local;
  for (int pe = 0; pe < bootstrap.size(); ++pe) {
    std::string& outcome = (*all)[pe];
    if (outcome.empty() || outcome[0] != 'K') {
      return Status::Assertion(ErrorCode::kBackendError, "a peer failed to initialise",
                               {{"pe", std::to_string(pe)},
                                {"step", std::string(step)},
                                {"reason", outcome.substr(std::min<std::size_t>(1, outcome.size()))}});
    }
    outcome.erase(0, 1);
  }
  return Status::Ok();
}

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

Status Runtime::CheckReady(std::string_view operation) {
  if (state_ != RuntimeState::kReady) [[unlikely]] {
    if (state_ == RuntimeState::kFailed) return terminal_.Retagged(operation, "state");
    // Tagged here, so every caller's error names the call the user made, also where it is
    // raised without passing through a rejection (a question such as backend_info).
    return Status::Assertion(ErrorCode::kInvalidState,
                             state_ == RuntimeState::kClosing
                                 ? "runtime is closing"
                                 : state_ == RuntimeState::kInitializing
                                       ? "runtime is initialising"
                                       : "runtime is not initialised",
                             {{"operation", std::string(operation)},
                              {"state", std::string(RuntimeStateName(state_))}})
        .At(operation, "state");
  }
  if (Status health = backend_->Health(); !health.ok()) [[unlikely]] {
    EnterTerminal(health);
    return terminal_.Retagged(operation, "state");
  }
  const DeviceId current = backend_->CurrentDevice();
  if (!(current == device_)) {
    // The device was frozen at initialisation (docs/api.md, "Lifecycle").
    return Status::Contract(ErrorCode::kDeviceMismatch, "device", device_.ToString(),
                            current.ToString());
  }
  return Status::Ok();
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

// Init, step by step (docs/architecture.md, "Lifecycle"). Every step past BeginInit runs
// without the mutex, on locals, since it waits on peers; a failure abandons the attempt
// (AbandonInit) and the outcome is committed under the mutex at the end (CommitInit).
Status Runtime::Init(InitOptions options) {
  HPS_RETURN_IF_ERROR(BeginInit(options));
  Config config;
  BackendKind kind = BackendKind::kAuto;
  if (Status read = ReadInitConfig(options, &config, &kind); !read.ok()) {
    return AbandonInit(read, "config", nullptr);
  }
  NoteInitArgumentNames(options.collectives);
  const int rank = options.bootstrap->rank();
  const int size = options.bootstrap->size();
  std::vector<int> global_ranks;
  if (Status ranks = ResolveGlobalRanks(options.global_ranks, size, &global_ranks); !ranks.ok()) {
    return AbandonInit(ranks, "validate", nullptr);
  }
  if (Status checked = CheckWorldSize(config, size); !checked.ok()) {
    return AbandonInit(checked, "config", nullptr);
  }

  std::unique_ptr<Backend> backend;
  const BackendFactory& factory =
      options.backend_factory ? options.backend_factory : BackendFactory(DefaultBackendFactory);
  if (Status made = factory(kind, &backend); !made.ok()) {
    return AbandonInit(made, "backend", nullptr);
  }
  log::SetLevel(config.log_level);
  log::SetRank(rank);
  Bootstrap& bootstrap = *options.bootstrap;
  const auto timeout = config.timeout();

  // 1. Every PE must run with the same configuration, and a device backend on one host.
  std::vector<HostIdentity> hosts;
  const std::string mine =
      InitRecord(config, backend->name(), backend->CurrentDevice(), size, global_ranks);
  if (Status agreed = AgreeOnConfiguration(bootstrap, timeout, mine, &hosts); !agreed.ok()) {
    return AbandonInit(agreed, "bootstrap", std::move(backend));
  }
  if (Status reached = CheckHostsReached(backend->name(), hosts, rank); !reached.ok()) {
    return AbandonInit(reached, "bootstrap", std::move(backend));
  }

  // 2. Create the local heap, publish it, map every peer's; each step tells every PE whether
  //    every other one succeeded, so a failure anywhere rolls back everywhere at once.
  const HeapSpec spec = MakeHeapSpec(config, rank, size, bootstrap, &blocking_ops_);
  std::string handle;
  std::vector<std::string> handles;
  Status created = backend->CreateHeap(spec, &handle);
  if (Status step = ExchangeOutcome(bootstrap, timeout, created, "create_heap", handle, &handles);
      !step.ok()) {
    return AbandonInit(step, "create_heap", std::move(backend));
  }
  Status opened = backend->OpenPeers(handles);
  std::vector<std::string> outcomes;
  if (Status step = ExchangeOutcome(bootstrap, timeout, opened, "open_peers", "", &outcomes);
      !step.ok()) {
    return AbandonInit(step, "open_peers", std::move(backend));
  }

  // 3. Frozen now: a device backend may have selected the device while it made the heap.
  const DeviceId device = backend->CurrentDevice();
  MutexLock lock(&mutex_);
  CommitInit(config, device, rank, std::move(global_ranks), std::move(options.bootstrap),
             std::move(backend));
  return Status::Ok();
}

Status Runtime::BeginInit(const InitOptions& options) {
  constexpr std::string_view kOp = "init";
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
  return Status::Ok();
}

Status Runtime::AbandonInit(Status status, std::string_view phase,
                            std::unique_ptr<Backend> backend) {
  if (backend) backend->DestroyHeap();
  MutexLock lock(&mutex_);
  state_ = RuntimeState::kUninitialized;
  return RejectLocked(std::move(status), "init", phase);
}

void Runtime::CommitInit(const Config& config, const DeviceId& device, int rank,
                         std::vector<int> global_ranks, std::shared_ptr<Bootstrap> bootstrap,
                         std::unique_ptr<Backend> backend) {
  const int size = static_cast<int>(global_ranks.size());
  config_ = config;
  device_ = device;
  rank_ = rank;
  size_ = size;
  global_ranks_ = std::move(global_ranks);
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
  bootstrap_ = std::move(bootstrap);
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
}

}  // namespace hyper_parallel::shmem
