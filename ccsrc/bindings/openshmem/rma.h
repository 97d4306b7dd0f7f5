// What the OpenSHMEM C library's one-sided routines share (docs/openshmem.md, "What is
// there"), private to rma_*.cc, one file a family as OSHMEM's shmem/c/ has them: rma_put.cc,
// rma_get.cc, rma_nbi.cc, rma_strided.cc, rma_signal.cc, rma_atomics.cc, rma_sync.cc (the
// point-to-point synchronization) and rma_order.cc (fence, quiet, locks, cache). Each typed
// routine is defined from the type tables shmem.h declares it from.
//
// Thread-safety: as the Runtime's operations (docs/openshmem.md, "How it works").
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "backends/atomic_op.h"
#include "bindings/openshmem/include/shmem.h"
#include "bindings/openshmem/library.h"
#include "data_plane/comparison.h"

namespace hyper_parallel::shmem::openshmem {

/// A copy of `bytes` between local memory and symmetric memory at world PE `pe` (rma_put.cc):
/// a put from local `source` to symmetric `dest`, or a get from symmetric `source` to local
/// `dest`; `nbi`: it may complete at the next quiet.
void Copy(std::string_view call, bool put, void* dest, const void* source, std::uint64_t bytes,
          int pe, bool nbi);
inline void Put(std::string_view call, void* dest, const void* source, std::uint64_t bytes,
                int pe, bool nbi) {
  Copy(call, true, dest, source, bytes, pe, nbi);
}
inline void Get(std::string_view call, void* dest, const void* source, std::uint64_t bytes,
                int pe, bool nbi) {
  Copy(call, false, dest, source, bytes, pe, nbi);
}
/// The data, then the 64-bit signal word (rma_signal.cc).
void PutSignal(std::string_view call, void* dest, const void* source, std::uint64_t bytes,
               std::uint64_t* sig_addr, std::uint64_t signal, int sig_op, int pe);

/// One atomic on the `sizeof(T)`-byte word `dest` at world PE `pe`; the old value.
template <class T>
T Atomic(std::string_view call, const T* dest, AtomicOp op, T value, T compare, int pe) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8);
  if (reinterpret_cast<std::uintptr_t>(dest) % sizeof(T) != 0) {
    Ready(call);
    FailArgument(call, "dest", "aligned to its type's size (" + std::to_string(sizeof(T)) + ")",
                 "an unaligned address");
  }
  SymmetricView view;
  void* direct = Target(call, "dest", dest, sizeof(T), pe, &view);
  std::uint64_t bits = 0, compare_bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  std::memcpy(&compare_bits, &compare, sizeof(T));
  T old{};
  if (direct != nullptr) {  // the CPU's atomics on the mapping, as the Runtime's
    const std::uint64_t old_bits = ApplyAtomic(static_cast<std::byte*>(direct), sizeof(T), op,
                                               bits, compare_bits);
    std::memcpy(&old, &old_bits, sizeof(T));
    return old;
  }
  NoteRuntimeRma();
  Runtime& runtime = Runtime::Process();
  if (Status s = runtime.Atomic(view, sizeof(T), op, bits, compare_bits, pe, &old, kDefaultStream);
      !s.ok()) {
    Fail(call, s);
  }
  return old;
}

// SHMEM_CMP_* number the comparisons as the Runtime's Comparison does (data_plane/comparison.h).
static_assert(SHMEM_CMP_EQ == static_cast<int>(Comparison::kEq) &&
              SHMEM_CMP_NE == static_cast<int>(Comparison::kNe) &&
              SHMEM_CMP_GT == static_cast<int>(Comparison::kGt) &&
              SHMEM_CMP_GE == static_cast<int>(Comparison::kGe) &&
              SHMEM_CMP_LT == static_cast<int>(Comparison::kLt) &&
              SHMEM_CMP_LE == static_cast<int>(Comparison::kLe));

/// `value <cmp> target` for a SHMEM_CMP_* that CheckComparison let through.
template <class T>
bool Compare(T value, int cmp, T target) {
  return data_plane::Satisfies(value, static_cast<Comparison>(cmp), target);
}

/// Fails as `call` unless `cmp` is a SHMEM_CMP_*.
void CheckComparison(std::string_view call, int cmp);

/// This PE's symmetric word as peers' puts and atomics leave it.
template <class T>
T Load(const T* ivar) {
  return __atomic_load_n(ivar, __ATOMIC_ACQUIRE);
}

/// Fails as `call` unless the `count` words at `ivars` are symmetric.
template <class T>
void CheckIvar(std::string_view call, const T* ivars, std::size_t count) {
  SymmetricView view;
  if (count > 0 && !TryResolve(ivars, count * sizeof(T), &view)) {
    Resolve(call, "ivars", ivars, count * sizeof(T));  // fails naming it
  }
}

/// Waits until this PE's word `ivar` compares true against `value`.
template <class T>
void WaitOne(std::string_view call, T* ivar, int cmp, T value) {
  Ready(call);
  CheckComparison(call, cmp);
  CheckIvar(call, ivar, 1);
  WaitUntil(call, [&] { return Compare(Load(ivar), cmp, value); });
}

// T{} and T{1} for every T, "long long" and "unsigned int" included (the routine macros).
template <class T>
constexpr T Zero() { return T(0); }
template <class T>
constexpr T One() { return T(1); }

inline std::uintptr_t Ctx(shmem_ctx_t ctx) { return reinterpret_cast<std::uintptr_t>(ctx); }

}  // namespace hyper_parallel::shmem::openshmem

#define HPS_UNPAREN(...) __VA_ARGS__
/// shmem_<NAME>, the default-context form of shmem_ctx_<NAME>: `PARAMS` its parameters and
/// `ARGS` their names, in parentheses.
#define HPS_DEFAULT_CONTEXT_FORM(RET, NAME, PARAMS, ARGS) \
  RET shmem_##NAME PARAMS { return shmem_ctx_##NAME(SHMEM_CTX_DEFAULT, HPS_UNPAREN ARGS); }
/// shmem_ctx_<NAME>_nbi and shmem_<NAME>_nbi of a fetching atomic: the blocking call, its old
/// value stored at `fetch` (`PARAMS` and `ARGS` without the context and `fetch`).
#define HPS_DEFINE_FETCH_NBI(T, NAME, PARAMS, ARGS)                                       \
  void shmem_ctx_##NAME##_nbi(shmem_ctx_t ctx, T* fetch, HPS_UNPAREN PARAMS) {           \
    *fetch = shmem_ctx_##NAME(ctx, HPS_UNPAREN ARGS);                                     \
  }                                                                                        \
  void shmem_##NAME##_nbi(T* fetch, HPS_UNPAREN PARAMS) {                                 \
    shmem_ctx_##NAME##_nbi(SHMEM_CTX_DEFAULT, fetch, HPS_UNPAREN ARGS);                   \
  }
/// A contiguous copy routine over elements of `SIZE` bytes: shmem_ctx_<NAME> and shmem_<NAME>
/// as `FN` (Put or Get), `NBI` whether it may complete at the next quiet.
#define HPS_DEFINE_COPY(NAME, T, SIZE, FN, NBI)                                                \
  void shmem_ctx_##NAME(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems, int pe) {   \
    FN("shmem_" #NAME, dest, source, Bytes("shmem_" #NAME, nelems, SIZE),                     \
       ContextPe("shmem_" #NAME, Ctx(ctx), pe), NBI);                                         \
  }                                                                                            \
  HPS_DEFAULT_CONTEXT_FORM(void, NAME, (T * dest, const T* source, size_t nelems, int pe),     \
                           (dest, source, nelems, pe))
