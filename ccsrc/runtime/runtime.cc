#include "runtime/runtime.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "backends/host/host_backend.h"
#include "data_plane/pe_address.h"
#include "runtime/log.h"

namespace hyper_parallel::shmem {
namespace {

constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();

// What an agreement record describes (word 0, low byte); the local outcome code is byte 1.
enum class Collective : std::uint64_t { kAllocate = 1, kFree = 2, kShutdown = 3 };

AgreementRecord MakeRecord(Collective kind, ErrorCode local, std::uint64_t a, std::uint64_t b,
                           std::uint64_t c) {
  AgreementRecord record;
  record.words[0] = static_cast<std::uint64_t>(kind) | (static_cast<std::uint64_t>(local) << 8);
  record.words[1] = a;
  record.words[2] = b;
  record.words[3] = c;
  return record;
}

std::string_view CollectiveName(std::uint64_t word) {
  switch (static_cast<Collective>(word & 0xff)) {
    case Collective::kAllocate: return "empty";
    case Collective::kFree: return "free";
    case Collective::kShutdown: return "shutdown";
  }
  return "unknown";
}

std::string Describe(const AgreementRecord& record) {
  std::ostringstream text;
  text << CollectiveName(record.words[0]) << "(";
  auto field = [&](std::uint64_t value) {
    if (value == kNone) {
      text << "-";
    } else {
      text << value;
    }
  };
  field(record.words[1]);
  text << ",";
  field(record.words[2]);
  text << ",";
  field(record.words[3]);
  text << ")";
  return text.str();
}

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
       << ";size=" << size << ";global_ranks=" << JoinInts(global_ranks);
  return text.str();
}

}  // namespace

std::string_view RuntimeStateName(RuntimeState state) {
  switch (state) {
    case RuntimeState::kUninitialized: return "uninitialized";
    case RuntimeState::kReady: return "ready";
    case RuntimeState::kFailed: return "failed";
  }
  return "unknown";
}

Status DefaultBackendFactory(BackendKind kind, std::unique_ptr<Backend>* out) {
  switch (kind) {
    case BackendKind::kAuto:
    case BackendKind::kHost:
      *out = std::make_unique<host::HostBackend>();
      return Status::Ok();
    case BackendKind::kCuda:
    case BackendKind::kCann:
      break;
  }
  return Status::Contract(ErrorCode::kUnsupportedCapability, std::string(kEnvBackend),
                          "a backend this build provides (auto, host)",
                          std::string(BackendKindName(kind)));
}

Runtime& Runtime::Process() {
  static Runtime* runtime = new Runtime();  // never destroyed: deleters may run at exit
  return *runtime;
}

Runtime::Runtime() = default;

Runtime::~Runtime() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (backend_) backend_->DestroyHeap();
}

RuntimeState Runtime::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

int Runtime::rank() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return rank_;
}

int Runtime::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return size_;
}

std::chrono::milliseconds Runtime::timeout() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return config_.timeout();
}

Status Runtime::RecordFailure(Status status, std::string_view operation,
                              std::string_view phase) {
  status.At(operation, phase);
  latest_failure_ = status;
  return status;
}

void Runtime::RollBackInit() {
  if (backend_) backend_->DestroyHeap();
  backend_.reset();
  bootstrap_.reset();
  heap_base_ = nullptr;
  rank_ = -1;
  size_ = 0;
  global_ranks_.clear();
  state_ = RuntimeState::kUninitialized;
}

Status Runtime::Init(InitOptions options) {
  std::lock_guard<std::mutex> lock(mutex_);
  constexpr std::string_view kOp = "init";
  if (state_ == RuntimeState::kFailed) {
    return Record(Status::Assertion(ErrorCode::kInvalidState,
                                    "an earlier native shutdown failed; the process must restart",
                                    {{"state", std::string(RuntimeStateName(state_))}}),
                  kOp, "state");
  }
  if (state_ == RuntimeState::kReady) {
    return Record(Status::Assertion(ErrorCode::kInvalidState, "runtime is already initialised",
                                    {{"rank", std::to_string(rank_)},
                                     {"lifecycle", std::to_string(registry_.lifecycle())}}),
                  kOp, "state");
  }
  if (!options.bootstrap) {
    return Record(Status::Contract(ErrorCode::kInvalidArgument, "bootstrap", "non-null", "null"),
                  kOp, "validate");
  }
  Config config;
  if (Status parsed = Config::FromEnvironment(options.env ? options.env : ProcessEnvironment(),
                                              &config);
      !parsed.ok()) {
    return Record(parsed, kOp, "config");
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
    return Record(Status::Contract(ErrorCode::kInvalidArgument, "global ranks",
                                   std::to_string(size) +
                                       " non-negative ranks in increasing order",
                                   JoinInts(global_ranks)),
                  kOp, "validate");
  }

  std::unique_ptr<Backend> backend;
  const BackendFactory& factory =
      options.backend_factory ? options.backend_factory : BackendFactory(DefaultBackendFactory);
  if (Status made = factory(config.backend, &backend); !made.ok()) {
    return Record(made, kOp, "backend");
  }
  log::SetLevel(config.log_level);
  log::SetRank(rank);

  config_ = config;
  device_ = backend->CurrentDevice();
  rank_ = rank;
  size_ = size;
  global_ranks_ = global_ranks;
  bootstrap_ = std::move(options.bootstrap);
  backend_ = std::move(backend);
  const auto timeout = config.timeout();

  // 1. Every PE must run with the same configuration.
  std::vector<std::string> records;
  const std::string mine = InitRecord(config, backend_->name(), device_, size, global_ranks);
  if (Status gathered = bootstrap_->AllGather(mine, timeout, &records); !gathered.ok()) {
    RollBackInit();
    return Record(gathered, kOp, "bootstrap");
  }
  for (int pe = 0; pe < size; ++pe) {
    if (records[pe] != mine) {
      RollBackInit();
      return Record(Status::Assertion(ErrorCode::kInvalidConfig,
                                      "PEs disagree on the configuration",
                                      {{"pe", std::to_string(pe)},
                                       {"theirs", records[pe]},
                                       {"ours", mine}}),
                    kOp, "bootstrap");
    }
  }

  // 2. Create the local heap, publish it, map every peer's; each step tells every PE whether
  //    every other one succeeded, so a failure anywhere rolls back everywhere at once.
  auto exchange_outcome = [&](const Status& local, std::string_view step,
                              std::string payload, std::vector<std::string>* all) -> Status {
    const std::string message = local.ok() ? "K" + payload : "E" + local.message();
    HPS_RETURN_IF_ERROR(bootstrap_->AllGather(message, timeout, all));
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

  HeapSpec spec{rank, size, config.heap_bytes, timeout, static_cast<int>(config.copy_workers)};
  std::string handle;
  std::vector<std::string> handles;
  Status created = backend_->CreateHeap(spec, &handle);
  if (Status step = exchange_outcome(created, "create_heap", handle, &handles); !step.ok()) {
    RollBackInit();
    return Record(step, kOp, "create_heap");
  }
  Status opened = backend_->OpenPeers(handles);
  std::vector<std::string> outcomes;
  if (Status step = exchange_outcome(opened, "open_peers", "", &outcomes); !step.ok()) {
    RollBackInit();
    return Record(step, kOp, "open_peers");
  }

  heap_base_ = backend_->LocalHeapBase();
  allocator_.Reset(config.heap_bytes);
  registry_.BeginLifecycle();
  latest_failure_ = Status::Ok();  // diagnostics describe this lifecycle
  state_ = RuntimeState::kReady;
  HPS_LOG_INFO("runtime ready: lifecycle=" + std::to_string(registry_.lifecycle()) +
               ", size=" + std::to_string(size) + ", backend=" + std::string(backend_->name()) +
               ", device=" + device_.ToString() + ", heap_bytes=" +
               std::to_string(config.heap_bytes) + ", heap_base=" + Hex(heap_base_));
  return Status::Ok();
}

Status Runtime::Shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  constexpr std::string_view kOp = "shutdown";
  HPS_RECORD_IF_ERROR(CheckReady(kOp), kOp, "state");
  AdoptOrphans();

  // Leaked allocations (no tensor refers to them any more) are reclaimed collectively when
  // every PE leaked exactly the same ones and holds nothing else; anything else refuses.
  const std::vector<AllocationRecord> leaks = registry_.Leaked();
  const std::uint64_t live = registry_.live_count();
  const std::uint64_t leaked = leaks.size();
  std::uint64_t digest = 1469598103934665603ull;  // FNV-1a over (offset, bytes) of the leaks
  for (const AllocationRecord& record : leaks) {
    for (std::uint64_t word : {record.offset, record.bytes}) {
      for (int byte = 0; byte < 8; ++byte) {
        digest = (digest ^ ((word >> (8 * byte)) & 0xff)) * 1099511628211ull;
      }
    }
  }
  std::vector<AgreementRecord> all;
  Status agreed = backend_->Agree(
      MakeRecord(Collective::kShutdown, ErrorCode::kOk, live, leaked, digest), &all);
  if (!agreed.ok()) return Record(agreed, kOp, "agree");
  std::vector<int> holders;
  bool same_leaks = true;
  for (int pe = 0; pe < size_; ++pe) {
    if ((all[pe].words[0] & 0xff) != static_cast<std::uint64_t>(Collective::kShutdown)) {
      return Record(Status::Assertion(ErrorCode::kCollectiveMismatch,
                                      "PEs disagree on the collective call",
                                      {{"pe", std::to_string(pe)},
                                       {"theirs", Describe(all[pe])},
                                       {"ours", "shutdown"}}),
                    kOp, "agree");
    }
    if (all[pe].words[1] != 0) holders.push_back(pe);
    if (all[pe].words[1] != all[pe].words[2] || all[pe].words[2] != leaked ||
        all[pe].words[3] != digest) {
      same_leaks = false;
    }
  }
  if (!holders.empty() && !same_leaks) {
    std::string ids;
    for (const AllocationRecord& record : registry_.Live()) {
      ids += (ids.empty() ? "" : ",") + std::to_string(record.id);
    }
    return Record(Status::Assertion(ErrorCode::kInvalidState,
                                    "shutdown refused: live allocations remain",
                                    {{"pes_with_live_allocations", JoinInts(holders)},
                                     {"live_count", std::to_string(live)},
                                     {"leaked_count", std::to_string(leaked)},
                                     {"live_ids", "[" + ids + "]"}}),
                  kOp, "validate");
  }
  if (leaked > 0) {
    std::string ids;
    for (const AllocationRecord& record : leaks) {
      ids += (ids.empty() ? "" : ",") + std::to_string(record.id);
      allocator_.Release(record.offset);
      registry_.Release(record.id);
    }
    HPS_LOG_ERROR("reclaimed leaked allocations collectively at shutdown (every PE leaked the "
                  "same ones): count=" + std::to_string(leaked) + ", ids=[" + ids + "]");
  }

  HPS_RECORD_IF_ERROR(backend_->Quiesce(), kOp, "quiesce");
  HPS_RECORD_IF_ERROR(bootstrap_->Barrier(config_.timeout()), kOp, "barrier");
  if (Status destroyed = backend_->DestroyHeap(); !destroyed.ok()) {
    state_ = RuntimeState::kFailed;
    HPS_LOG_ERROR("native shutdown failed; the runtime is terminal: " + destroyed.message());
    return Record(destroyed, kOp, "native_shutdown");
  }
  registry_.EndLifecycle();
  allocator_.Reset(0);
  const std::uint64_t lifecycle = registry_.lifecycle();
  RollBackInit();
  HPS_LOG_INFO("runtime shut down: lifecycle=" + std::to_string(lifecycle));
  return Status::Ok();
}

Status Runtime::CheckReady(std::string_view operation) const {
  if (state_ != RuntimeState::kReady) {
    return Status::Assertion(ErrorCode::kInvalidState,
                             state_ == RuntimeState::kFailed
                                 ? "runtime failed to shut down and cannot be used"
                                 : "runtime is not initialised",
                             {{"operation", std::string(operation)},
                              {"state", std::string(RuntimeStateName(state_))}});
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

Status Runtime::AgreeOrMismatch(std::string_view what, const AgreementRecord& mine,
                                std::vector<AgreementRecord>* all) {
  HPS_RETURN_IF_ERROR(backend_->Agree(mine, all));
  for (int pe = 0; pe < size_; ++pe) {
    if (!((*all)[pe] == mine)) {
      return Status::Assertion(ErrorCode::kCollectiveMismatch,
                               "PEs disagree on the collective call",
                               {{"call", std::string(what)},
                                {"pe", std::to_string(pe)},
                                {"theirs", Describe((*all)[pe])},
                                {"ours", Describe(mine)}});
    }
  }
  return Status::Ok();
}

Status Runtime::Allocate(std::uint64_t bytes, std::uint64_t alignment, Allocation* out,
                         std::string_view note) {
  std::lock_guard<std::mutex> lock(mutex_);
  constexpr std::string_view kOp = "empty";
  HPS_RECORD_IF_ERROR(CheckReady(kOp), kOp, "state");
  AdoptOrphans();

  HeapBlock block;
  const Status placed = allocator_.Place(bytes, alignment, &block);
  std::vector<AgreementRecord> all;
  const AgreementRecord mine = MakeRecord(Collective::kAllocate, placed.code(), bytes, alignment,
                                          placed.ok() ? block.offset : kNone);
  HPS_RECORD_IF_ERROR(AgreeOrMismatch(kOp, mine, &all), kOp, "agree");
  HPS_RECORD_IF_ERROR(placed, kOp, "allocate");
  allocator_.Commit(block);

  const AllocationId id =
      registry_.Register(block.offset, bytes, block.reserved_bytes, alignment);
  *out = Allocation{id, registry_.lifecycle(), heap_base_ + block.offset, bytes, alignment};
  HPS_LOG_DEBUG("op=Empty id=" + std::to_string(id) + " base=" + Hex(out->data) +
                " bytes=" + std::to_string(bytes) + " alignment=" + std::to_string(alignment) +
                (note.empty() ? "" : " ") + std::string(note));
  return Status::Ok();
}

Status Runtime::Free(const SymmetricView& whole, std::string_view note) {
  std::lock_guard<std::mutex> lock(mutex_);
  constexpr std::string_view kOp = "free";
  HPS_RECORD_IF_ERROR(CheckReady(kOp), kOp, "state");
  AdoptOrphans();

  AllocationRecord record;
  std::uint64_t offset = 0;
  const Status valid = ResolveOperand(whole, &offset, &record, ErrorCode::kDoubleFree);
  // Queued work may still touch the allocation: drain before any PE can reuse it.
  HPS_RECORD_IF_ERROR(backend_->Quiesce(), kOp, "quiesce");
  std::vector<AgreementRecord> all;
  const AgreementRecord mine =
      MakeRecord(Collective::kFree, valid.code(), valid.ok() ? record.offset : kNone,
                 valid.ok() ? record.bytes : kNone, kNone);
  HPS_RECORD_IF_ERROR(AgreeOrMismatch(kOp, mine, &all), kOp, "agree");
  HPS_RECORD_IF_ERROR(valid, kOp, "validate");

  HPS_RECORD_IF_ERROR(allocator_.Release(record.offset), kOp, "release");
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

Status Runtime::Put(const SymmetricView& destination, const void* source, int pe,
                    StreamRef stream, KeepAlive keep_alive) {
  std::lock_guard<std::mutex> lock(mutex_);
  constexpr std::string_view kOp = "put";
  HPS_RECORD_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::uint64_t offset = 0;
  HPS_RECORD_IF_ERROR(CheckTransfer(destination, pe, source, "put source", &offset), kOp,
                      "validate");
  if (destination.bytes == 0) return Status::Ok();
  return Record(backend_->Put(stream, offset, source, destination.bytes, pe,
                              std::move(keep_alive)),
                kOp, "execute");
}

Status Runtime::Get(void* destination, const SymmetricView& source, int pe, StreamRef stream,
                    KeepAlive keep_alive) {
  std::lock_guard<std::mutex> lock(mutex_);
  constexpr std::string_view kOp = "get";
  HPS_RECORD_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::uint64_t offset = 0;
  HPS_RECORD_IF_ERROR(CheckTransfer(source, pe, destination, "get destination", &offset), kOp,
                      "validate");
  if (source.bytes == 0) return Status::Ok();
  return Record(backend_->Get(stream, destination, offset, source.bytes, pe,
                              std::move(keep_alive)),
                kOp, "execute");
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
  std::lock_guard<std::mutex> lock(mutex_);
  constexpr std::string_view kOp = "signal";
  HPS_RECORD_IF_ERROR(CheckReady(kOp), kOp, "state");
  HPS_RECORD_IF_ERROR(CheckPe(pe), kOp, "validate");
  std::uint64_t offset = 0;
  AllocationRecord record;
  HPS_RECORD_IF_ERROR(ResolveOperand(signal, &offset, &record), kOp, "validate");
  HPS_RECORD_IF_ERROR(CheckSignalOperand(signal, offset, width, value), kOp, "validate");
  return Record(backend_->Signal(stream, offset, width, op, value, pe), kOp, "execute");
}

Status Runtime::PutSignal(const SymmetricView& destination, const void* source,
                          const SymmetricView& signal, SignalWidth width, std::int64_t value,
                          int pe, SignalOp op, StreamRef stream, KeepAlive keep_alive) {
  std::lock_guard<std::mutex> lock(mutex_);
  constexpr std::string_view kOp = "put_signal";
  HPS_RECORD_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::uint64_t offset = 0, signal_offset = 0;
  HPS_RECORD_IF_ERROR(CheckTransfer(destination, pe, source, "put source", &offset), kOp,
                      "validate");
  AllocationRecord record;
  HPS_RECORD_IF_ERROR(ResolveOperand(signal, &signal_offset, &record), kOp, "validate");
  HPS_RECORD_IF_ERROR(CheckSignalOperand(signal, signal_offset, width, value), kOp, "validate");
  return Record(backend_->PutSignal(stream, offset, source, destination.bytes, signal_offset,
                                    width, op, value, pe, std::move(keep_alive)),
                kOp, "execute");
}

Status Runtime::WaitSignal(const SymmetricView& signal, SignalWidth width, std::int64_t value,
                           Comparison comparison, StreamRef stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  constexpr std::string_view kOp = "wait_signal";
  HPS_RECORD_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::uint64_t offset = 0;
  AllocationRecord record;
  HPS_RECORD_IF_ERROR(ResolveOperand(signal, &offset, &record), kOp, "validate");
  HPS_RECORD_IF_ERROR(CheckSignalOperand(signal, offset, width, value), kOp, "validate");
  return Record(backend_->WaitSignal(stream, offset, width, comparison, value), kOp, "execute");
}

Status Runtime::Barrier(StreamRef stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  constexpr std::string_view kOp = "barrier";
  HPS_RECORD_IF_ERROR(CheckReady(kOp), kOp, "state");
  return Record(backend_->Barrier(stream), kOp, "execute");
}

Status Runtime::AllGather(const SymmetricView& output, const void* input,
                          std::uint64_t input_bytes, StreamRef stream, KeepAlive keep_alive) {
  std::lock_guard<std::mutex> lock(mutex_);
  constexpr std::string_view kOp = "all_gather";
  HPS_RECORD_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::uint64_t offset = 0;
  AllocationRecord record;
  HPS_RECORD_IF_ERROR(ResolveOperand(output, &offset, &record), kOp, "validate");
  const std::uint64_t size = static_cast<std::uint64_t>(size_);
  if (input_bytes > output.bytes / size || output.bytes != input_bytes * size) {
    return Record(Status::Contract(ErrorCode::kInvalidArgument, "output byte size",
                                   "input byte size * root size (" +
                                       std::to_string(input_bytes) + " * " +
                                       std::to_string(size) + ")",
                                   std::to_string(output.bytes)),
                  kOp, "validate");
  }
  if (input == nullptr && input_bytes > 0) {
    return Record(
        Status::Contract(ErrorCode::kInvalidArgument, "all_gather input", "non-null", "null"),
        kOp, "validate");
  }
  const auto in = reinterpret_cast<std::uintptr_t>(input);
  const auto out = reinterpret_cast<std::uintptr_t>(output.data);
  if (input_bytes > 0 && in < out + output.bytes && out < in + input_bytes) {
    return Record(Status::Contract(ErrorCode::kInvalidArgument, "all_gather input",
                                   "disjoint from the output [" + Hex(output.data) + ", +" +
                                       std::to_string(output.bytes) + ")",
                                   "[" + Hex(input) + ", +" + std::to_string(input_bytes) + ")"),
                  kOp, "validate");
  }
  if (input_bytes == 0) return Status::Ok();
  return Record(backend_->AllGather(stream, offset, input, input_bytes, std::move(keep_alive)),
                kOp, "execute");
}

Status Runtime::CurrentStream(StreamRef* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  constexpr std::string_view kOp = "current_stream";
  HPS_RECORD_IF_ERROR(CheckReady(kOp), kOp, "state");
  *out = backend_->CurrentStream();
  return Status::Ok();
}

void Runtime::ReportOrphan(const OrphanReport& report) {
  HPS_LOG_ERROR("symmetric allocation lost its last reference without free (leak): id=" +
                std::to_string(report.id) + ", base=" + Hex(report.base) +
                ", bytes=" + std::to_string(report.bytes) + ", rank=" +
                std::to_string(report.rank) + ", lifecycle=" + std::to_string(report.lifecycle));
  std::lock_guard<std::mutex> lock(orphan_mutex_);
  pending_orphans_.push_back(report);
}

void Runtime::AdoptOrphans() {
  std::vector<OrphanReport> pending;
  {
    std::lock_guard<std::mutex> lock(orphan_mutex_);
    pending.swap(pending_orphans_);
  }
  for (const OrphanReport& report : pending) {
    if (report.lifecycle == registry_.lifecycle()) registry_.MarkLeaked(report.id);
  }
}

void Runtime::NoteFailure(const Status& status) {
  if (status.ok()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  latest_failure_ = status;
}

Diagnostics Runtime::Snapshot() {
  std::lock_guard<std::mutex> lock(mutex_);
  AdoptOrphans();
  Diagnostics d;
  d.state = state_;
  d.lifecycle = registry_.lifecycle();
  d.rank = rank_;
  d.size = size_;
  d.global_ranks = global_ranks_;
  d.device = state_ == RuntimeState::kReady ? device_.ToString() : "";
  d.backend = backend_ ? std::string(backend_->name()) : "";
  d.config = config_;
  d.heap_base = heap_base_;
  d.heap = allocator_.Usage();
  d.peaks = registry_.peaks();
  d.live = registry_.Live();
  d.leaks = registry_.Leaked();
  d.latest_failure = latest_failure_;
  return d;
}

}  // namespace hyper_parallel::shmem
