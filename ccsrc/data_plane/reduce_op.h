// One reduction operator on two values, written once for the CPU (ops/reduce/element.cc) and
// the CUDA kernel (backends/cuda/cuda_reduce.cu, where nvcc compiles it for the device too):
// integer sums and products wrap, computed on the unsigned type at least as wide as int so that
// no promoted operand overflows a signed int; float min and max propagate NaN, the lower side's
// first (docs/architecture.md, "Reductions"). C++17, no library calls (a NaN is what differs
// from itself).
//
// Thread-safety: pure functions.
#pragma once

#include <type_traits>

#include "data_plane/elementwise.h"
#include "data_plane/device_qualifiers.h"

namespace hyper_parallel::shmem::data_plane {

/// The type integer arithmetic of T wraps on.
template <typename T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T>
HPS_HOST_DEVICE inline T ApplyReduceOp(ReduceOp op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case ReduceOp::kSum: return a + b;
      case ReduceOp::kProd: return a * b;
      case ReduceOp::kMin: return a != a ? a : b != b ? b : (b < a ? b : a);
      case ReduceOp::kMax: return a != a ? a : b != b ? b : (b > a ? b : a);
      default: return a;  // bitwise operators on floats are refused before any call
    }
  } else {
    const auto wa = static_cast<WrapType<T>>(a);
    const auto wb = static_cast<WrapType<T>>(b);
    switch (op) {
      case ReduceOp::kSum: return static_cast<T>(wa + wb);
      case ReduceOp::kProd: return static_cast<T>(wa * wb);
      case ReduceOp::kMin: return b < a ? b : a;
      case ReduceOp::kMax: return b > a ? b : a;
      case ReduceOp::kAnd: return static_cast<T>(a & b);
      case ReduceOp::kOr: return static_cast<T>(a | b);
      case ReduceOp::kXor: return static_cast<T>(a ^ b);
    }
    return a;
  }
}

}  // namespace hyper_parallel::shmem::data_plane
