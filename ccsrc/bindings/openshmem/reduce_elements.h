// How the OpenSHMEM C library's reductions treat their elements (docs/openshmem.md, "How it
// works"): the Runtime's element type for a C type, where it has one, and a op b exactly as the
// Runtime's reduction unit computes it, for the reductions combined here (small calls, long
// double and the complex types), so every path gives the same bits.
#pragma once

#include <complex>
#include <optional>
#include <string_view>
#include <type_traits>

#include "ops/reduce/element.h"

namespace hyper_parallel::shmem::openshmem {

template <class T>
struct IsComplex : std::false_type {};
template <class T>
struct IsComplex<std::complex<T>> : std::true_type {};

// The Runtime's element type for T, or none (long double and the complex types reduce here).
template <class T>
std::optional<std::string_view> DtypeOf() {
  if constexpr (std::is_same_v<T, float>) return "float32";
  if constexpr (std::is_same_v<T, double>) return "float64";
  if constexpr (std::is_integral_v<T>) {
    constexpr bool is_signed = std::is_signed_v<T>;
    switch (sizeof(T)) {
      case 1: return is_signed ? "int8" : "uint8";
      case 2: return is_signed ? "int16" : "uint16";
      case 4: return is_signed ? "int32" : "uint32";
      case 8: return is_signed ? "int64" : "uint64";
      default: break;
    }
  }
  return std::nullopt;
}

// a op b, as the Runtime's unit computes it: integers wrap, float min and max propagate NaN.
template <class T>
T Combine(ops::ReduceOp op, T a, T b) {
  if constexpr (IsComplex<T>::value) {
    return op == ops::ReduceOp::kProd ? a * b : a + b;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    const auto ua = static_cast<U>(a), ub = static_cast<U>(b);
    switch (op) {
      case ops::ReduceOp::kSum: return static_cast<T>(static_cast<U>(ua + ub));
      case ops::ReduceOp::kProd: return static_cast<T>(static_cast<U>(ua * ub));
      case ops::ReduceOp::kMin: return b < a ? b : a;
      case ops::ReduceOp::kMax: return b > a ? b : a;
      case ops::ReduceOp::kAnd: return static_cast<T>(ua & ub);
      case ops::ReduceOp::kOr: return static_cast<T>(ua | ub);
      case ops::ReduceOp::kXor: return static_cast<T>(ua ^ ub);
    }
    return a;
  } else {
    switch (op) {
      case ops::ReduceOp::kSum: return a + b;
      case ops::ReduceOp::kProd: return a * b;
      case ops::ReduceOp::kMin: return a != a ? a : b != b ? b : (b < a ? b : a);
      case ops::ReduceOp::kMax: return a != a ? a : b != b ? b : (b > a ? b : a);
      default: return a;  // no bitwise operators on floats (the routines do not exist)
    }
  }
}

}  // namespace hyper_parallel::shmem::openshmem
