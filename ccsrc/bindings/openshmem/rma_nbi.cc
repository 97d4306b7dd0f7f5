// The OpenSHMEM C library's non-blocking puts and gets (docs/openshmem.md, "What is there"):
// the _nbi forms of shmem_<T>_put and _get, shmem_putmem and _getmem, shmem_put<BITS> and
// get<BITS>; each completes by the next quiet.
#include "bindings/openshmem/rma.h"

using namespace hyper_parallel::shmem;
using namespace hyper_parallel::shmem::openshmem;

extern "C" {

#define HPS_DEFINE_NBI(T, N)                              \
  HPS_DEFINE_COPY(N##_put_nbi, T, sizeof(T), Put, true)   \
  HPS_DEFINE_COPY(N##_get_nbi, T, sizeof(T), Get, true)
HPS_SHMEM_RMA_TYPES(HPS_DEFINE_NBI)

#define HPS_DEFINE_SIZED_NBI(BITS, T)                          \
  HPS_DEFINE_COPY(put##BITS##_nbi, void, BITS / 8, Put, true)  \
  HPS_DEFINE_COPY(get##BITS##_nbi, void, BITS / 8, Get, true)
HPS_SHMEM_SIZES(HPS_DEFINE_SIZED_NBI)
HPS_DEFINE_SIZED_NBI(128, void)
HPS_DEFINE_COPY(putmem_nbi, void, 1, Put, true)
HPS_DEFINE_COPY(getmem_nbi, void, 1, Get, true)

}  // extern "C"
