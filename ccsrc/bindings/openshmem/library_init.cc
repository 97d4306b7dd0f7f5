// The OpenSHMEM C library's setup and teardown (docs/openshmem.md, "How it works"):
// shmem_init and shmem_finalize, and the queries about this PE and the library.
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "bindings/openshmem/include/shmem.h"
#include "bindings/openshmem/library_state.h"
#include "ops/collectives.h"

namespace hyper_parallel::shmem::openshmem {

State& S() {
  static State* state = new State();  // never destroyed: atexit handlers and PEs' threads use it
  return *state;
}

namespace {

void AddPredefinedTeams(Runtime& runtime) REQUIRES(S().mutex) {
  S().teams[reinterpret_cast<std::uintptr_t>(SHMEM_TEAM_WORLD)] = Described("shmem_init", kWorldTeam);
  TeamHandle node;
  if (Status s = runtime.NodeTeam(&node); !s.ok()) Fail("shmem_init", s);
  S().teams[reinterpret_cast<std::uintptr_t>(SHMEM_TEAM_SHARED)] = Described("shmem_init", node);
}

void FinalizeAtExit() {
  if (S().ready) shmem_finalize();
}

void Initialize(std::string_view call) {
  MutexLock lock(&S().mutex);
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
  const Diagnostics snapshot = runtime.Snapshot();
  S().wait = snapshot.wait;
  if (const std::optional<StaticData> data = MapStaticData(runtime)) {
    S().static_data = data;
    auto* heap = static_cast<std::byte*>(data->allocation.data);
    S().blocks[data->lo] =
        Block{data->lo, data->hi, data->allocation.id, heap, heap, data->allocation.bytes};
    ++S().generation;
  }
  AddPredefinedTeams(runtime);
  S().ready = true;
  lock.Unlock();
  MakeScratch(static_cast<int>(snapshot.config.max_teams));
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit(&FinalizeAtExit); });
}

void Finalize() {
  {
    MutexLock lock(&S().mutex);
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
  std::optional<StaticData> static_data;
  {
    MutexLock lock(&S().mutex);
    for (const auto& [value, entry] : S().teams) {
      if (value > 2) teams.emplace_back(value, entry.handle);
    }
    for (const auto& [lo, block] : S().blocks) {
      if (!S().static_data || S().static_data->lo != lo) blocks.push_back(block);
    }
    static_data = S().static_data;
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
  if (static_data) {
    {
      MutexLock lock(&S().mutex);
      S().blocks.erase(static_data->lo);
      ++S().generation;
      S().static_data.reset();
    }
    UnmapStaticData(runtime, *static_data);
  }
  if (Status s = runtime.Shutdown(); !s.ok()) Fail("shmem_finalize", s);
  MutexLock lock(&S().mutex);
  S().blocks.clear();
  ++S().generation;
  S().teams.clear();
  S().active_sets.clear();
  S().contexts.clear();
  S().init_calls = 0;
}

}  // namespace

bool Initialized() { return S().ready; }

Runtime& Ready(std::string_view call) {
  if (!S().ready) {
    Fail(call, Status::Assertion(ErrorCode::kInvalidState,
                                 "called before shmem_init or after shmem_finalize", {}));
  }
  return Runtime::Process();
}

}  // namespace hyper_parallel::shmem::openshmem

using namespace hyper_parallel::shmem;
using namespace hyper_parallel::shmem::openshmem;

extern "C" {

void shmem_init(void) { Initialize("shmem_init"); }
int shmem_init_thread(int requested, int* provided) {
  Initialize("shmem_init_thread");
  (void)requested;
  if (provided != nullptr) *provided = SHMEM_THREAD_MULTIPLE;
  return 0;
}
void shmem_query_thread(int* provided) {
  if (provided != nullptr) *provided = SHMEM_THREAD_MULTIPLE;
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
  const TeamEntry* entry =
      FindTeam("shmem_team_ptr", reinterpret_cast<std::uintptr_t>(team), true);
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
