// The OpenSHMEM C library's signals (docs/openshmem.md, "What is there"): shmem_<T>_put_signal
// and shmem_putmem_signal with their _nbi forms, shmem_signal_fetch and
// shmem_signal_wait_until.
#include "bindings/openshmem/rma.h"

namespace hyper_parallel::shmem::openshmem {

void PutSignal(std::string_view call, void* dest, const void* source, std::uint64_t bytes,
               std::uint64_t* sig_addr, std::uint64_t signal, int sig_op, int pe) {
  Runtime& runtime = Ready(call);
  CheckPe(call, pe);
  if (sig_op != SHMEM_SIGNAL_SET && sig_op != SHMEM_SIGNAL_ADD) {
    FailArgument(call, "sig_op", "SHMEM_SIGNAL_SET or SHMEM_SIGNAL_ADD", std::to_string(sig_op));
  }
  const SymmetricView signal_view = Resolve(call, "sig_addr", sig_addr, sizeof(std::uint64_t));
  const SignalOp op = sig_op == SHMEM_SIGNAL_SET ? SignalOp::kSet : SignalOp::kAdd;
  NoteRuntimeRma();
  Status s;
  if (bytes == 0) {
    s = runtime.Signal(signal_view, SignalWidth::k64, static_cast<std::int64_t>(signal), pe, op,
                       kDefaultStream);
  } else {
    s = runtime.PutSignal(Resolve(call, "dest", dest, bytes), source, signal_view,
                          SignalWidth::k64, static_cast<std::int64_t>(signal), pe, op,
                          kDefaultStream);
  }
  if (!s.ok()) Fail(call, s);
}

}  // namespace hyper_parallel::shmem::openshmem

using namespace hyper_parallel::shmem;
using namespace hyper_parallel::shmem::openshmem;

extern "C" {

// shmem_ctx_<NAME>, shmem_<NAME> and their _nbi forms (the same calls: the signal lands after
// the data either way) over elements of `SIZE` bytes.
#define HPS_SIGNAL_PARAMS(T) \
  T *dest, const T *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe
#define HPS_SIGNAL_ARGS dest, source, nelems, sig_addr, signal, sig_op, pe
#define HPS_DEFINE_PUT_SIGNAL(NAME, T, SIZE)                                                    \
  void shmem_ctx_##NAME(shmem_ctx_t ctx, HPS_SIGNAL_PARAMS(T)) {                    \
    PutSignal("shmem_" #NAME, dest, source, Bytes("shmem_" #NAME, nelems, SIZE), sig_addr,     \
              signal, sig_op, ContextPe("shmem_" #NAME, Ctx(ctx), pe));                        \
  }                                                                                             \
  void shmem_ctx_##NAME##_nbi(shmem_ctx_t ctx, HPS_SIGNAL_PARAMS(T)) {              \
    shmem_ctx_##NAME(ctx, HPS_SIGNAL_ARGS);                                         \
  }                                                                                             \
  HPS_DEFAULT_CONTEXT_FORM(void, NAME, (HPS_SIGNAL_PARAMS(T)), (HPS_SIGNAL_ARGS))                   \
  HPS_DEFAULT_CONTEXT_FORM(void, NAME##_nbi, (HPS_SIGNAL_PARAMS(T)), (HPS_SIGNAL_ARGS))
#define HPS_DEFINE_TYPED_PUT_SIGNAL(T, N) HPS_DEFINE_PUT_SIGNAL(N##_put_signal, T, sizeof(T))
HPS_SHMEM_RMA_TYPES(HPS_DEFINE_TYPED_PUT_SIGNAL)
HPS_DEFINE_PUT_SIGNAL(putmem_signal, void, 1)

uint64_t shmem_signal_fetch(const uint64_t* sig_addr) {
  Ready("shmem_signal_fetch");
  CheckIvar("shmem_signal_fetch", sig_addr, 1);
  return Load(sig_addr);
}
uint64_t shmem_signal_wait_until(uint64_t* sig_addr, int cmp, uint64_t cmp_value) {
  WaitOne("shmem_signal_wait_until", sig_addr, cmp, cmp_value);
  return Load(sig_addr);
}

}  // extern "C"
