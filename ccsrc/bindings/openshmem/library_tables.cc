// The OpenSHMEM C library's tables (docs/openshmem.md, "How it works"): teams and contexts
// by handle, and the teams the deprecated active sets become.
#include <algorithm>

#include "bindings/openshmem/include/shmem.h"
#include "bindings/openshmem/library_state.h"

namespace hyper_parallel::shmem::openshmem {

const TeamEntry* FindTeam(std::string_view call, std::uintptr_t team, bool allow_invalid) {
  Ready(call);
  if (team == 0 && allow_invalid) return nullptr;
  MutexLock lock(&S().mutex);
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
  MutexLock lock(&S().mutex);
  const std::uintptr_t value = S().next_team++;
  S().teams[value] = std::move(entry);
  return value;
}

void RemoveTeam(std::uintptr_t team) {
  MutexLock lock(&S().mutex);
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
    MutexLock lock(&S().mutex);
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
  MutexLock lock(&S().mutex);
  S().active_sets[{start, stride, size}] = value;
  return S().teams[value];
}

std::uintptr_t AddContext(std::uintptr_t team) {
  MutexLock lock(&S().mutex);
  const std::uintptr_t value = S().next_context++;
  S().contexts[value] = team;
  return value;
}

void RemoveContext(std::uintptr_t ctx) {
  MutexLock lock(&S().mutex);
  S().contexts.erase(ctx);
}

std::uintptr_t ContextTeam(std::uintptr_t ctx) {
  if (ctx == reinterpret_cast<std::uintptr_t>(SHMEM_CTX_DEFAULT)) {
    return reinterpret_cast<std::uintptr_t>(SHMEM_TEAM_WORLD);
  }
  MutexLock lock(&S().mutex);
  auto it = S().contexts.find(ctx);
  return it == S().contexts.end() ? 0 : it->second;
}

int ContextPe(std::string_view call, std::uintptr_t ctx, int pe) {
  Ready(call);
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

}  // namespace hyper_parallel::shmem::openshmem
