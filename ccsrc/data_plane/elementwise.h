// Element-wise steps a reduction's kernel asks of a stream backend (KernelApi::Elementwise):
// the element types and operators the reductions take, and one step over this PE's memory
// (widen elements to accumulators, narrow them back, or combine two runs of accumulators).
// The operators are one header (data_plane/reduce_op.h); the loops and the half conversions
// live where they run: on the CPU in ops/reduce/element.h (the host backend's kernels, the CUDA
// fake, CANN's steps through host memory) and as a CUDA kernel in backends/cuda/cuda_reduce.cu.
// Both follow docs/architecture.md, "Reductions" (half types accumulate in float32 and round
// once to nearest even; integers wrap; float min and max propagate NaN; the lower side's
// partial comes first).
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>

namespace hyper_parallel::shmem::data_plane {

/// A reduction's operator, as its number in a collective's arguments.
enum class ReduceOp : std::int64_t { kSum = 0, kProd, kMin, kMax, kAnd, kOr, kXor };

/// The element types a reduction takes (their torch names: ops/reduce/element.h).
enum class ElementType : std::int32_t {
  kFloat16, kBFloat16, kFloat32, kFloat64,
  kInt8, kUInt8, kInt16, kUInt16, kInt32, kUInt32, kInt64, kUInt64,
};

/// One element-wise step over memory this PE's stream addresses (its heap and the operands of
/// the call). Accumulators are float32 for the half types, else the element type itself.
struct ElementwiseStep {
  enum class Kind : std::uint8_t {
    kWiden,    ///< out = `count` elements at `lower`, as accumulators
    kNarrow,   ///< out = `count` accumulators at `lower`, as elements (halves round once)
    kCombine,  ///< out[i] = lower[i] op upper[i] over accumulators; out may be lower or upper
  };
  Kind kind = Kind::kCombine;
  ElementType type = ElementType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  const void* lower = nullptr;
  const void* upper = nullptr;  ///< kCombine only
  void* out = nullptr;
  std::uint64_t count = 0;
};

}  // namespace hyper_parallel::shmem::data_plane
