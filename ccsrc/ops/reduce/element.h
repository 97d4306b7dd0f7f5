// The arithmetic of the reductions (all_reduce, reduce_scatter): which element types and
// operators they take, and how partial results combine.
//
// Every reduction works on accumulators: float16 and bfloat16 elements widen to float32 when a
// pass loads them and round (to nearest, ties to even) once, where the owner of a block writes
// its result; float32, float64 and the integer types accumulate in their own type. Integer sums
// and products wrap (two's complement), as torch's do. min and max of floating-point values
// propagate NaN. Combine always takes the partial of the lower-numbered side first, so a block's
// result depends only on the group's size, never on timing (docs/architecture.md,
// "Reductions").
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "base/status.h"
#include "data_plane/elementwise.h"

namespace hyper_parallel::shmem::ops {

/// A reduction's operator, as its number in a collective's arguments (data_plane/elementwise.h,
/// where stream backends see it too).
using data_plane::ReduceOp;

/// "sum", "prod", "min", "max", "and", "or", "xor".
std::string_view ReduceOpName(ReduceOp op);
std::optional<ReduceOp> ReduceOpNamed(std::string_view name);
/// The operator numbered `code`, or nullopt.
std::optional<ReduceOp> ReduceOpOf(std::int64_t code);

/// The element types a reduction takes, by their torch names ("float32", "bfloat16", "int64",
/// ...).
using data_plane::ElementType;

std::optional<ElementType> ElementTypeNamed(std::string_view name);
std::string_view ElementTypeName(ElementType type);
std::uint64_t ElementBytes(ElementType type);
/// Bytes of one accumulator: 4 for the half types, else the element's own.
std::uint64_t AccumulatorBytes(ElementType type);
bool IsFloating(ElementType type);

/// INVALID_ARGUMENT naming the dtype or the op when `operation` cannot reduce `dtype` with
/// operator `code` (an unknown dtype, an unknown operator, bitwise operators on floats).
Status CheckReducible(std::string_view operation, std::string_view dtype, std::int64_t code);

/// Widens `count` elements at `source` into accumulators at `accumulators`.
void ToAccumulators(ElementType type, const void* source, void* accumulators,
                    std::uint64_t count);
/// Narrows `count` accumulators into elements (rounding half types to nearest even).
void FromAccumulators(ElementType type, const void* accumulators, void* destination,
                      std::uint64_t count);
/// out[i] = lower[i] op upper[i] over `count` accumulators; `out` may be `lower` or `upper`.
void Combine(ElementType type, ReduceOp op, const void* lower, const void* upper, void* out,
             std::uint64_t count);
/// One step of data_plane/elementwise.h on the CPU: ToAccumulators, FromAccumulators or Combine.
void RunElementwise(const data_plane::ElementwiseStep& step);

/// The half types' conversions (exposed for their tests).
float HalfToFloat(std::uint16_t bits);
std::uint16_t FloatToHalf(float value);
float BFloat16ToFloat(std::uint16_t bits);
std::uint16_t FloatToBFloat16(float value);

}  // namespace hyper_parallel::shmem::ops
