// The OpenSHMEM C library's state, setup, memory, teams and contexts (docs/openshmem.md).
#include "bindings/openshmem/library.h"

#include <link.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include "bindings/openshmem/include/shmem.h"
#include "bindings/openshmem/static_data.h"
#include "ops/collectives.h"
#include "runtime/socket_bootstrap.h"

namespace hyper_parallel::shmem::openshmem {
namespace {

// A symmetric block: [lo, hi) of this process's addresses, whose bytes are those of heap
// allocation `id` from `heap` on.
struct Block {
  std::uintptr_t lo = 0;
  std::uintptr_t hi = 0;
  AllocationId id = 0;
  std::byte* heap = nullptr;
  std::byte* base = nullptr;  // the allocation's start (Release frees the whole)
  std::uint64_t bytes = 0;    // the allocation's size
};

struct State {
  std::mutex mutex;
  std::atomic<bool> ready{false};
  int init_calls = 0;
  int provided_thread_level = SHMEM_THREAD_MULTIPLE;
  std::map<std::uintptr_t, Block> blocks;  // by lo
  // Bumped (under the mutex) at every change of `blocks`: a thread's cached block is good while
  // the generation it was read at is current.
  std::atomic<std::uint64_t> generation{1};
  int n_pes = 0;
  std::optional<StaticData> static_data;
  std::map<std::uintptr_t, TeamEntry> teams;  // by shmem_team_t value
  std::uintptr_t next_team = 3;               // 1: world, 2: shared
  std::map<std::tuple<int, int, int>, std::uintptr_t> active_sets;
  std::map<std::uintptr_t, std::uintptr_t> contexts;  // ctx value -> its team
  std::uintptr_t next_context = 2;                     // 1: SHMEM_CTX_DEFAULT
  // Where each PE's heap lies in this process (null: through the Runtime), for this lifecycle.
  std::vector<std::byte*> peer_heaps;
  std::byte* my_heap = nullptr;
};

State& S() {
  static State* state = new State();  // never destroyed: atexit handlers and PEs' threads use it
  return *state;
}

// Bytes from SHMEM_SYMMETRIC_SIZE ("64M", "1G", "1048576"; K, M, G, T powers of 1024).
std::optional<std::string> SymmetricSizeBytes(const char* text) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text, &end);
  if (errno != 0 || end == text || value <= 0) return std::nullopt;
  double scale = 1;
  switch (*end) {
    case 'k': case 'K': scale = 1024.0; ++end; break;
    case 'm': case 'M': scale = 1024.0 * 1024; ++end; break;
    case 'g': case 'G': scale = 1024.0 * 1024 * 1024; ++end; break;
    case 't': case 'T': scale = 1024.0 * 1024 * 1024 * 1024; ++end; break;
    default: break;
  }
  if (*end == 'b' || *end == 'B') ++end;
  if (*end != '\0') return std::nullopt;
  return std::to_string(static_cast<std::uint64_t>(value * scale));
}

// The C API's heap when neither variable sets it: 1 GiB, as programs written for OpenSHMEM
// expect room (OSU's message-rate tests allocate 200 MiB and hold as much in static data). Pages
// no PE touches cost nothing.
constexpr std::uint64_t kDefaultHeapBytes = std::uint64_t{1} << 30;

// The process environment, where SHMEM_SYMMETRIC_SIZE stands for the heap size unless
// HYPER_PARALLEL_SHMEM_HEAP_SIZE is set.
std::optional<std::string> Environment(std::string_view name) {
  const std::string key(name);
  if (const char* value = std::getenv(key.c_str())) return std::string(value);
  if (name == kEnvHeapSize) {
    if (const char* size = std::getenv("SHMEM_SYMMETRIC_SIZE")) {
      if (auto bytes = SymmetricSizeBytes(size)) return bytes;
      FailArgument("shmem_init", "SHMEM_SYMMETRIC_SIZE", "a size such as 512M or 1G", size);
    }
    return std::to_string(kDefaultHeapBytes);
  }
  return std::nullopt;
}

// How this PE finds the others: the launcher's variables (hps-oshrun), else those of a torchrun
// job (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: rank 0 listens on MASTER_PORT + 1), else a
// job of one PE.
Status MakeBootstrap(std::chrono::milliseconds timeout, std::unique_ptr<SocketBootstrap>* out) {
  if (std::getenv(std::string(kEnvBootstrapName).c_str()) != nullptr) {
    return SocketBootstrap::FromEnvironment(&Environment, timeout, out);
  }
  const char* rank = std::getenv("RANK");
  const char* size = std::getenv("WORLD_SIZE");
  const char* address = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (rank && size && address && port) {
    const std::string name =
        "tcp:" + std::string(address) + ":" + std::to_string(std::atoi(port) + 1);
    return SocketBootstrap::Create(name, std::atoi(rank), std::atoi(size), timeout, out);
  }
  return SocketBootstrap::Create(SocketBootstrap::UniqueName(), 0, 1, timeout, out);
}

void AddPredefinedTeams(Runtime& runtime) {
  S().teams[reinterpret_cast<std::uintptr_t>(SHMEM_TEAM_WORLD)] = Described("shmem_init", kWorldTeam);
  TeamHandle node;
  if (Status s = runtime.NodeTeam(&node); !s.ok()) Fail("shmem_init", s);
  S().teams[reinterpret_cast<std::uintptr_t>(SHMEM_TEAM_SHARED)] = Described("shmem_init", node);
}

void FinalizeAtExit() {
  if (S().ready) shmem_finalize();
}

void Initialize(std::string_view call) {
  std::unique_lock<std::mutex> lock(S().mutex);
  if (S().init_calls++ > 0) return;  // later calls have no effect
  Runtime& runtime = Runtime::Process();
  std::unique_ptr<SocketBootstrap> bootstrap;
  const Config defaults;
  if (Status s = MakeBootstrap(std::chrono::seconds(defaults.timeout_sec), &bootstrap); !s.ok()) {
    Fail(call, s);
  }
  InitOptions options;
  options.bootstrap = std::move(bootstrap);
  options.env = &Environment;
  options.collectives = ops::Collectives();
  if (Status s = runtime.Init(std::move(options)); !s.ok()) Fail(call, s);
  BackendDescription backend;
  if (Status s = runtime.DescribeBackend(call, &backend); !s.ok()) Fail(call, s);
  if (!backend.host_addressable_heap) {
    Fail(call, Status::Assertion(ErrorCode::kUnsupportedCapability,
                                 "the C API needs a heap the CPU addresses (the host backend)",
                                 {{"backend", backend.name}}));
  }
  if (Status s = runtime.PeerHeapAddresses(call, &S().peer_heaps); !s.ok()) Fail(call, s);
  S().my_heap = S().peer_heaps[static_cast<std::size_t>(runtime.rank())];
  S().n_pes = runtime.size();
  if (const std::optional<StaticData> data = MapStaticData(runtime)) {
    S().static_data = data;
    auto* heap = static_cast<std::byte*>(data->allocation.data);
    S().blocks[data->lo] =
        Block{data->lo, data->hi, data->allocation.id, heap, heap, data->allocation.bytes};
    ++S().generation;
  }
  AddPredefinedTeams(runtime);
  S().ready = true;
  lock.unlock();
  MakeScratch(static_cast<int>(runtime.Snapshot().config.max_teams));
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit(&FinalizeAtExit); });
}

}  // namespace

std::uint64_t NowNs() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

bool Initialized() { return S().ready; }

Runtime& Ready(std::string_view call) {
  if (!S().ready) {
    Fail(call, Status::Assertion(ErrorCode::kInvalidState,
                                 "called before shmem_init or after shmem_finalize", {}));
  }
  return Runtime::Process();
}

bool TryResolve(const void* address, std::uint64_t bytes, SymmetricView* out) {
  // Each thread keeps the block it found last: a program's calls mostly name the same few
  // buffers, and then a lookup takes no lock.
  thread_local Block cached;
  thread_local std::uint64_t cached_generation = 0;
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  const std::uint64_t generation = S().generation.load(std::memory_order_acquire);
  if (cached_generation != generation || at < cached.lo || at >= cached.hi) {
    std::lock_guard<std::mutex> lock(S().mutex);
    auto it = S().blocks.upper_bound(at);
    if (it == S().blocks.begin()) return false;
    const Block& block = std::prev(it)->second;
    if (at >= block.hi) return false;
    cached = block;
    cached_generation = S().generation.load(std::memory_order_relaxed);
  }
  if (bytes > cached.hi - at) return false;
  *out = SymmetricView{cached.id, cached.heap + (at - cached.lo), bytes};
  return true;
}

std::uint64_t BytesToEnd(const void* address) {
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  std::lock_guard<std::mutex> lock(S().mutex);
  auto it = S().blocks.upper_bound(at);
  if (it == S().blocks.begin()) return 0;
  const Block& block = std::prev(it)->second;
  return at < block.hi ? block.hi - at : 0;
}

SymmetricView Resolve(std::string_view call, std::string_view argument, const void* address,
                      std::uint64_t bytes) {
  SymmetricView view;
  if (!TryResolve(address, bytes, &view)) {
    char text[96];
    std::snprintf(text, sizeof(text), "%p (+%llu bytes)", address,
                  static_cast<unsigned long long>(bytes));
    FailArgument(call, argument,
                 "symmetric: inside one shmem_malloc'd block or the program's static data", text);
  }
  return view;
}

std::uint64_t Bytes(std::string_view call, std::uint64_t count, std::uint64_t size) {
  if (size != 0 && count > UINT64_MAX / size) {
    FailArgument(call, "nelems", "a count whose bytes fit 64 bits",
                 std::to_string(count) + " elements of " + std::to_string(size) + " bytes");
  }
  return count * size;
}

void* Direct(int pe, const SymmetricView& view) {
  // Read without the lock: the table is written once by shmem_init, before any operation.
  const std::vector<std::byte*>& heaps = S().peer_heaps;
  std::byte* peer = heaps[static_cast<std::size_t>(pe)];
  if (peer == nullptr || S().my_heap == nullptr) return nullptr;
  return peer + (static_cast<const std::byte*>(view.data) - S().my_heap);
}

void* Target(std::string_view call, std::string_view argument, const void* address,
             std::uint64_t bytes, int pe, SymmetricView* view) {
  if (!S().ready.load(std::memory_order_relaxed)) Ready(call);  // fails saying why
  if (pe < 0 || pe >= S().n_pes) CheckPe(call, pe);
  if (!TryResolve(address, bytes, view)) Resolve(call, argument, address, bytes);  // fails
  return Direct(pe, *view);
}

namespace {
std::atomic<bool> runtime_rma{false};
}  // namespace

void NoteRuntimeRma() { runtime_rma.store(true, std::memory_order_release); }
bool RuntimeRmaPending() { return runtime_rma.load(std::memory_order_acquire); }

void CheckPe(std::string_view call, int pe) {
  const int n = S().n_pes;
  if (pe < 0 || pe >= n) {
    FailArgument(call, "pe", "in [0, " + std::to_string(n) + ")", std::to_string(pe));
  }
}

void* Allocate(std::string_view call, std::uint64_t bytes, std::uint64_t alignment) {
  Runtime& runtime = Ready(call);
  // A block's usable size is its size rounded up to the heap's granule, which the allocator
  // reserves anyway (as malloc's usable size): programs that write a few bytes past what they
  // asked for (tests-uh's put tests do) touch only their own reservation.
  if (bytes > UINT64_MAX - HeapAllocator::kGranule) {
    FailArgument(call, "size", "a size the heap can describe", std::to_string(bytes));
  }
  bytes = (bytes + HeapAllocator::kGranule - 1) / HeapAllocator::kGranule * HeapAllocator::kGranule;
  // An alignment above the allocator's largest: a larger block, aligned inside (at the same
  // offset on every PE, whose heaps are alike).
  const std::uint64_t slack = alignment > HeapAllocator::kMaxAlignment ? alignment : 0;
  if (slack > UINT64_MAX - bytes) {
    FailArgument(call, "alignment", "one the heap can describe", std::to_string(alignment));
  }
  Allocation allocation;
  if (Status s = runtime.Allocate(bytes + slack, slack ? HeapAllocator::kMaxAlignment : alignment,
                                  &allocation, call);
      !s.ok()) {
    // Every PE judges the same heap alike, so an allocation the heap cannot hold is null on
    // every PE; anything else (PEs that asked for different sizes) ends the job.
    if (s.code() == ErrorCode::kOutOfMemory) return nullptr;
    Fail(call, s);
  }
  auto* base = static_cast<std::byte*>(allocation.data);
  auto lo = reinterpret_cast<std::uintptr_t>(base);
  if (slack) lo = (lo + alignment - 1) / alignment * alignment;
  std::lock_guard<std::mutex> lock(S().mutex);
  S().blocks[lo] = Block{lo, lo + bytes, allocation.id, base + (lo - reinterpret_cast<std::uintptr_t>(base)),
                         base, allocation.bytes};
  ++S().generation;
  return reinterpret_cast<void*>(lo);
}

void Release(std::string_view call, void* address) {
  Runtime& runtime = Ready(call);
  const auto lo = reinterpret_cast<std::uintptr_t>(address);
  Block block;
  {
    std::lock_guard<std::mutex> lock(S().mutex);
    auto it = S().blocks.find(lo);
    if (it == S().blocks.end() || (S().static_data && S().static_data->lo == lo)) {
      char text[32];
      std::snprintf(text, sizeof(text), "%p", address);
      FailArgument(call, "ptr", "null or an address shmem_malloc returned", text);
    }
    block = it->second;
    S().blocks.erase(it);
    ++S().generation;
  }
  if (Status s = runtime.Free(SymmetricView{block.id, block.base, block.bytes}, call); !s.ok()) {
    Fail(call, s);
  }
}

const TeamEntry* FindTeam(std::string_view call, std::uintptr_t team, bool allow_invalid) {
  Ready(call);
  if (team == 0 && allow_invalid) return nullptr;
  std::lock_guard<std::mutex> lock(S().mutex);
  auto it = S().teams.find(team);
  if (it == S().teams.end()) {
    FailArgument(call, "team", "a live team handle", team == 0 ? "SHMEM_TEAM_INVALID" : "an unknown or destroyed handle");
  }
  return &it->second;  // std::map nodes stay put
}

TeamEntry Described(std::string_view call, const TeamHandle& handle, int num_contexts) {
  TeamInfo info;
  if (Status s = Runtime::Process().DescribeTeam(handle, &info); !s.ok()) Fail(call, s);
  TeamEntry entry{handle, info.pes, info.my_pe, num_contexts, info.slot, true};
  for (int pe : entry.pes) {
    entry.direct = entry.direct && S().peer_heaps[static_cast<std::size_t>(pe)] != nullptr;
  }
  return entry;
}

std::uintptr_t AddTeam(TeamEntry entry) {
  std::lock_guard<std::mutex> lock(S().mutex);
  const std::uintptr_t value = S().next_team++;
  S().teams[value] = std::move(entry);
  return value;
}

void RemoveTeam(std::uintptr_t team) {
  std::lock_guard<std::mutex> lock(S().mutex);
  S().teams.erase(team);
}

const TeamEntry& ActiveSet(std::string_view call, int start, int log_stride, int size) {
  Runtime& runtime = Ready(call);
  const int n = runtime.size();
  if (log_stride < 0 || log_stride > 30 || size < 1 || start < 0 ||
      start + (static_cast<long long>(size) - 1) * (1LL << log_stride) >= n) {
    FailArgument(call, "active set",
                 "PE_start, 2^logPE_stride and PE_size naming PEs in [0, " + std::to_string(n) + ")",
                 std::to_string(start) + ", " + std::to_string(log_stride) + ", " + std::to_string(size));
  }
  const int stride = 1 << log_stride;
  if (start == 0 && stride == 1 && size == n) return *FindTeam(call, 1);
  {
    std::lock_guard<std::mutex> lock(S().mutex);
    auto it = S().active_sets.find({start, stride, size});
    if (it != S().active_sets.end()) return S().teams[it->second];
  }
  std::vector<int> pes;
  for (int i = 0; i < size; ++i) pes.push_back(start + i * stride);
  if (std::find(pes.begin(), pes.end(), runtime.rank()) == pes.end()) {
    FailArgument(call, "active set", "one this PE is in", "PE_start " + std::to_string(start) +
                     ", stride " + std::to_string(stride) + ", size " + std::to_string(size));
  }
  TeamHandle handle;
  if (Status s = runtime.TeamCreate(pes, &handle); !s.ok()) Fail(call, s);
  const TeamEntry entry = Described(call, handle);
  const std::uintptr_t value = AddTeam(entry);
  std::lock_guard<std::mutex> lock(S().mutex);
  S().active_sets[{start, stride, size}] = value;
  return S().teams[value];
}

std::uintptr_t AddContext(std::uintptr_t team) {
  std::lock_guard<std::mutex> lock(S().mutex);
  const std::uintptr_t value = S().next_context++;
  S().contexts[value] = team;
  return value;
}

void RemoveContext(std::uintptr_t ctx) {
  std::lock_guard<std::mutex> lock(S().mutex);
  S().contexts.erase(ctx);
}

std::uintptr_t ContextTeam(std::uintptr_t ctx) {
  if (ctx == reinterpret_cast<std::uintptr_t>(SHMEM_CTX_DEFAULT)) {
    return reinterpret_cast<std::uintptr_t>(SHMEM_TEAM_WORLD);
  }
  std::lock_guard<std::mutex> lock(S().mutex);
  auto it = S().contexts.find(ctx);
  return it == S().contexts.end() ? 0 : it->second;
}

int ContextPe(std::string_view call, std::uintptr_t ctx, int pe) {
  const std::uintptr_t team = ContextTeam(ctx);
  if (team == 0) {
    FailArgument(call, "ctx", "SHMEM_CTX_DEFAULT or a live context",
                 ctx == 0 ? "SHMEM_CTX_INVALID" : "an unknown or destroyed context");
  }
  if (team == 1) {
    CheckPe(call, pe);
    return pe;
  }
  const TeamEntry* entry = FindTeam(call, team);
  if (pe < 0 || pe >= static_cast<int>(entry->pes.size())) {
    FailArgument(call, "pe", "in [0, " + std::to_string(entry->pes.size()) + ") of the context's team",
                 std::to_string(pe));
  }
  return entry->pes[static_cast<std::size_t>(pe)];
}

void Quiet(std::string_view call) {
  Runtime& runtime = Ready(call);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the direct path's stores
  if (!runtime_rma.exchange(false, std::memory_order_acq_rel)) return;
  if (Status s = runtime.Quiet(kDefaultStream); !s.ok()) Fail(call, s);
}

void Backoff(std::string_view call, std::uint64_t round, std::uint64_t started_ns) {
  if (round < 64) {
    __builtin_ia32_pause();
    return;
  }
  if (round < 1024) {
    ::sched_yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(round < 4096 ? 20 : 200));
  if (round % 64 != 0) return;
  Runtime& runtime = Runtime::Process();
  if (runtime.state() == RuntimeState::kFailed) {
    Fail(call, runtime.Snapshot().terminal_failure);
  }
  const auto limit = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(runtime.timeout()).count());
  if (NowNs() - started_ns > limit) {
    Fail(call, Status::Assertion(ErrorCode::kTimeout, "the awaited value did not come",
                                 {{"waited_ms", std::to_string((NowNs() - started_ns) / 1000000)}}));
  }
}

// ---- the C entry points: setup, queries, memory, teams, contexts ---------------------------

namespace {

void Finalize() {
  {
    std::lock_guard<std::mutex> lock(S().mutex);
    if (!S().ready) return;
    S().ready = false;
  }
  Runtime& runtime = Runtime::Process();
  if (Status s = runtime.Quiet(kDefaultStream); !s.ok()) Fail("shmem_finalize", s);
  DropScratch();
  // Teams this library made, then every block still allocated (collective: every PE holds
  // the same ones, in the same order), then the static data.
  std::vector<std::pair<std::uintptr_t, TeamHandle>> teams;
  std::vector<Block> blocks;
  {
    std::lock_guard<std::mutex> lock(S().mutex);
    for (const auto& [value, entry] : S().teams) {
      if (value > 2) teams.emplace_back(value, entry.handle);
    }
    for (const auto& [lo, block] : S().blocks) {
      if (!S().static_data || S().static_data->lo != lo) blocks.push_back(block);
    }
  }
  for (const auto& [value, handle] : teams) {
    if (Status s = runtime.TeamDestroy(handle); !s.ok()) Fail("shmem_finalize", s);
  }
  for (const Block& block : blocks) {
    if (Status s = runtime.Free(SymmetricView{block.id, block.base, block.bytes}, "shmem_finalize");
        !s.ok()) {
      Fail("shmem_finalize", s);
    }
  }
  if (const std::optional<StaticData> data = S().static_data) {
    S().blocks.erase(data->lo);
    ++S().generation;
    S().static_data.reset();
    UnmapStaticData(runtime, *data);
  }
  if (Status s = runtime.Shutdown(); !s.ok()) Fail("shmem_finalize", s);
  std::lock_guard<std::mutex> lock(S().mutex);
  S().blocks.clear();
  ++S().generation;
  S().teams.clear();
  S().active_sets.clear();
  S().contexts.clear();
  S().init_calls = 0;
}

}  // namespace
}  // namespace hyper_parallel::shmem::openshmem

using namespace hyper_parallel::shmem;
using namespace hyper_parallel::shmem::openshmem;

namespace {
std::uintptr_t TeamValue(shmem_team_t team) { return reinterpret_cast<std::uintptr_t>(team); }
}  // namespace

extern "C" {

void shmem_init(void) { Initialize("shmem_init"); }
int shmem_init_thread(int requested, int* provided) {
  Initialize("shmem_init_thread");
  (void)requested;
  if (provided != nullptr) *provided = SHMEM_THREAD_MULTIPLE;
  return 0;
}
void shmem_query_thread(int* provided) {
  if (provided != nullptr) *provided = S().provided_thread_level;
}
void shmem_finalize(void) { Finalize(); }
void shmem_global_exit(int status) { GlobalExit(status); }
int shmem_my_pe(void) { return Ready("shmem_my_pe").rank(); }
int shmem_n_pes(void) { return Ready("shmem_n_pes").size(); }
int shmem_pe_accessible(int pe) {
  return Initialized() && pe >= 0 && pe < Runtime::Process().size() ? 1 : 0;
}
int shmem_addr_accessible(const void* addr, int pe) {
  SymmetricView view;
  return shmem_pe_accessible(pe) && TryResolve(addr, 1, &view) ? 1 : 0;
}
void* shmem_ptr(const void* dest, int pe) {
  // The PEs of this host: their object as this process maps it; others: null.
  SymmetricView view;
  if (!Initialized() || pe < 0 || pe >= Runtime::Process().size() || !TryResolve(dest, 1, &view)) {
    return nullptr;
  }
  if (pe == Runtime::Process().rank()) return const_cast<void*>(dest);
  return Direct(pe, view);
}
void* shmem_team_ptr(shmem_team_t team, const void* dest, int pe) {
  const TeamEntry* entry = FindTeam("shmem_team_ptr", TeamValue(team), true);
  if (entry == nullptr || pe < 0 || pe >= static_cast<int>(entry->pes.size())) return nullptr;
  return shmem_ptr(dest, entry->pes[static_cast<std::size_t>(pe)]);
}
void shmem_info_get_version(int* major, int* minor) {
  if (major != nullptr) *major = SHMEM_MAJOR_VERSION;
  if (minor != nullptr) *minor = SHMEM_MINOR_VERSION;
}
void shmem_info_get_name(char* name) {
  if (name != nullptr) std::snprintf(name, SHMEM_MAX_NAME_LEN, "%s", SHMEM_VENDOR_STRING);
}
void start_pes(int npes) {
  (void)npes;
  Initialize("start_pes");
}
int _my_pe(void) { return shmem_my_pe(); }
int _num_pes(void) { return shmem_n_pes(); }

}  // extern "C"
