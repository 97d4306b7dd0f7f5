// The OpenSHMEM C library's teams and contexts (docs/openshmem.md): the team routines over the
// Runtime's teams, and contexts that share the default context's ordering.
#include <algorithm>
#include <string>

#include "bindings/openshmem/include/shmem.h"
#include "bindings/openshmem/library.h"

using namespace hyper_parallel::shmem;
using namespace hyper_parallel::shmem::openshmem;

namespace {
std::uintptr_t TeamValue(shmem_team_t team) { return reinterpret_cast<std::uintptr_t>(team); }
shmem_team_t TeamOf(std::uintptr_t value) { return reinterpret_cast<shmem_team_t>(value); }
}  // namespace

extern "C" {

// ---- teams ------------------------------------------------------------------------------------
int shmem_team_my_pe(shmem_team_t team) {
  const TeamEntry* entry = FindTeam("shmem_team_my_pe", TeamValue(team), true);
  return entry ? entry->my_pe : -1;
}
int shmem_team_n_pes(shmem_team_t team) {
  const TeamEntry* entry = FindTeam("shmem_team_n_pes", TeamValue(team), true);
  return entry ? static_cast<int>(entry->pes.size()) : -1;
}
int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t* config) {
  const TeamEntry* entry = FindTeam("shmem_team_get_config", TeamValue(team), true);
  if (entry == nullptr) return -1;
  if (config != nullptr && (config_mask & SHMEM_TEAM_NUM_CONTEXTS)) {
    config->num_contexts = entry->num_contexts;
  }
  return 0;
}
int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team) {
  const TeamEntry* from = FindTeam("shmem_team_translate_pe", TeamValue(src_team), true);
  const TeamEntry* to = FindTeam("shmem_team_translate_pe", TeamValue(dest_team), true);
  if (from == nullptr || to == nullptr || src_pe < 0 ||
      src_pe >= static_cast<int>(from->pes.size())) {
    return -1;
  }
  const int world = from->pes[static_cast<std::size_t>(src_pe)];
  auto it = std::find(to->pes.begin(), to->pes.end(), world);
  return it == to->pes.end() ? -1 : static_cast<int>(it - to->pes.begin());
}

namespace {
// A split's result as an entry: this PE's new team, or SHMEM_TEAM_INVALID when outside it.
// `config` under `mask` is what shmem_team_get_config reports (the contexts any PE may make
// are not limited: they share the default context's ordering).
shmem_team_t Adopt(std::string_view call, const TeamHandle& handle,
                   const shmem_team_config_t* config, long mask) {
  if (!handle.valid()) return SHMEM_TEAM_INVALID;
  const int contexts =
      config != nullptr && (mask & SHMEM_TEAM_NUM_CONTEXTS) ? config->num_contexts : 0;
  return TeamOf(AddTeam(Described(call, handle, contexts)));
}
// A split's error as the specification's return: nonzero on every PE, with the reason logged.
int SplitFailed(std::string_view call, const Status& status) {
  if (status.code() == ErrorCode::kPeerLost || status.code() == ErrorCode::kTimeout) {
    Fail(call, status);
  }
  Report(call, status);
  return -1;
}
}  // namespace

int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                             const shmem_team_config_t* config, long config_mask,
                             shmem_team_t* new_team) {
  constexpr std::string_view kCall = "shmem_team_split_strided";
  if (new_team != nullptr) *new_team = SHMEM_TEAM_INVALID;
  const TeamEntry* parent = FindTeam(kCall, TeamValue(parent_team), true);
  if (parent == nullptr) return -1;
  TeamHandle handle;
  if (Status s = Runtime::Process().TeamSplitStrided(parent->handle, start, stride, size, &handle);
      !s.ok()) {
    return SplitFailed(kCall, s);
  }
  if (new_team != nullptr) *new_team = Adopt(kCall, handle, config, config_mask);
  return 0;
}

int shmem_team_split_2d(shmem_team_t parent_team, int xrange,
                        const shmem_team_config_t* xaxis_config, long xaxis_mask,
                        shmem_team_t* xaxis_team, const shmem_team_config_t* yaxis_config,
                        long yaxis_mask, shmem_team_t* yaxis_team) {
  constexpr std::string_view kCall = "shmem_team_split_2d";
  if (xaxis_team != nullptr) *xaxis_team = SHMEM_TEAM_INVALID;
  if (yaxis_team != nullptr) *yaxis_team = SHMEM_TEAM_INVALID;
  const TeamEntry* parent = FindTeam(kCall, TeamValue(parent_team), true);
  if (parent == nullptr) return -1;
  TeamHandle x, y;
  if (Status s = Runtime::Process().TeamSplit2d(parent->handle, xrange, &x, &y); !s.ok()) {
    return SplitFailed(kCall, s);
  }
  if (xaxis_team != nullptr) *xaxis_team = Adopt(kCall, x, xaxis_config, xaxis_mask);
  if (yaxis_team != nullptr) *yaxis_team = Adopt(kCall, y, yaxis_config, yaxis_mask);
  return 0;
}

void shmem_team_destroy(shmem_team_t team) {
  constexpr std::string_view kCall = "shmem_team_destroy";
  const std::uintptr_t value = TeamValue(team);
  if (value <= 2) {
    if (value == 0) return;
    FailArgument(kCall, "team", "a team made by a split", "a predefined team");
  }
  const TeamEntry* entry = FindTeam(kCall, value);
  if (Status s = Runtime::Process().TeamDestroy(entry->handle); !s.ok()) Fail(kCall, s);
  RemoveTeam(value);
}

// ---- contexts: each shares the default context's ordering, as the specification allows ------
int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t* ctx) {
  (void)options;
  const TeamEntry* entry = FindTeam("shmem_team_create_ctx", TeamValue(team), true);
  if (ctx == nullptr) return -1;
  if (entry == nullptr) {
    *ctx = SHMEM_CTX_INVALID;
    return -1;
  }
  *ctx = reinterpret_cast<shmem_ctx_t>(AddContext(TeamValue(team)));
  return 0;
}
int shmem_ctx_create(long options, shmem_ctx_t* ctx) {
  return shmem_team_create_ctx(SHMEM_TEAM_WORLD, options, ctx);
}
void shmem_ctx_destroy(shmem_ctx_t ctx) {
  if (ctx == SHMEM_CTX_DEFAULT || ctx == SHMEM_CTX_INVALID) return;
  Quiet("shmem_ctx_destroy");
  RemoveContext(reinterpret_cast<std::uintptr_t>(ctx));
}
int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t* team) {
  if (team == nullptr) return -1;
  *team = TeamOf(ContextTeam(reinterpret_cast<std::uintptr_t>(ctx)));
  return *team == SHMEM_TEAM_INVALID ? -1 : 0;
}

}  // extern "C"
