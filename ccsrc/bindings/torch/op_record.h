// The recent-operations record of this PE (debug_state()'s recent_ops): the last kCapacity
// primitives that completed, oldest first, each with the way it came in (a Python function
// or a torch custom op), so that a test or a user can see the order in which calls really ran,
// for instance that a compiled function ran its ops in program order. Both ways in record
// (primitives.cc, ops.cc). Thread-safety: Record and Recent may be called from any thread;
// one mutex guards the ring. Includes neither torch nor pybind11.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace hyper_parallel::shmem::binding {

/// How a call reached the primitive.
enum class CallPath : std::uint8_t { kFunction, kCustomOp };

struct OpRecordEntry {
  std::uint64_t sequence = 0;  ///< 1 for the process's first record, then one more each
  std::string_view op;         ///< a static name: "put", "barrier", ...
  int pe = -1;                 ///< the world PE of a one-sided op; -1 for waits, collectives
  CallPath path = CallPath::kFunction;
};

inline constexpr std::size_t kOpRecordCapacity = 64;

/// Notes that `op` (a string literal) completed.
void RecordOp(std::string_view op, int pe, CallPath path);

/// The last kOpRecordCapacity records, oldest first.
std::vector<OpRecordEntry> RecentOps();

}  // namespace hyper_parallel::shmem::binding
