// The OpenSHMEM C library's reductions (docs/openshmem.md, "How it works"): shmem_<T>_<op>_reduce
// on teams, the deprecated shmem_<T>_<op>_to_all on active sets, and the complex types; the
// Runtime's all_reduce where it takes the type, else a gather combined in team-PE order.
#include <algorithm>
#include <complex>
#include <optional>
#include <string>
#include <vector>

#include "bindings/openshmem/collectives.h"
#include "bindings/openshmem/reduce_elements.h"
#include "ops/reduce/element.h"

namespace hyper_parallel::shmem::openshmem {
namespace {


// One shared scratch block for the reductions the Runtime's unit does not take: each pass
// gathers every member's slice into it and combines them in team-PE order (the same bits on
// every PE), then the team's barrier frees it for the next pass.
Mutex scratch_mutex;
constexpr std::uint64_t kScratchBytes = 64 * 1024;
void* scratch GUARDED_BY(scratch_mutex) = nullptr;

template <class T>
void GatherReduce(std::string_view call, const TeamEntry& team, ops::ReduceOp op, T* dest,
                  const T* source, std::size_t count) {
  MutexLock lock(&scratch_mutex);
  if (scratch == nullptr) {
    FailArgument(call, "team", "a team whose PEs all made the library's scratch", "none");
  }
  const std::size_t n = team.pes.size();
  const std::size_t chunk = std::max<std::size_t>(1, kScratchBytes / (n * sizeof(T)));
  std::vector<T> result(std::min(chunk, count));
  for (std::size_t start = 0; start < count; start += chunk) {
    const std::size_t length = std::min(chunk, count - start);
    Run(call, team, "all_gather",
        ByteOperands(call, scratch, n * length * sizeof(T), source + start, length * sizeof(T)));
    const T* all = static_cast<const T*>(scratch);
    for (std::size_t i = 0; i < length; ++i) {
      T acc = all[i];
      for (std::size_t p = 1; p < n; ++p) acc = Combine(op, acc, all[p * length + i]);
      result[i] = acc;
    }
    std::memcpy(dest + start, result.data(), length * sizeof(T));
    Barrier(call, team);
  }
}

}  // namespace

void MakeReduceScratch() {
  MutexLock lock(&scratch_mutex);
  scratch = Allocate("shmem_init", kScratchBytes, 64);
}
void DropReduceScratch() {
  MutexLock lock(&scratch_mutex);
  scratch = nullptr;
}

namespace {

template <class T>
int Reduce(std::string_view call, const TeamEntry& team, ops::ReduceOp op, T* dest,
           const T* source, std::size_t count) {
  RefusalScope refusal(team.handle);  // a failed check takes the call's place
  if (count == 0) return 0;
  const std::uint64_t bytes = Bytes(call, count, sizeof(T));
  if (Small(team, bytes)) {
    // Every member combines the members' slots in team-PE order: the same bits everywhere.
    Resolve(call, "dest", dest, bytes);
    SmallCall small(team);
    std::memcpy(small.Payload(), source, bytes);
    small.Exchange(call, {kSmallReduce, 0, bytes, sizeof(T) * 16 + static_cast<std::uint64_t>(op)}, true);
    T result[kSmallBytes / sizeof(T) + 1];
    std::memcpy(result, small.Of(0), bytes);
    for (std::size_t p = 1; p < team.pes.size(); ++p) {
      const std::byte* theirs = small.Of(static_cast<int>(p));
      for (std::size_t i = 0; i < count; ++i) {
        T value;
        std::memcpy(&value, theirs + i * sizeof(T), sizeof(T));
        result[i] = Combine(op, result[i], value);
      }
    }
    std::memcpy(dest, result, bytes);
    return 0;
  }
  if (const std::optional<std::string_view> dtype = DtypeOf<T>()) {
    CollectiveOperands operands;
    operands.output = Resolve(call, "dest", dest, bytes);
    operands.input = source;
    operands.input_bytes = bytes;
    operands.element_bytes = sizeof(T);
    operands.dtype = *dtype;
    operands.arguments[0] = static_cast<std::int64_t>(op);
    Run(call, team, "all_reduce", operands);
    return 0;
  }
  Resolve(call, "dest", dest, bytes);
  GatherReduce(call, team, op, dest, source, count);
  return 0;
}

}  // namespace
}  // namespace hyper_parallel::shmem::openshmem

using namespace hyper_parallel::shmem;
using namespace hyper_parallel::shmem::openshmem;

extern "C" {

#define HPS_DEFINE_REDUCE(T, N, OP, CODE)                                                         \
  int shmem_##N##_##OP##_reduce(shmem_team_t team, T* dest, const T* source, size_t nreduce) {    \
    if (team == SHMEM_TEAM_INVALID) return -1;                                                    \
    return Reduce<T>("shmem_" #N "_" #OP "_reduce", TeamArg("shmem_" #N "_" #OP "_reduce", team), \
                     CODE, dest, source, nreduce);                                                \
  }
#define HPS_DEFINE_REDUCE_BITWISE(T, N)                  \
  HPS_DEFINE_REDUCE(T, N, and, ops::ReduceOp::kAnd)      \
  HPS_DEFINE_REDUCE(T, N, or, ops::ReduceOp::kOr)        \
  HPS_DEFINE_REDUCE(T, N, xor, ops::ReduceOp::kXor)
#define HPS_DEFINE_REDUCE_ORDERED(T, N)                  \
  HPS_DEFINE_REDUCE(T, N, min, ops::ReduceOp::kMin)      \
  HPS_DEFINE_REDUCE(T, N, max, ops::ReduceOp::kMax)      \
  HPS_DEFINE_REDUCE(T, N, sum, ops::ReduceOp::kSum)      \
  HPS_DEFINE_REDUCE(T, N, prod, ops::ReduceOp::kProd)
HPS_SHMEM_REDUCE_BITWISE_TYPES(HPS_DEFINE_REDUCE_BITWISE)
HPS_SHMEM_REDUCE_ORDERED_TYPES(HPS_DEFINE_REDUCE_ORDERED)

#define HPS_DEFINE_TO_ALL(T, N, OP, CODE)                                                         \
  void shmem_##N##_##OP##_to_all(T* dest, const T* source, int nreduce, int PE_start,             \
                                 int logPE_stride, int PE_size, T* pWrk, long* pSync) {           \
    (void)pWrk, (void)pSync;                                                                      \
    constexpr const char* kCall = "shmem_" #N "_" #OP "_to_all";                                  \
    if (nreduce < 0) FailArgument(kCall, "nreduce", "not negative", std::to_string(nreduce));    \
    Reduce<T>(kCall, ActiveSet(kCall, PE_start, logPE_stride, PE_size), CODE, dest, source,       \
              static_cast<std::size_t>(nreduce));                                                 \
  }
#define HPS_DEFINE_TO_ALL_BITWISE(T, N)                 \
  HPS_DEFINE_TO_ALL(T, N, and, ops::ReduceOp::kAnd)     \
  HPS_DEFINE_TO_ALL(T, N, or, ops::ReduceOp::kOr)       \
  HPS_DEFINE_TO_ALL(T, N, xor, ops::ReduceOp::kXor)
#define HPS_DEFINE_TO_ALL_ORDERED(T, N)                 \
  HPS_DEFINE_TO_ALL(T, N, min, ops::ReduceOp::kMin)     \
  HPS_DEFINE_TO_ALL(T, N, max, ops::ReduceOp::kMax)     \
  HPS_DEFINE_TO_ALL(T, N, sum, ops::ReduceOp::kSum)     \
  HPS_DEFINE_TO_ALL(T, N, prod, ops::ReduceOp::kProd)
HPS_SHMEM_TO_ALL_BITWISE_TYPES(HPS_DEFINE_TO_ALL_BITWISE)
HPS_SHMEM_TO_ALL_ORDERED_TYPES(HPS_DEFINE_TO_ALL_ORDERED)

// The complex types: C's _Complex (a GCC extension in C++) in the signatures, std::complex
// (the same layout) in the arithmetic.
#define HPS_DEFINE_COMPLEX_REDUCE(CT, ST, N, OP, CODE)                                           \
  int shmem_##N##_##OP##_reduce(shmem_team_t team, CT* dest, const CT* source, size_t nreduce) {  \
    return Reduce<ST>("shmem_" #N "_" #OP "_reduce",                                              \
                      TeamArg("shmem_" #N "_" #OP "_reduce", team), CODE,                         \
                      reinterpret_cast<ST*>(dest), reinterpret_cast<const ST*>(source), nreduce); \
  }                                                                                               \
  void shmem_##N##_##OP##_to_all(CT* dest, const CT* source, int nreduce, int PE_start,           \
                                 int logPE_stride, int PE_size, CT* pWrk, long* pSync) {          \
    (void)pWrk, (void)pSync;                                                                      \
    Reduce<ST>("shmem_" #N "_" #OP "_to_all",                                                     \
               ActiveSet("shmem_" #N "_" #OP "_to_all", PE_start, logPE_stride, PE_size), CODE,   \
               reinterpret_cast<ST*>(dest), reinterpret_cast<const ST*>(source),                  \
               static_cast<std::size_t>(std::max(0, nreduce)));                                   \
  }
#define HPS_DEFINE_COMPLEX(CT, ST, N)                                                             \
  void shmem_##N##_put(CT* dest, const CT* source, size_t nelems, int pe) {                       \
    shmem_putmem(dest, source, Bytes("shmem_" #N, nelems, sizeof(CT)), pe);                       \
  }                                                                                               \
  void shmem_##N##_get(CT* dest, const CT* source, size_t nelems, int pe) {                       \
    shmem_getmem(dest, source, Bytes("shmem_" #N, nelems, sizeof(CT)), pe);                       \
  }                                                                                               \
  HPS_DEFINE_COMPLEX_REDUCE(CT, ST, N, sum, ops::ReduceOp::kSum)                                  \
  HPS_DEFINE_COMPLEX_REDUCE(CT, ST, N, prod, ops::ReduceOp::kProd)
HPS_DEFINE_COMPLEX(float _Complex, std::complex<float>, complexf)
HPS_DEFINE_COMPLEX(double _Complex, std::complex<double>, complexd)

}  // extern "C"
