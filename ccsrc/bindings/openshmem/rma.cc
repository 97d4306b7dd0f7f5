// The OpenSHMEM C library's one-sided routines (docs/openshmem.md): RMA, signals, atomics,
// point-to-point synchronization, ordering and locks, each typed routine defined from the
// same type tables shmem.h declares it from.
#include <atomic>
#include <cstring>
#include <string>
#include <type_traits>

#include "backends/atomic_op.h"
#include "bindings/openshmem/include/shmem.h"
#include "bindings/openshmem/library.h"

namespace hyper_parallel::shmem::openshmem {
namespace {

// A copy of `bytes` from local `source` to symmetric `dest` at `pe` (a world PE).
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

void Get(std::string_view call, void* dest, const void* source, std::uint64_t bytes, int pe,
         bool nbi) {
  if (bytes == 0) {
    Ready(call);
    CheckPe(call, pe);
    return;
  }
  SymmetricView view;
  if (const void* direct = Target(call, "source", source, bytes, pe, &view)) {
    std::memmove(dest, direct, bytes);
    return;
  }
  NoteRuntimeRma();
  Runtime& runtime = Runtime::Process();
  const Status s = nbi ? runtime.GetNbi(dest, view, pe, kDefaultStream)
                       : runtime.Get(dest, view, pe, kDefaultStream);
  if (!s.ok()) Fail(call, s);
}

// Strided: element i from source[i * sst] to dest[i * dst], `size` bytes each.
void StridedPut(std::string_view call, void* dest, const void* source, std::ptrdiff_t dst,
                std::ptrdiff_t sst, std::size_t nelems, std::size_t size, int pe) {
  if (dst == 1 && sst == 1) return Put(call, dest, source, Bytes(call, nelems, size), pe, false);
  for (std::size_t i = 0; i < nelems; ++i) {
    const auto at = static_cast<std::ptrdiff_t>(i);
    Put(call, static_cast<char*>(dest) + at * dst * static_cast<std::ptrdiff_t>(size),
        static_cast<const char*>(source) + at * sst * static_cast<std::ptrdiff_t>(size), size, pe,
        true);
  }
  Quiet(call);
}

void StridedGet(std::string_view call, void* dest, const void* source, std::ptrdiff_t dst,
                std::ptrdiff_t sst, std::size_t nelems, std::size_t size, int pe) {
  if (dst == 1 && sst == 1) return Get(call, dest, source, Bytes(call, nelems, size), pe, false);
  for (std::size_t i = 0; i < nelems; ++i) {
    const auto at = static_cast<std::ptrdiff_t>(i);
    Get(call, static_cast<char*>(dest) + at * dst * static_cast<std::ptrdiff_t>(size),
        static_cast<const char*>(source) + at * sst * static_cast<std::ptrdiff_t>(size), size, pe,
        false);
  }
}

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

// One atomic on the `sizeof(T)`-byte word `dest` at world PE `pe`; the old value.
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

template <class T>
bool Compare(T value, int cmp, T target) {
  switch (cmp) {
    case SHMEM_CMP_EQ: return value == target;
    case SHMEM_CMP_NE: return value != target;
    case SHMEM_CMP_GT: return value > target;
    case SHMEM_CMP_GE: return value >= target;
    case SHMEM_CMP_LT: return value < target;
    case SHMEM_CMP_LE: return value <= target;
    default: return false;
  }
}

void CheckComparison(std::string_view call, int cmp) {
  if (cmp < SHMEM_CMP_EQ || cmp > SHMEM_CMP_LE) {
    FailArgument(call, "cmp", "one of SHMEM_CMP_EQ, _NE, _GT, _GE, _LT, _LE", std::to_string(cmp));
  }
}

// This PE's symmetric word as peers' puts and atomics leave it.
template <class T>
T Load(const T* ivar) {
  return __atomic_load_n(ivar, __ATOMIC_ACQUIRE);
}

template <class T>
void CheckIvar(std::string_view call, const T* ivars, std::size_t count) {
  SymmetricView view;
  if (count > 0 && !TryResolve(ivars, count * sizeof(T), &view)) {
    Resolve(call, "ivars", ivars, count * sizeof(T));  // fails naming it
  }
}

template <class T>
void WaitOne(std::string_view call, T* ivar, int cmp, T value) {
  Ready(call);
  CheckComparison(call, cmp);
  CheckIvar(call, ivar, 1);
  WaitUntil(call, [&] { return Compare(Load(ivar), cmp, value); });
}

// The element i's target: the one value, or values[i] for the _vector forms.
template <class T>
struct Targets {
  T value{};
  const T* values = nullptr;
  T operator[](std::size_t i) const { return values ? values[i] : value; }
};

template <class T>
bool Selected(const int* status, std::size_t i) { return status == nullptr || status[i] == 0; }

// Where each thread's next _any search starts: one past the index it found last, so that
// repeated calls find every satisfied element in turn (fairness), not always the first.
thread_local std::size_t any_start = 0;

template <class T>
std::size_t TestAny(T* ivars, std::size_t n, const int* status, int cmp, Targets<T> t) {
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (any_start + k) % n;
    if (Selected<T>(status, i) && Compare(Load(&ivars[i]), cmp, t[i])) {
      any_start = i + 1;
      return i;
    }
  }
  return SIZE_MAX;
}

template <class T>
bool TestAll(T* ivars, std::size_t n, const int* status, int cmp, Targets<T> t) {
  for (std::size_t i = 0; i < n; ++i) {
    if (Selected<T>(status, i) && !Compare(Load(&ivars[i]), cmp, t[i])) return false;
  }
  return true;
}

template <class T>
std::size_t TestSome(T* ivars, std::size_t n, std::size_t* indices, const int* status, int cmp,
                     Targets<T> t) {
  std::size_t found = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (Selected<T>(status, i) && Compare(Load(&ivars[i]), cmp, t[i])) indices[found++] = i;
  }
  return found;
}

template <class T>
bool AnySelected(const int* status, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (Selected<T>(status, i)) return true;
  }
  return false;
}

template <class T>
std::size_t WaitAny(std::string_view call, T* ivars, std::size_t n, const int* status, int cmp,
                    Targets<T> t) {
  Ready(call);
  CheckComparison(call, cmp);
  CheckIvar(call, ivars, n);
  if (!AnySelected<T>(status, n)) return SIZE_MAX;
  std::size_t found = SIZE_MAX;
  WaitUntil(call, [&] { return (found = TestAny(ivars, n, status, cmp, t)) != SIZE_MAX; });
  return found;
}

template <class T>
void WaitAll(std::string_view call, T* ivars, std::size_t n, const int* status, int cmp,
             Targets<T> t) {
  Ready(call);
  CheckComparison(call, cmp);
  CheckIvar(call, ivars, n);
  WaitUntil(call, [&] { return TestAll(ivars, n, status, cmp, t); });
}

template <class T>
std::size_t WaitSome(std::string_view call, T* ivars, std::size_t n, std::size_t* indices,
                     const int* status, int cmp, Targets<T> t) {
  Ready(call);
  CheckComparison(call, cmp);
  CheckIvar(call, ivars, n);
  if (!AnySelected<T>(status, n)) return 0;
  std::size_t found = 0;
  WaitUntil(call, [&] { return (found = TestSome(ivars, n, indices, status, cmp, t)) > 0; });
  return found;
}

// T{} and T{1} for every T, "long long" and "unsigned int" included (the routine macros).
template <class T>
constexpr T Zero() { return T(0); }
template <class T>
constexpr T One() { return T(1); }

// Locks: the lock word at PE 0 holds 0 when free, else 1 + the holder's PE.
constexpr int kLockHome = 0;

}  // namespace
}  // namespace hyper_parallel::shmem::openshmem

using namespace hyper_parallel::shmem;
using namespace hyper_parallel::shmem::openshmem;

namespace {
std::uintptr_t Ctx(shmem_ctx_t ctx) { return reinterpret_cast<std::uintptr_t>(ctx); }
const std::uintptr_t kDefaultCtx = reinterpret_cast<std::uintptr_t>(SHMEM_CTX_DEFAULT);
}  // namespace

extern "C" {

// ---- RMA ----------------------------------------------------------------------------------------
#define HPS_DEFINE_RMA(T, N)                                                                       \
  void shmem_ctx_##N##_put(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems, int pe) {    \
    Put("shmem_" #N "_put", dest, source, Bytes("shmem_" #N "_put", nelems, sizeof(T)),                                     \
        ContextPe("shmem_" #N "_put", Ctx(ctx), pe), false);                                      \
  }                                                                                                \
  void shmem_##N##_put(T* dest, const T* source, size_t nelems, int pe) {                         \
    Put("shmem_" #N "_put", dest, source, Bytes("shmem_" #N "_put", nelems, sizeof(T)), pe, false);                         \
  }                                                                                                \
  void shmem_ctx_##N##_get(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems, int pe) {    \
    Get("shmem_" #N "_get", dest, source, Bytes("shmem_" #N "_get", nelems, sizeof(T)),                                     \
        ContextPe("shmem_" #N "_get", Ctx(ctx), pe), false);                                      \
  }                                                                                                \
  void shmem_##N##_get(T* dest, const T* source, size_t nelems, int pe) {                         \
    Get("shmem_" #N "_get", dest, source, Bytes("shmem_" #N "_get", nelems, sizeof(T)), pe, false);                         \
  }                                                                                                \
  void shmem_ctx_##N##_put_nbi(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems,          \
                               int pe) {                                                           \
    Put("shmem_" #N "_put_nbi", dest, source, Bytes("shmem_" #N "_put_nbi", nelems, sizeof(T)),                                 \
        ContextPe("shmem_" #N "_put_nbi", Ctx(ctx), pe), true);                                   \
  }                                                                                                \
  void shmem_##N##_put_nbi(T* dest, const T* source, size_t nelems, int pe) {                     \
    Put("shmem_" #N "_put_nbi", dest, source, Bytes("shmem_" #N "_put_nbi", nelems, sizeof(T)), pe, true);                      \
  }                                                                                                \
  void shmem_ctx_##N##_get_nbi(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems,          \
                               int pe) {                                                           \
    Get("shmem_" #N "_get_nbi", dest, source, Bytes("shmem_" #N "_get_nbi", nelems, sizeof(T)),                                 \
        ContextPe("shmem_" #N "_get_nbi", Ctx(ctx), pe), true);                                   \
  }                                                                                                \
  void shmem_##N##_get_nbi(T* dest, const T* source, size_t nelems, int pe) {                     \
    Get("shmem_" #N "_get_nbi", dest, source, Bytes("shmem_" #N "_get_nbi", nelems, sizeof(T)), pe, true);                      \
  }                                                                                                \
  void shmem_ctx_##N##_p(shmem_ctx_t ctx, T* dest, T value, int pe) {                             \
    Put("shmem_" #N "_p", dest, &value, sizeof(T), ContextPe("shmem_" #N "_p", Ctx(ctx), pe),     \
        false);                                                                                    \
  }                                                                                                \
  void shmem_##N##_p(T* dest, T value, int pe) {                                                  \
    Put("shmem_" #N "_p", dest, &value, sizeof(T), pe, false);                                    \
  }                                                                                                \
  T shmem_ctx_##N##_g(shmem_ctx_t ctx, const T* source, int pe) {                                 \
    T value;                                                                                       \
    Get("shmem_" #N "_g", &value, source, sizeof(T), ContextPe("shmem_" #N "_g", Ctx(ctx), pe),   \
        false);                                                                                    \
    return value;                                                                                  \
  }                                                                                                \
  T shmem_##N##_g(const T* source, int pe) { return shmem_ctx_##N##_g(SHMEM_CTX_DEFAULT, source, pe); } \
  void shmem_ctx_##N##_iput(shmem_ctx_t ctx, T* dest, const T* source, ptrdiff_t dst,             \
                            ptrdiff_t sst, size_t nelems, int pe) {                                \
    StridedPut("shmem_" #N "_iput", dest, source, dst, sst, nelems, sizeof(T),                    \
               ContextPe("shmem_" #N "_iput", Ctx(ctx), pe));                                     \
  }                                                                                                \
  void shmem_##N##_iput(T* dest, const T* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,    \
                        int pe) {                                                                  \
    shmem_ctx_##N##_iput(SHMEM_CTX_DEFAULT, dest, source, dst, sst, nelems, pe);                  \
  }                                                                                                \
  void shmem_ctx_##N##_iget(shmem_ctx_t ctx, T* dest, const T* source, ptrdiff_t dst,             \
                            ptrdiff_t sst, size_t nelems, int pe) {                                \
    StridedGet("shmem_" #N "_iget", dest, source, dst, sst, nelems, sizeof(T),                    \
               ContextPe("shmem_" #N "_iget", Ctx(ctx), pe));                                     \
  }                                                                                                \
  void shmem_##N##_iget(T* dest, const T* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,    \
                        int pe) {                                                                  \
    shmem_ctx_##N##_iget(SHMEM_CTX_DEFAULT, dest, source, dst, sst, nelems, pe);                  \
  }                                                                                                \
  void shmem_ctx_##N##_put_signal(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems,       \
                                  uint64_t* sig_addr, uint64_t signal, int sig_op, int pe) {      \
    PutSignal("shmem_" #N "_put_signal", dest, source, Bytes("shmem_" #N "_put_signal", nelems, sizeof(T)), sig_addr, signal,      \
              sig_op, ContextPe("shmem_" #N "_put_signal", Ctx(ctx), pe));                        \
  }                                                                                                \
  void shmem_##N##_put_signal(T* dest, const T* source, size_t nelems, uint64_t* sig_addr,        \
                              uint64_t signal, int sig_op, int pe) {                               \
    shmem_ctx_##N##_put_signal(SHMEM_CTX_DEFAULT, dest, source, nelems, sig_addr, signal, sig_op, \
                               pe);                                                                \
  }                                                                                                \
  void shmem_ctx_##N##_put_signal_nbi(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems,   \
                                      uint64_t* sig_addr, uint64_t signal, int sig_op, int pe) {  \
    shmem_ctx_##N##_put_signal(ctx, dest, source, nelems, sig_addr, signal, sig_op, pe);          \
  }                                                                                                \
  void shmem_##N##_put_signal_nbi(T* dest, const T* source, size_t nelems, uint64_t* sig_addr,    \
                                  uint64_t signal, int sig_op, int pe) {                           \
    shmem_ctx_##N##_put_signal(SHMEM_CTX_DEFAULT, dest, source, nelems, sig_addr, signal, sig_op, \
                               pe);                                                                \
  }
HPS_SHMEM_RMA_TYPES(HPS_DEFINE_RMA)

#define HPS_DEFINE_SIZED(BITS, T)                                                                  \
  void shmem_ctx_put##BITS(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems,        \
                           int pe) {                                                               \
    Put("shmem_put" #BITS, dest, source, Bytes("shmem_put" #BITS, nelems, BITS / 8),                                     \
        ContextPe("shmem_put" #BITS, Ctx(ctx), pe), false);                                       \
  }                                                                                                \
  void shmem_put##BITS(void* dest, const void* source, size_t nelems, int pe) {                   \
    Put("shmem_put" #BITS, dest, source, Bytes("shmem_put" #BITS, nelems, BITS / 8), pe, false);                         \
  }                                                                                                \
  void shmem_ctx_get##BITS(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems,        \
                           int pe) {                                                               \
    Get("shmem_get" #BITS, dest, source, Bytes("shmem_get" #BITS, nelems, BITS / 8),                                     \
        ContextPe("shmem_get" #BITS, Ctx(ctx), pe), false);                                       \
  }                                                                                                \
  void shmem_get##BITS(void* dest, const void* source, size_t nelems, int pe) {                   \
    Get("shmem_get" #BITS, dest, source, Bytes("shmem_get" #BITS, nelems, BITS / 8), pe, false);                         \
  }                                                                                                \
  void shmem_ctx_put##BITS##_nbi(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems,  \
                                 int pe) {                                                         \
    Put("shmem_put" #BITS "_nbi", dest, source, Bytes("shmem_put" #BITS "_nbi", nelems, BITS / 8),                              \
        ContextPe("shmem_put" #BITS "_nbi", Ctx(ctx), pe), true);                                 \
  }                                                                                                \
  void shmem_put##BITS##_nbi(void* dest, const void* source, size_t nelems, int pe) {             \
    Put("shmem_put" #BITS "_nbi", dest, source, Bytes("shmem_put" #BITS "_nbi", nelems, BITS / 8), pe, true);                   \
  }                                                                                                \
  void shmem_ctx_get##BITS##_nbi(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems,  \
                                 int pe) {                                                         \
    Get("shmem_get" #BITS "_nbi", dest, source, Bytes("shmem_get" #BITS "_nbi", nelems, BITS / 8),                              \
        ContextPe("shmem_get" #BITS "_nbi", Ctx(ctx), pe), true);                                 \
  }                                                                                                \
  void shmem_get##BITS##_nbi(void* dest, const void* source, size_t nelems, int pe) {             \
    Get("shmem_get" #BITS "_nbi", dest, source, Bytes("shmem_get" #BITS "_nbi", nelems, BITS / 8), pe, true);                   \
  }                                                                                                \
  void shmem_ctx_iput##BITS(shmem_ctx_t ctx, void* dest, const void* source, ptrdiff_t dst,       \
                            ptrdiff_t sst, size_t nelems, int pe) {                                \
    StridedPut("shmem_iput" #BITS, dest, source, dst, sst, nelems, BITS / 8,                      \
               ContextPe("shmem_iput" #BITS, Ctx(ctx), pe));                                      \
  }                                                                                                \
  void shmem_iput##BITS(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst,             \
                        size_t nelems, int pe) {                                                   \
    StridedPut("shmem_iput" #BITS, dest, source, dst, sst, nelems, BITS / 8, pe);                 \
  }                                                                                                \
  void shmem_ctx_iget##BITS(shmem_ctx_t ctx, void* dest, const void* source, ptrdiff_t dst,       \
                            ptrdiff_t sst, size_t nelems, int pe) {                                \
    StridedGet("shmem_iget" #BITS, dest, source, dst, sst, nelems, BITS / 8,                      \
               ContextPe("shmem_iget" #BITS, Ctx(ctx), pe));                                      \
  }                                                                                                \
  void shmem_iget##BITS(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst,             \
                        size_t nelems, int pe) {                                                   \
    StridedGet("shmem_iget" #BITS, dest, source, dst, sst, nelems, BITS / 8, pe);                 \
  }
HPS_SHMEM_SIZES(HPS_DEFINE_SIZED)
HPS_DEFINE_SIZED(128, void)

void shmem_ctx_putmem(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, int pe) {
  Put("shmem_putmem", dest, source, nelems, ContextPe("shmem_putmem", Ctx(ctx), pe), false);
}
void shmem_putmem(void* dest, const void* source, size_t nelems, int pe) {
  Put("shmem_putmem", dest, source, nelems, pe, false);
}
void shmem_ctx_getmem(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, int pe) {
  Get("shmem_getmem", dest, source, nelems, ContextPe("shmem_getmem", Ctx(ctx), pe), false);
}
void shmem_getmem(void* dest, const void* source, size_t nelems, int pe) {
  Get("shmem_getmem", dest, source, nelems, pe, false);
}
void shmem_ctx_putmem_nbi(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, int pe) {
  Put("shmem_putmem_nbi", dest, source, nelems, ContextPe("shmem_putmem_nbi", Ctx(ctx), pe), true);
}
void shmem_putmem_nbi(void* dest, const void* source, size_t nelems, int pe) {
  Put("shmem_putmem_nbi", dest, source, nelems, pe, true);
}
void shmem_ctx_getmem_nbi(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, int pe) {
  Get("shmem_getmem_nbi", dest, source, nelems, ContextPe("shmem_getmem_nbi", Ctx(ctx), pe), true);
}
void shmem_getmem_nbi(void* dest, const void* source, size_t nelems, int pe) {
  Get("shmem_getmem_nbi", dest, source, nelems, pe, true);
}
void shmem_ctx_putmem_signal(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems,
                             uint64_t* sig_addr, uint64_t signal, int sig_op, int pe) {
  PutSignal("shmem_putmem_signal", dest, source, nelems, sig_addr, signal, sig_op,
            ContextPe("shmem_putmem_signal", Ctx(ctx), pe));
}
void shmem_putmem_signal(void* dest, const void* source, size_t nelems, uint64_t* sig_addr,
                         uint64_t signal, int sig_op, int pe) {
  shmem_ctx_putmem_signal(SHMEM_CTX_DEFAULT, dest, source, nelems, sig_addr, signal, sig_op, pe);
}
void shmem_ctx_putmem_signal_nbi(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems,
                                 uint64_t* sig_addr, uint64_t signal, int sig_op, int pe) {
  shmem_ctx_putmem_signal(ctx, dest, source, nelems, sig_addr, signal, sig_op, pe);
}
void shmem_putmem_signal_nbi(void* dest, const void* source, size_t nelems, uint64_t* sig_addr,
                             uint64_t signal, int sig_op, int pe) {
  shmem_ctx_putmem_signal(SHMEM_CTX_DEFAULT, dest, source, nelems, sig_addr, signal, sig_op, pe);
}
uint64_t shmem_signal_fetch(const uint64_t* sig_addr) {
  Ready("shmem_signal_fetch");
  CheckIvar("shmem_signal_fetch", sig_addr, 1);
  return Load(sig_addr);
}
uint64_t shmem_signal_wait_until(uint64_t* sig_addr, int cmp, uint64_t cmp_value) {
  WaitOne("shmem_signal_wait_until", sig_addr, cmp, cmp_value);
  return Load(sig_addr);
}

// ---- atomics --------------------------------------------------------------------------------------
#define HPS_AMO_CALL(NAME, N) "shmem_" #N "_atomic_" #NAME
#define HPS_DEFINE_AMO_EXTENDED(T, N)                                                              \
  T shmem_ctx_##N##_atomic_fetch(shmem_ctx_t ctx, const T* source, int pe) {                      \
    return Atomic<T>(HPS_AMO_CALL(fetch, N), source, AtomicOp::kFetch, Zero<T>(), Zero<T>(),                  \
                     ContextPe(HPS_AMO_CALL(fetch, N), Ctx(ctx), pe));                            \
  }                                                                                                \
  T shmem_##N##_atomic_fetch(const T* source, int pe) {                                           \
    return shmem_ctx_##N##_atomic_fetch(SHMEM_CTX_DEFAULT, source, pe);                           \
  }                                                                                                \
  void shmem_ctx_##N##_atomic_set(shmem_ctx_t ctx, T* dest, T value, int pe) {                    \
    Atomic<T>(HPS_AMO_CALL(set, N), dest, AtomicOp::kSet, value, Zero<T>(),                             \
              ContextPe(HPS_AMO_CALL(set, N), Ctx(ctx), pe));                                     \
  }                                                                                                \
  void shmem_##N##_atomic_set(T* dest, T value, int pe) {                                         \
    shmem_ctx_##N##_atomic_set(SHMEM_CTX_DEFAULT, dest, value, pe);                               \
  }                                                                                                \
  T shmem_ctx_##N##_atomic_swap(shmem_ctx_t ctx, T* dest, T value, int pe) {                      \
    return Atomic<T>(HPS_AMO_CALL(swap, N), dest, AtomicOp::kSwap, value, Zero<T>(),                    \
                     ContextPe(HPS_AMO_CALL(swap, N), Ctx(ctx), pe));                             \
  }                                                                                                \
  T shmem_##N##_atomic_swap(T* dest, T value, int pe) {                                           \
    return shmem_ctx_##N##_atomic_swap(SHMEM_CTX_DEFAULT, dest, value, pe);                       \
  }                                                                                                \
  void shmem_ctx_##N##_atomic_fetch_nbi(shmem_ctx_t ctx, T* fetch, const T* source, int pe) {     \
    *fetch = shmem_ctx_##N##_atomic_fetch(ctx, source, pe);                                       \
  }                                                                                                \
  void shmem_##N##_atomic_fetch_nbi(T* fetch, const T* source, int pe) {                          \
    *fetch = shmem_ctx_##N##_atomic_fetch(SHMEM_CTX_DEFAULT, source, pe);                         \
  }                                                                                                \
  void shmem_ctx_##N##_atomic_swap_nbi(shmem_ctx_t ctx, T* fetch, T* dest, T value, int pe) {     \
    *fetch = shmem_ctx_##N##_atomic_swap(ctx, dest, value, pe);                                   \
  }                                                                                                \
  void shmem_##N##_atomic_swap_nbi(T* fetch, T* dest, T value, int pe) {                          \
    *fetch = shmem_ctx_##N##_atomic_swap(SHMEM_CTX_DEFAULT, dest, value, pe);                     \
  }
HPS_SHMEM_AMO_EXTENDED_TYPES(HPS_DEFINE_AMO_EXTENDED)

#define HPS_DEFINE_AMO_STANDARD(T, N)                                                              \
  T shmem_ctx_##N##_atomic_compare_swap(shmem_ctx_t ctx, T* dest, T cond, T value, int pe) {      \
    return Atomic<T>(HPS_AMO_CALL(compare_swap, N), dest, AtomicOp::kCompareSwap, value, cond,    \
                     ContextPe(HPS_AMO_CALL(compare_swap, N), Ctx(ctx), pe));                     \
  }                                                                                                \
  T shmem_##N##_atomic_compare_swap(T* dest, T cond, T value, int pe) {                           \
    return shmem_ctx_##N##_atomic_compare_swap(SHMEM_CTX_DEFAULT, dest, cond, value, pe);         \
  }                                                                                                \
  T shmem_ctx_##N##_atomic_fetch_add(shmem_ctx_t ctx, T* dest, T value, int pe) {                 \
    return Atomic<T>(HPS_AMO_CALL(fetch_add, N), dest, AtomicOp::kAdd, value, Zero<T>(),                \
                     ContextPe(HPS_AMO_CALL(fetch_add, N), Ctx(ctx), pe));                        \
  }                                                                                                \
  T shmem_##N##_atomic_fetch_add(T* dest, T value, int pe) {                                      \
    return shmem_ctx_##N##_atomic_fetch_add(SHMEM_CTX_DEFAULT, dest, value, pe);                  \
  }                                                                                                \
  void shmem_ctx_##N##_atomic_add(shmem_ctx_t ctx, T* dest, T value, int pe) {                    \
    shmem_ctx_##N##_atomic_fetch_add(ctx, dest, value, pe);                                       \
  }                                                                                                \
  void shmem_##N##_atomic_add(T* dest, T value, int pe) {                                         \
    shmem_ctx_##N##_atomic_fetch_add(SHMEM_CTX_DEFAULT, dest, value, pe);                         \
  }                                                                                                \
  T shmem_ctx_##N##_atomic_fetch_inc(shmem_ctx_t ctx, T* dest, int pe) {                          \
    return shmem_ctx_##N##_atomic_fetch_add(ctx, dest, One<T>(), pe);                                 \
  }                                                                                                \
  T shmem_##N##_atomic_fetch_inc(T* dest, int pe) {                                               \
    return shmem_ctx_##N##_atomic_fetch_add(SHMEM_CTX_DEFAULT, dest, One<T>(), pe);                   \
  }                                                                                                \
  void shmem_ctx_##N##_atomic_inc(shmem_ctx_t ctx, T* dest, int pe) {                             \
    shmem_ctx_##N##_atomic_fetch_add(ctx, dest, One<T>(), pe);                                        \
  }                                                                                                \
  void shmem_##N##_atomic_inc(T* dest, int pe) {                                                  \
    shmem_ctx_##N##_atomic_fetch_add(SHMEM_CTX_DEFAULT, dest, One<T>(), pe);                          \
  }                                                                                                \
  void shmem_ctx_##N##_atomic_compare_swap_nbi(shmem_ctx_t ctx, T* fetch, T* dest, T cond,        \
                                               T value, int pe) {                                  \
    *fetch = shmem_ctx_##N##_atomic_compare_swap(ctx, dest, cond, value, pe);                     \
  }                                                                                                \
  void shmem_##N##_atomic_compare_swap_nbi(T* fetch, T* dest, T cond, T value, int pe) {          \
    *fetch = shmem_ctx_##N##_atomic_compare_swap(SHMEM_CTX_DEFAULT, dest, cond, value, pe);       \
  }                                                                                                \
  void shmem_ctx_##N##_atomic_fetch_inc_nbi(shmem_ctx_t ctx, T* fetch, T* dest, int pe) {         \
    *fetch = shmem_ctx_##N##_atomic_fetch_add(ctx, dest, One<T>(), pe);                               \
  }                                                                                                \
  void shmem_##N##_atomic_fetch_inc_nbi(T* fetch, T* dest, int pe) {                              \
    *fetch = shmem_ctx_##N##_atomic_fetch_add(SHMEM_CTX_DEFAULT, dest, One<T>(), pe);                 \
  }                                                                                                \
  void shmem_ctx_##N##_atomic_fetch_add_nbi(shmem_ctx_t ctx, T* fetch, T* dest, T value,          \
                                            int pe) {                                              \
    *fetch = shmem_ctx_##N##_atomic_fetch_add(ctx, dest, value, pe);                              \
  }                                                                                                \
  void shmem_##N##_atomic_fetch_add_nbi(T* fetch, T* dest, T value, int pe) {                     \
    *fetch = shmem_ctx_##N##_atomic_fetch_add(SHMEM_CTX_DEFAULT, dest, value, pe);                \
  }
HPS_SHMEM_AMO_STANDARD_TYPES(HPS_DEFINE_AMO_STANDARD)

#define HPS_DEFINE_AMO_BITWISE_OP(T, N, OP, CODE)                                                  \
  T shmem_ctx_##N##_atomic_fetch_##OP(shmem_ctx_t ctx, T* dest, T value, int pe) {                \
    return Atomic<T>(HPS_AMO_CALL(fetch_##OP, N), dest, CODE, value, Zero<T>(),                         \
                     ContextPe(HPS_AMO_CALL(fetch_##OP, N), Ctx(ctx), pe));                       \
  }                                                                                                \
  T shmem_##N##_atomic_fetch_##OP(T* dest, T value, int pe) {                                     \
    return shmem_ctx_##N##_atomic_fetch_##OP(SHMEM_CTX_DEFAULT, dest, value, pe);                 \
  }                                                                                                \
  void shmem_ctx_##N##_atomic_##OP(shmem_ctx_t ctx, T* dest, T value, int pe) {                   \
    shmem_ctx_##N##_atomic_fetch_##OP(ctx, dest, value, pe);                                      \
  }                                                                                                \
  void shmem_##N##_atomic_##OP(T* dest, T value, int pe) {                                        \
    shmem_ctx_##N##_atomic_fetch_##OP(SHMEM_CTX_DEFAULT, dest, value, pe);                        \
  }                                                                                                \
  void shmem_ctx_##N##_atomic_fetch_##OP##_nbi(shmem_ctx_t ctx, T* fetch, T* dest, T value,       \
                                               int pe) {                                           \
    *fetch = shmem_ctx_##N##_atomic_fetch_##OP(ctx, dest, value, pe);                             \
  }                                                                                                \
  void shmem_##N##_atomic_fetch_##OP##_nbi(T* fetch, T* dest, T value, int pe) {                  \
    *fetch = shmem_ctx_##N##_atomic_fetch_##OP(SHMEM_CTX_DEFAULT, dest, value, pe);               \
  }
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

// ---- point-to-point synchronization ----------------------------------------------------------------
#define HPS_DEFINE_SYNC(T, N)                                                                      \
  void shmem_##N##_wait_until(T* ivar, int cmp, T cmp_value) {                                    \
    WaitOne("shmem_" #N "_wait_until", ivar, cmp, cmp_value);                                     \
  }                                                                                                \
  size_t shmem_##N##_wait_until_all(T* ivars, size_t nelems, const int* status, int cmp,          \
                                    T cmp_value) {                                                 \
    WaitAll("shmem_" #N "_wait_until_all", ivars, nelems, status, cmp, Targets<T>{cmp_value});    \
    return 0;                                                                                      \
  }                                                                                                \
  size_t shmem_##N##_wait_until_any(T* ivars, size_t nelems, const int* status, int cmp,          \
                                    T cmp_value) {                                                 \
    return WaitAny("shmem_" #N "_wait_until_any", ivars, nelems, status, cmp,                     \
                   Targets<T>{cmp_value});                                                         \
  }                                                                                                \
  size_t shmem_##N##_wait_until_some(T* ivars, size_t nelems, size_t* indices,                    \
                                     const int* status, int cmp, T cmp_value) {                    \
    return WaitSome("shmem_" #N "_wait_until_some", ivars, nelems, indices, status, cmp,          \
                    Targets<T>{cmp_value});                                                        \
  }                                                                                                \
  void shmem_##N##_wait_until_all_vector(T* ivars, size_t nelems, const int* status, int cmp,     \
                                         T* cmp_values) {                                          \
    WaitAll("shmem_" #N "_wait_until_all_vector", ivars, nelems, status, cmp,                     \
            Targets<T>{Zero<T>(), cmp_values});                                                          \
  }                                                                                                \
  size_t shmem_##N##_wait_until_any_vector(T* ivars, size_t nelems, const int* status, int cmp,   \
                                           T* cmp_values) {                                        \
    return WaitAny("shmem_" #N "_wait_until_any_vector", ivars, nelems, status, cmp,              \
                   Targets<T>{Zero<T>(), cmp_values});                                                   \
  }                                                                                                \
  size_t shmem_##N##_wait_until_some_vector(T* ivars, size_t nelems, size_t* indices,             \
                                            const int* status, int cmp, T* cmp_values) {           \
    return WaitSome("shmem_" #N "_wait_until_some_vector", ivars, nelems, indices, status, cmp,   \
                    Targets<T>{Zero<T>(), cmp_values});                                                  \
  }                                                                                                \
  int shmem_##N##_test(T* ivar, int cmp, T cmp_value) {                                           \
    Ready("shmem_" #N "_test");                                                                   \
    CheckComparison("shmem_" #N "_test", cmp);                                                    \
    CheckIvar("shmem_" #N "_test", ivar, 1);                                                      \
    return Compare(Load(ivar), cmp, cmp_value) ? 1 : 0;                                           \
  }                                                                                                \
  int shmem_##N##_test_all(T* ivars, size_t nelems, const int* status, int cmp, T cmp_value) {    \
    CheckComparison("shmem_" #N "_test_all", cmp);                                                \
    return TestAll(ivars, nelems, status, cmp, Targets<T>{cmp_value}) ? 1 : 0;                    \
  }                                                                                                \
  size_t shmem_##N##_test_any(T* ivars, size_t nelems, const int* status, int cmp,                \
                              T cmp_value) {                                                       \
    CheckComparison("shmem_" #N "_test_any", cmp);                                                \
    return TestAny(ivars, nelems, status, cmp, Targets<T>{cmp_value});                            \
  }                                                                                                \
  size_t shmem_##N##_test_some(T* ivars, size_t nelems, size_t* indices, const int* status,       \
                               int cmp, T cmp_value) {                                             \
    CheckComparison("shmem_" #N "_test_some", cmp);                                               \
    return TestSome(ivars, nelems, indices, status, cmp, Targets<T>{cmp_value});                  \
  }                                                                                                \
  int shmem_##N##_test_all_vector(T* ivars, size_t nelems, const int* status, int cmp,            \
                                  T* cmp_values) {                                                 \
    CheckComparison("shmem_" #N "_test_all_vector", cmp);                                         \
    return TestAll(ivars, nelems, status, cmp, Targets<T>{Zero<T>(), cmp_values}) ? 1 : 0;              \
  }                                                                                                \
  size_t shmem_##N##_test_any_vector(T* ivars, size_t nelems, const int* status, int cmp,         \
                                     T* cmp_values) {                                              \
    CheckComparison("shmem_" #N "_test_any_vector", cmp);                                         \
    return TestAny(ivars, nelems, status, cmp, Targets<T>{Zero<T>(), cmp_values});                      \
  }                                                                                                \
  size_t shmem_##N##_test_some_vector(T* ivars, size_t nelems, size_t* indices,                   \
                                      const int* status, int cmp, T* cmp_values) {                 \
    CheckComparison("shmem_" #N "_test_some_vector", cmp);                                        \
    return TestSome(ivars, nelems, indices, status, cmp, Targets<T>{Zero<T>(), cmp_values});            \
  }
HPS_SHMEM_SYNC_TYPES(HPS_DEFINE_SYNC)
#define HPS_DEFINE_OLD_WAIT(T, N) \
  void shmem_##N##_wait(T* ivar, T cmp_value) { WaitOne("shmem_" #N "_wait", ivar, SHMEM_CMP_NE, cmp_value); }
HPS_SHMEM_OLD_WAIT_TYPES(HPS_DEFINE_OLD_WAIT)

// ---- ordering -----------------------------------------------------------------------------------------
// The direct path's copies are plain stores: a full fence orders them (a no-op instruction on
// x86, a barrier elsewhere) before the Runtime orders its own.
void shmem_fence(void) {
  Runtime& runtime = Ready("shmem_fence");
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!RuntimeRmaPending()) return;
  if (Status s = runtime.Fence(kDefaultStream); !s.ok()) Fail("shmem_fence", s);
}
// SHMEM_CTX_INVALID: fence and quiet do nothing (OpenSHMEM 1.5).
void shmem_ctx_fence(shmem_ctx_t ctx) {
  if (ctx == SHMEM_CTX_INVALID) return;
  ContextPe("shmem_ctx_fence", Ctx(ctx), 0);
  shmem_fence();
}
void shmem_quiet(void) { Quiet("shmem_quiet"); }
void shmem_ctx_quiet(shmem_ctx_t ctx) {
  if (ctx == SHMEM_CTX_INVALID) return;
  ContextPe("shmem_ctx_quiet", Ctx(ctx), 0);
  Quiet("shmem_ctx_quiet");
}

// ---- locks ----------------------------------------------------------------------------------------------
void shmem_set_lock(long* lock) {
  const long me = shmem_my_pe() + 1;
  WaitUntil("shmem_set_lock", [&] {
    return Atomic<long>("shmem_set_lock", lock, AtomicOp::kCompareSwap, me, 0L, kLockHome) == 0;
  });
}
void shmem_clear_lock(long* lock) {
  Quiet("shmem_clear_lock");  // what the holder wrote lands before the next holder enters
  Atomic<long>("shmem_clear_lock", lock, AtomicOp::kSet, 0L, 0L, kLockHome);
}
int shmem_test_lock(long* lock) {
  const long me = shmem_my_pe() + 1;
  return Atomic<long>("shmem_test_lock", lock, AtomicOp::kCompareSwap, me, 0L, kLockHome) == 0 ? 0 : 1;
}

// ---- cache management: the heap is coherent, so these do nothing --------------------------------------
void shmem_clear_cache_inv(void) {}
void shmem_set_cache_inv(void) {}
void shmem_clear_cache_line_inv(void* dest) { (void)dest; }
void shmem_set_cache_line_inv(void* dest) { (void)dest; }
void shmem_udcflush(void) {}
void shmem_udcflush_line(void* dest) { (void)dest; }

}  // extern "C"
