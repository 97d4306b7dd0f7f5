// The OpenSHMEM C library's collective entry points (docs/openshmem.md, "What is there"):
// barriers and syncs, the team forms of broadcast, collect, fcollect and alltoall(s), and the
// deprecated active-set forms, which run on the team of their active set.
#include <vector>

#include "bindings/openshmem/collectives.h"

using namespace hyper_parallel::shmem;
using namespace hyper_parallel::shmem::openshmem;

extern "C" {

void shmem_barrier_all(void) {
  Quiet("shmem_barrier_all");
  Barrier("shmem_barrier_all", *FindTeam("shmem_barrier_all", 1));
}
void shmem_sync_all(void) { Barrier("shmem_sync_all", *FindTeam("shmem_sync_all", 1)); }
int shmem_team_sync(shmem_team_t team) {
  if (team == SHMEM_TEAM_INVALID) return -1;
  Barrier("shmem_team_sync", TeamArg("shmem_team_sync", team));
  return 0;
}
void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long* pSync) {
  (void)pSync;
  Quiet("shmem_barrier");
  Barrier("shmem_barrier", ActiveSet("shmem_barrier", PE_start, logPE_stride, PE_size));
}
void shmem_sync(int PE_start, int logPE_stride, int PE_size, long* pSync) {
  (void)pSync;
  Barrier("shmem_sync", ActiveSet("shmem_sync", PE_start, logPE_stride, PE_size));
}

#define HPS_DEFINE_TEAM_COLLECTIVES(T, N)                                                         \
  int shmem_##N##_broadcast(shmem_team_t team, T* dest, const T* source, size_t nelems,          \
                            int PE_root) {                                                        \
    return Broadcast("shmem_" #N "_broadcast", TeamArg("shmem_" #N "_broadcast", team), dest,    \
                     source, Bytes("shmem_" #N, nelems, sizeof(T)), PE_root);                                        \
  }                                                                                               \
  int shmem_##N##_collect(shmem_team_t team, T* dest, const T* source, size_t nelems) {          \
    return Collect("shmem_" #N "_collect", TeamArg("shmem_" #N "_collect", team), dest, source,  \
                   Bytes("shmem_" #N, nelems, sizeof(T)));                                                           \
  }                                                                                               \
  int shmem_##N##_fcollect(shmem_team_t team, T* dest, const T* source, size_t nelems) {         \
    return Fcollect("shmem_" #N "_fcollect", TeamArg("shmem_" #N "_fcollect", team), dest,       \
                    source, Bytes("shmem_" #N, nelems, sizeof(T)));                                                  \
  }                                                                                               \
  int shmem_##N##_alltoall(shmem_team_t team, T* dest, const T* source, size_t nelems) {         \
    return Alltoall("shmem_" #N "_alltoall", TeamArg("shmem_" #N "_alltoall", team), dest,       \
                    source, Bytes("shmem_" #N, nelems, sizeof(T)));                                                  \
  }                                                                                               \
  int shmem_##N##_alltoalls(shmem_team_t team, T* dest, const T* source, ptrdiff_t dst,          \
                            ptrdiff_t sst, size_t nelems) {                                       \
    return Alltoalls("shmem_" #N "_alltoalls", TeamArg("shmem_" #N "_alltoalls", team), dest,    \
                     source, dst, sst, nelems, sizeof(T));                                        \
  }
HPS_SHMEM_RMA_TYPES(HPS_DEFINE_TEAM_COLLECTIVES)

int shmem_broadcastmem(shmem_team_t team, void* dest, const void* source, size_t nelems,
                       int PE_root) {
  return Broadcast("shmem_broadcastmem", TeamArg("shmem_broadcastmem", team), dest, source,
                   nelems, PE_root);
}
int shmem_collectmem(shmem_team_t team, void* dest, const void* source, size_t nelems) {
  return Collect("shmem_collectmem", TeamArg("shmem_collectmem", team), dest, source, nelems);
}
int shmem_fcollectmem(shmem_team_t team, void* dest, const void* source, size_t nelems) {
  return Fcollect("shmem_fcollectmem", TeamArg("shmem_fcollectmem", team), dest, source, nelems);
}
int shmem_alltoallmem(shmem_team_t team, void* dest, const void* source, size_t nelems) {
  return Alltoall("shmem_alltoallmem", TeamArg("shmem_alltoallmem", team), dest, source, nelems);
}
int shmem_alltoallsmem(shmem_team_t team, void* dest, const void* source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t nelems) {
  return Alltoalls("shmem_alltoallsmem", TeamArg("shmem_alltoallsmem", team), dest, source, dst,
                   sst, nelems, 1);
}

// The active-set forms. broadcast leaves the root's dest as it was (OpenSHMEM 1.4).
#define HPS_DEFINE_ACTIVE_SET(BITS)                                                               \
  void shmem_broadcast##BITS(void* dest, const void* source, size_t nelems, int PE_root,          \
                             int PE_start, int logPE_stride, int PE_size, long* pSync) {          \
    (void)pSync;                                                                                  \
    constexpr const char* kCall = "shmem_broadcast" #BITS;                                        \
    const TeamEntry& team = ActiveSet(kCall, PE_start, logPE_stride, PE_size);                    \
    const std::size_t bytes = Bytes(kCall, nelems, BITS / 8);                                     \
    std::vector<char> kept;                                                                       \
    if (team.my_pe == PE_root && dest != source) {                                                \
      kept.assign(static_cast<char*>(dest), static_cast<char*>(dest) + bytes);                    \
    }                                                                                             \
    Broadcast(kCall, team, dest, source, bytes, PE_root);                                         \
    if (!kept.empty()) std::memcpy(dest, kept.data(), bytes);                                     \
  }                                                                                               \
  void shmem_collect##BITS(void* dest, const void* source, size_t nelems, int PE_start,           \
                           int logPE_stride, int PE_size, long* pSync) {                          \
    (void)pSync;                                                                                  \
    Collect("shmem_collect" #BITS, ActiveSet("shmem_collect" #BITS, PE_start, logPE_stride, PE_size), \
            dest, source, Bytes("shmem_" #BITS, nelems, BITS / 8));                                                   \
  }                                                                                               \
  void shmem_fcollect##BITS(void* dest, const void* source, size_t nelems, int PE_start,          \
                            int logPE_stride, int PE_size, long* pSync) {                         \
    (void)pSync;                                                                                  \
    Fcollect("shmem_fcollect" #BITS,                                                              \
             ActiveSet("shmem_fcollect" #BITS, PE_start, logPE_stride, PE_size), dest, source,    \
             Bytes("shmem_" #BITS, nelems, BITS / 8));                                                                \
  }                                                                                               \
  void shmem_alltoall##BITS(void* dest, const void* source, size_t nelems, int PE_start,          \
                            int logPE_stride, int PE_size, long* pSync) {                         \
    (void)pSync;                                                                                  \
    Alltoall("shmem_alltoall" #BITS,                                                              \
             ActiveSet("shmem_alltoall" #BITS, PE_start, logPE_stride, PE_size), dest, source,    \
             Bytes("shmem_" #BITS, nelems, BITS / 8));                                                                \
  }                                                                                               \
  void shmem_alltoalls##BITS(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst,        \
                             size_t nelems, int PE_start, int logPE_stride, int PE_size,          \
                             long* pSync) {                                                       \
    (void)pSync;                                                                                  \
    Alltoalls("shmem_alltoalls" #BITS,                                                            \
              ActiveSet("shmem_alltoalls" #BITS, PE_start, logPE_stride, PE_size), dest, source,  \
              dst, sst, nelems, BITS / 8);                                                        \
  }
HPS_DEFINE_ACTIVE_SET(32)
HPS_DEFINE_ACTIVE_SET(64)

}  // extern "C"
