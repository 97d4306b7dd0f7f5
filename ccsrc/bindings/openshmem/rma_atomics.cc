// The OpenSHMEM C library's atomics (docs/openshmem.md, "What is there"): the standard,
// extended and bitwise shmem_<T>_atomic_* with their context and _nbi forms, and the
// deprecated names; each one Atomic<T> (rma.h) on the word.
#include "bindings/openshmem/rma.h"

using namespace hyper_parallel::shmem;
using namespace hyper_parallel::shmem::openshmem;

extern "C" {

#define HPS_AMO_CALL(NAME, N) "shmem_" #N "_atomic_" #NAME
// shmem_ctx_<N>_atomic_<NAME> and its default-context form: one atomic `CODE` on `DEST`.
#define HPS_DEFINE_AMO_OP(RET, T, N, NAME, PARAMS, ARGS, DEST, CODE, VALUE, COMPARE)        \
  RET shmem_ctx_##N##_atomic_##NAME(shmem_ctx_t ctx, HPS_UNPAREN PARAMS) {                 \
    return static_cast<RET>(Atomic<T>(HPS_AMO_CALL(NAME, N), DEST, CODE, VALUE, COMPARE,   \
                                      ContextPe(HPS_AMO_CALL(NAME, N), Ctx(ctx), pe)));    \
  }                                                                                         \
  HPS_DEFAULT_CONTEXT_FORM(RET, N##_atomic_##NAME, PARAMS, ARGS)
// The same, as shmem_ctx_<N>_atomic_<CALLEE> with `CALLEE_ARGS` (add as fetch_add, ...).
#define HPS_DEFINE_AMO_VIA(RET, N, NAME, PARAMS, ARGS, CALLEE, CALLEE_ARGS)                   \
  RET shmem_ctx_##N##_atomic_##NAME(shmem_ctx_t ctx, HPS_UNPAREN PARAMS) {                 \
    return static_cast<RET>(shmem_ctx_##N##_atomic_##CALLEE(ctx, HPS_UNPAREN CALLEE_ARGS)); \
  }                                                                                         \
  HPS_DEFAULT_CONTEXT_FORM(RET, N##_atomic_##NAME, PARAMS, ARGS)

#define HPS_DEFINE_AMO_EXTENDED(T, N)                                                         \
  HPS_DEFINE_AMO_OP(T, T, N, fetch, (const T* source, int pe), (source, pe), source,         \
                    AtomicOp::kFetch, Zero<T>(), Zero<T>())                                   \
  HPS_DEFINE_AMO_OP(void, T, N, set, (T * dest, T value, int pe), (dest, value, pe), dest,   \
                    AtomicOp::kSet, value, Zero<T>())                                         \
  HPS_DEFINE_AMO_OP(T, T, N, swap, (T * dest, T value, int pe), (dest, value, pe), dest,     \
                    AtomicOp::kSwap, value, Zero<T>())                                        \
  HPS_DEFINE_FETCH_NBI(T, N##_atomic_fetch, (const T* source, int pe), (source, pe))        \
  HPS_DEFINE_FETCH_NBI(T, N##_atomic_swap, (T * dest, T value, int pe), (dest, value, pe))
HPS_SHMEM_AMO_EXTENDED_TYPES(HPS_DEFINE_AMO_EXTENDED)

#define HPS_DEFINE_AMO_STANDARD(T, N)                                                              \
  HPS_DEFINE_AMO_OP(T, T, N, compare_swap, (T * dest, T cond, T value, int pe),                   \
                    (dest, cond, value, pe), dest, AtomicOp::kCompareSwap, value, cond)           \
  HPS_DEFINE_AMO_OP(T, T, N, fetch_add, (T * dest, T value, int pe), (dest, value, pe), dest,     \
                    AtomicOp::kAdd, value, Zero<T>())                                              \
  HPS_DEFINE_AMO_VIA(void, N, add, (T * dest, T value, int pe), (dest, value, pe), fetch_add,     \
                     (dest, value, pe))                                                            \
  HPS_DEFINE_AMO_VIA(T, N, fetch_inc, (T * dest, int pe), (dest, pe), fetch_add,                  \
                     (dest, One<T>(), pe))                                                         \
  HPS_DEFINE_AMO_VIA(void, N, inc, (T * dest, int pe), (dest, pe), fetch_add, (dest, One<T>(), pe)) \
  HPS_DEFINE_FETCH_NBI(T, N##_atomic_compare_swap, (T * dest, T cond, T value, int pe),           \
                       (dest, cond, value, pe))                                                    \
  HPS_DEFINE_FETCH_NBI(T, N##_atomic_fetch_inc, (T * dest, int pe), (dest, pe))                   \
  HPS_DEFINE_FETCH_NBI(T, N##_atomic_fetch_add, (T * dest, T value, int pe), (dest, value, pe))
HPS_SHMEM_AMO_STANDARD_TYPES(HPS_DEFINE_AMO_STANDARD)

#define HPS_DEFINE_AMO_BITWISE_OP(T, N, OP, CODE)                                                 \
  HPS_DEFINE_AMO_OP(T, T, N, fetch_##OP, (T * dest, T value, int pe), (dest, value, pe), dest,   \
                    CODE, value, Zero<T>())                                                       \
  HPS_DEFINE_AMO_VIA(void, N, OP, (T * dest, T value, int pe), (dest, value, pe), fetch_##OP,    \
                     (dest, value, pe))                                                           \
  HPS_DEFINE_FETCH_NBI(T, N##_atomic_fetch_##OP, (T * dest, T value, int pe), (dest, value, pe))
#define HPS_DEFINE_AMO_BITWISE(T, N)                           \
  HPS_DEFINE_AMO_BITWISE_OP(T, N, and, AtomicOp::kAnd)          \
  HPS_DEFINE_AMO_BITWISE_OP(T, N, or, AtomicOp::kOr)            \
  HPS_DEFINE_AMO_BITWISE_OP(T, N, xor, AtomicOp::kXor)
HPS_SHMEM_AMO_BITWISE_TYPES(HPS_DEFINE_AMO_BITWISE)

#define HPS_DEFINE_OLD_AMO(T, N)                                                                   \
  T shmem_##N##_fadd(T* dest, T value, int pe) { return shmem_##N##_atomic_fetch_add(dest, value, pe); } \
  T shmem_##N##_finc(T* dest, int pe) { return shmem_##N##_atomic_fetch_inc(dest, pe); }          \
  void shmem_##N##_add(T* dest, T value, int pe) { shmem_##N##_atomic_add(dest, value, pe); }     \
  void shmem_##N##_inc(T* dest, int pe) { shmem_##N##_atomic_inc(dest, pe); }                     \
  T shmem_##N##_cswap(T* dest, T cond, T value, int pe) {                                         \
    return shmem_##N##_atomic_compare_swap(dest, cond, value, pe);                                \
  }
HPS_SHMEM_OLD_AMO_TYPES(HPS_DEFINE_OLD_AMO)
#define HPS_DEFINE_OLD_AMO_EXTENDED(T, N)                                                          \
  T shmem_##N##_swap(T* dest, T value, int pe) { return shmem_##N##_atomic_swap(dest, value, pe); } \
  T shmem_##N##_fetch(const T* source, int pe) { return shmem_##N##_atomic_fetch(source, pe); }   \
  void shmem_##N##_set(T* dest, T value, int pe) { shmem_##N##_atomic_set(dest, value, pe); }
HPS_SHMEM_OLD_AMO_EXTENDED_TYPES(HPS_DEFINE_OLD_AMO_EXTENDED)

}  // extern "C"
