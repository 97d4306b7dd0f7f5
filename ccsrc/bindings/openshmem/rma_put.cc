// The OpenSHMEM C library's blocking puts (docs/openshmem.md, "What is there"): shmem_<T>_put,
// shmem_<T>_p, shmem_putmem and shmem_put<BITS>; and Copy, every put's and get's one path.
#include "bindings/openshmem/rma.h"

namespace hyper_parallel::shmem::openshmem {

void Copy(std::string_view call, bool put, void* dest, const void* source, std::uint64_t bytes,
          int pe, bool nbi) {
  if (bytes == 0) {
    Ready(call);
    CheckPe(call, pe);
    return;
  }
  SymmetricView view;
  const void* symmetric = put ? dest : source;
  if (void* direct = Target(call, put ? "dest" : "source", symmetric, bytes, pe, &view)) {
    // A PE of this host: a copy into or out of its mapping.
    std::memmove(put ? direct : dest, put ? source : direct, bytes);
    return;
  }
  NoteRuntimeRma();
  Runtime& runtime = Runtime::Process();
  Status s;
  if (put) {
    s = nbi ? runtime.PutNbi(view, source, pe, kDefaultStream)
            : runtime.Put(view, source, pe, kDefaultStream);
  } else {
    s = nbi ? runtime.GetNbi(dest, view, pe, kDefaultStream)
            : runtime.Get(dest, view, pe, kDefaultStream);
  }
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
