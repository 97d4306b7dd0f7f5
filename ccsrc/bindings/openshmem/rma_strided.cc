// The OpenSHMEM C library's strided puts and gets (docs/openshmem.md, "What is there"):
// shmem_<T>_iput and _iget, shmem_iput<BITS> and iget<BITS>.
#include "bindings/openshmem/rma.h"

namespace hyper_parallel::shmem::openshmem {
namespace {

// Element i from source[i * sst] to dest[i * dst], `size` bytes each: one contiguous copy when
// both strides are 1; else the puts are non-blocking, then one quiet completes them.
void Strided(std::string_view call, bool put, void* dest, const void* source, std::ptrdiff_t dst,
             std::ptrdiff_t sst, std::size_t nelems, std::size_t size, int pe) {
  if (dst == 1 && sst == 1) return Copy(call, put, dest, source, Bytes(call, nelems, size), pe, false);
  for (std::size_t i = 0; i < nelems; ++i) {
    const auto at = static_cast<std::ptrdiff_t>(i);
    Copy(call, put, static_cast<char*>(dest) + at * dst * static_cast<std::ptrdiff_t>(size),
         static_cast<const char*>(source) + at * sst * static_cast<std::ptrdiff_t>(size), size, pe,
         put);
  }
  if (put) Quiet(call);
}

}  // namespace
}  // namespace hyper_parallel::shmem::openshmem

using namespace hyper_parallel::shmem;
using namespace hyper_parallel::shmem::openshmem;

extern "C" {

#define HPS_DEFINE_STRIDED_ONE(NAME, T, SIZE, PUT)                                              \
  void shmem_ctx_##NAME(shmem_ctx_t ctx, T* dest, const T* source, ptrdiff_t dst,              \
                        ptrdiff_t sst, size_t nelems, int pe) {                                 \
    Strided("shmem_" #NAME, PUT, dest, source, dst, sst, nelems, SIZE,                         \
            ContextPe("shmem_" #NAME, Ctx(ctx), pe));                                          \
  }                                                                                             \
  HPS_DEFAULT_CONTEXT_FORM(                                                                     \
      void, NAME,                                                                               \
      (T * dest, const T* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe),         \
      (dest, source, dst, sst, nelems, pe))
#define HPS_DEFINE_STRIDED(T, N)                              \
  HPS_DEFINE_STRIDED_ONE(N##_iput, T, sizeof(T), true)        \
  HPS_DEFINE_STRIDED_ONE(N##_iget, T, sizeof(T), false)
HPS_SHMEM_RMA_TYPES(HPS_DEFINE_STRIDED)

#define HPS_DEFINE_SIZED_STRIDED(BITS, T)                       \
  HPS_DEFINE_STRIDED_ONE(iput##BITS, void, BITS / 8, true)      \
  HPS_DEFINE_STRIDED_ONE(iget##BITS, void, BITS / 8, false)
HPS_SHMEM_SIZES(HPS_DEFINE_SIZED_STRIDED)
HPS_DEFINE_SIZED_STRIDED(128, void)

}  // extern "C"
