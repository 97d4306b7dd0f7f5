// The values the reduction tests reduce (every PE computes the reference of every element, and
// the results are exact in every dtype and order), shared by the host backend's tests
// (reductions_test.cc) and the device backends' (device_reduction_checks.h).
#pragma once

#include <algorithm>
#include <cstring>
#include <string>

#include "ops/reduce/element.h"
#include "testing/collectives.h"
#include "tests/multiprocess/pe_helpers.h"

namespace hyper_parallel::shmem::testing {

using ops::ElementType;
using ops::ReduceOp;

// The test value of element i at PE `pe` for operator `op`: small, so every result is exact in
// every dtype and every order (sums below 2^8, products powers of two and signs), and
// non-negative where the order or the bits matter (min, max, the bitwise operators).
inline std::int64_t Value(ReduceOp op, int pe, std::uint64_t i, int call) {
  const auto k = static_cast<std::int64_t>(i * 7 + static_cast<std::uint64_t>(pe) * 3 +
                                           static_cast<std::uint64_t>(call));
  switch (op) {
    case ReduceOp::kSum: return k % 9 - 4;
    case ReduceOp::kProd: return k % 3 == 0 ? 1 : (k % 3 == 1 ? 2 : -1);
    case ReduceOp::kMin:
    case ReduceOp::kMax: return (k * 37) % 101;
    default: return (k * 53 + pe * 29) % 128;
  }
}

// The reference: the values combined in int64 (exact for these values; wrapping by the cast).
inline std::int64_t Reference(ReduceOp op, int size, std::uint64_t i, int call) {
  std::int64_t r = Value(op, 0, i, call);
  for (int pe = 1; pe < size; ++pe) {
    const std::int64_t v = Value(op, pe, i, call);
    switch (op) {
      case ReduceOp::kSum: r += v; break;
      case ReduceOp::kProd: r *= v; break;
      case ReduceOp::kMin: r = std::min(r, v); break;
      case ReduceOp::kMax: r = std::max(r, v); break;
      case ReduceOp::kAnd: r &= v; break;
      case ReduceOp::kOr: r |= v; break;
      case ReduceOp::kXor: r ^= v; break;
    }
  }
  return r;
}

// `value` as an element of `type`, in `out` (ElementBytes(type) bytes).
inline void Encode(ElementType type, std::int64_t value, std::byte* out) {
  const auto put = [out](auto v) { std::memcpy(out, &v, sizeof(v)); };
  switch (type) {
    case ElementType::kFloat16: return put(ops::FloatToHalf(static_cast<float>(value)));
    case ElementType::kBFloat16: return put(ops::FloatToBFloat16(static_cast<float>(value)));
    case ElementType::kFloat32: return put(static_cast<float>(value));
    case ElementType::kFloat64: return put(static_cast<double>(value));
    case ElementType::kInt8: return put(static_cast<std::int8_t>(value));
    case ElementType::kUInt8: return put(static_cast<std::uint8_t>(value));
    case ElementType::kInt16: return put(static_cast<std::int16_t>(value));
    case ElementType::kUInt16: return put(static_cast<std::uint16_t>(value));
    case ElementType::kInt32: return put(static_cast<std::int32_t>(value));
    case ElementType::kUInt32: return put(static_cast<std::uint32_t>(value));
    case ElementType::kInt64: return put(value);
    case ElementType::kUInt64: return put(static_cast<std::uint64_t>(value));
  }
}

inline constexpr ElementType kTypes[] = {
    ElementType::kFloat16, ElementType::kBFloat16, ElementType::kFloat32, ElementType::kFloat64,
    ElementType::kInt8,    ElementType::kUInt8,    ElementType::kInt16,   ElementType::kUInt16,
    ElementType::kInt32,   ElementType::kUInt32,   ElementType::kInt64,   ElementType::kUInt64};
inline constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAnd, ReduceOp::kOr,   ReduceOp::kXor};

inline std::int64_t Code(ReduceOp op) { return static_cast<std::int64_t>(op); }

// Fills `input` with this PE's values: element i is Value(op, rank, first + i).
inline void FillValues(PeContext& ctx, ElementType type, ReduceOp op, std::uint64_t first,
                std::uint64_t count, int call, std::byte* input) {
  const std::uint64_t eb = ops::ElementBytes(type);
  for (std::uint64_t i = 0; i < count; ++i) Encode(type, Value(op, ctx.rank, first + i, call), input + i * eb);
}

// Whether `count` elements at `output` are the references of elements first.. (bitwise).
inline bool CheckReduced(PeContext& ctx, ElementType type, ReduceOp op, std::uint64_t first,
                  std::uint64_t count, int call, const std::byte* output, const std::string& what) {
  const std::uint64_t eb = ops::ElementBytes(type);
  std::byte expected[8];
  for (std::uint64_t i = 0; i < count; ++i) {
    Encode(type, Reference(op, ctx.size, first + i, call), expected);
    if (std::memcmp(expected, output + i * eb, eb) != 0) {
      return CHECK_PE(ctx, false,
                      what + " " + std::string(ops::ElementTypeName(type)) + " " +
                          std::string(ops::ReduceOpName(op)) + ": element " +
                          std::to_string(first + i) + " of " + std::to_string(count) + " wrong");
    }
  }
  return true;
}

/// all_reduce, then reduce_scatter, of 37 elements (no multiple of the group sizes tested) of
/// every dtype with every operator it takes, each result read back through the Runtime's get
/// (so on any heap) and checked bitwise. False after the first wrong result.
inline bool CheckEveryDtypeAndOperator(PeContext& ctx) {
  constexpr std::uint64_t kCount = 37;
  const auto n = static_cast<std::uint64_t>(ctx.size);
  Allocation output = MustAllocate(ctx, kCount * 8 * n);
  std::vector<std::byte> input(kCount * 8 * n);
  int call = 0;
  for (ElementType type : kTypes) {
    const std::string dtype(ops::ElementTypeName(type));
    const std::uint64_t eb = ops::ElementBytes(type);
    for (ReduceOp op : kOps) {
      if (ops::IsFloating(type) && op >= ReduceOp::kAnd) continue;
      ++call;
      FillValues(ctx, type, op, 0, kCount, call, input.data());
      CHECK_PE_OK(ctx, AllReduce(Rt(), Sub(output, 0, kCount * eb), input.data(), kCount * eb,
                                 Code(op), dtype, {}));
      std::vector<std::byte> got = ReadBack<std::byte>(ctx, output);
      if (!CheckReduced(ctx, type, op, 0, kCount, call, got.data(), "all_reduce")) return false;
      // reduce_scatter: PE j gets block j of kCount elements.
      FillValues(ctx, type, op, 0, kCount * n, call, input.data());
      CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // everyone read back before the output is reused
      CHECK_PE_OK(ctx, ReduceScatter(Rt(), Sub(output, 0, kCount * eb), input.data(),
                                     kCount * eb * n, Code(op), dtype, {}));
      got = ReadBack<std::byte>(ctx, output);
      if (!CheckReduced(ctx, type, op, kCount * ctx.rank, kCount, call, got.data(),
                        "reduce_scatter")) {
        return false;
      }
      CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    }
  }
  return true;
}

}  // namespace hyper_parallel::shmem::testing
