// The OpenSHMEM C library's blocking gets (docs/openshmem.md, "What is there"): shmem_<T>_get,
// shmem_<T>_g, shmem_getmem and shmem_get<BITS>.
#include "bindings/openshmem/rma.h"

using namespace hyper_parallel::shmem;
using namespace hyper_parallel::shmem::openshmem;

extern "C" {

#define HPS_DEFINE_GET(T, N)                                                                   \
  HPS_DEFINE_COPY(N##_get, T, sizeof(T), Get, false)                                           \
  T shmem_ctx_##N##_g(shmem_ctx_t ctx, const T* source, int pe) {                             \
    T value;                                                                                   \
    Get("shmem_" #N "_g", &value, source, sizeof(T), ContextPe("shmem_" #N "_g", Ctx(ctx), pe), \
        false);                                                                                \
    return value;                                                                              \
  }                                                                                            \
  HPS_DEFAULT_CONTEXT_FORM(T, N##_g, (const T* source, int pe), (source, pe))
HPS_SHMEM_RMA_TYPES(HPS_DEFINE_GET)

#define HPS_DEFINE_SIZED_GET(BITS, T) HPS_DEFINE_COPY(get##BITS, void, BITS / 8, Get, false)
HPS_SHMEM_SIZES(HPS_DEFINE_SIZED_GET)
HPS_DEFINE_SIZED_GET(128, void)
HPS_DEFINE_COPY(getmem, void, 1, Get, false)

}  // extern "C"
