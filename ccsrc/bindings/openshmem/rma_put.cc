// The OpenSHMEM C library's blocking puts (docs/openshmem.md, "What is there"): shmem_<T>_put,
// shmem_<T>_p, shmem_putmem and shmem_put<BITS>.
#include "bindings/openshmem/rma.h"

namespace hyper_parallel::shmem::openshmem {

void Put(std::string_view call, void* dest, const void* source, std::uint64_t bytes, int pe,
         bool nbi) {
  if (bytes == 0) {
    Ready(call);
    CheckPe(call, pe);
    return;
  }
  SymmetricView view;
  if (void* direct = Target(call, "dest", dest, bytes, pe, &view)) {
    std::memmove(direct, source, bytes);  // a PE of this host: a copy into its mapping
    return;
  }
  NoteRuntimeRma();
  Runtime& runtime = Runtime::Process();
  const Status s = nbi ? runtime.PutNbi(view, source, pe, kDefaultStream)
                       : runtime.Put(view, source, pe, kDefaultStream);
  if (!s.ok()) Fail(call, s);
}

}  // namespace hyper_parallel::shmem::openshmem

using namespace hyper_parallel::shmem;
using namespace hyper_parallel::shmem::openshmem;

extern "C" {

#define HPS_DEFINE_PUT(T, N)                                                                   \
  HPS_DEFINE_COPY(N##_put, T, sizeof(T), Put, false)                                           \
  void shmem_ctx_##N##_p(shmem_ctx_t ctx, T* dest, T value, int pe) {                         \
    Put("shmem_" #N "_p", dest, &value, sizeof(T), ContextPe("shmem_" #N "_p", Ctx(ctx), pe), \
        false);                                                                                \
  }                                                                                            \
  HPS_DEFAULT_CONTEXT_FORM(void, N##_p, (T * dest, T value, int pe), (dest, value, pe))
HPS_SHMEM_RMA_TYPES(HPS_DEFINE_PUT)

#define HPS_DEFINE_SIZED_PUT(BITS, T) HPS_DEFINE_COPY(put##BITS, void, BITS / 8, Put, false)
HPS_SHMEM_SIZES(HPS_DEFINE_SIZED_PUT)
HPS_DEFINE_SIZED_PUT(128, void)
HPS_DEFINE_COPY(putmem, void, 1, Put, false)

}  // extern "C"
