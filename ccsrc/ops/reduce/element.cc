#include "ops/reduce/element.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "data_plane/reduce_op.h"

namespace hyper_parallel::shmem::ops {
namespace {

constexpr std::array<std::string_view, 7> kOpNames = {"sum", "prod", "min", "max",
                                                       "and", "or",   "xor"};

struct TypeEntry {
  ElementType type;
  std::string_view name;
  std::uint64_t bytes;
};
constexpr std::array<TypeEntry, 12> kTypes = {{
    {ElementType::kFloat16, "float16", 2},  {ElementType::kBFloat16, "bfloat16", 2},
    {ElementType::kFloat32, "float32", 4},  {ElementType::kFloat64, "float64", 8},
    {ElementType::kInt8, "int8", 1},        {ElementType::kUInt8, "uint8", 1},
    {ElementType::kInt16, "int16", 2},      {ElementType::kUInt16, "uint16", 2},
    {ElementType::kInt32, "int32", 4},      {ElementType::kUInt32, "uint32", 4},
    {ElementType::kInt64, "int64", 8},      {ElementType::kUInt64, "uint64", 8},
}};

const TypeEntry& EntryOf(ElementType type) { return kTypes[static_cast<std::size_t>(type)]; }

template <typename T>
using Wide = data_plane::WrapType<T>;

template <typename T>
T Apply(ReduceOp op, T a, T b) {
  return data_plane::ApplyReduceOp(op, a, b);
}

// One operator over aligned arrays: a plain loop the compiler vectorises (out may be lower or
// upper itself, which an element-wise loop allows).
template <typename T, typename Fn>
void CombineAligned(const T* l, const T* u, T* o, std::uint64_t count, Fn fn) {
  for (std::uint64_t i = 0; i < count; ++i) o[i] = fn(l[i], u[i]);
}

template <typename T>
bool Aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % alignof(T) == 0;
}

template <typename T>
void CombineAs(ReduceOp op, const void* lower, const void* upper, void* out, std::uint64_t count) {
  if (Aligned<T>(lower) && Aligned<T>(upper) && Aligned<T>(out)) {
    const auto* l = static_cast<const T*>(lower);
    const auto* u = static_cast<const T*>(upper);
    auto* o = static_cast<T*>(out);
    switch (op) {  // the common operators inline; the rest through Apply
      case ReduceOp::kSum:
        if constexpr (std::is_floating_point_v<T>) {
          return CombineAligned(l, u, o, count, [](T a, T b) { return a + b; });
        } else {
          return CombineAligned(l, u, o, count, [](T a, T b) {
            return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b));
          });
        }
      default:
        return CombineAligned(l, u, o, count, [op](T a, T b) { return Apply<T>(op, a, b); });
    }
  }
  // Element by element through memcpy: unaligned buffers (out may still be lower or upper).
  const auto* l = static_cast<const std::byte*>(lower);
  const auto* u = static_cast<const std::byte*>(upper);
  auto* o = static_cast<std::byte*>(out);
  for (std::uint64_t i = 0; i < count; ++i) {
    T a;
    T b;
    std::memcpy(&a, l + i * sizeof(T), sizeof(T));
    std::memcpy(&b, u + i * sizeof(T), sizeof(T));
    const T r = Apply<T>(op, a, b);
    std::memcpy(o + i * sizeof(T), &r, sizeof(T));
  }
}

template <typename Fn>
void ConvertHalves(const void* from, void* to, std::uint64_t count, bool widen, Fn convert) {
  const auto* in = static_cast<const std::byte*>(from);
  auto* out = static_cast<std::byte*>(to);
  for (std::uint64_t i = 0; i < count; ++i) {
    if (widen) {
      std::uint16_t bits;
      std::memcpy(&bits, in + i * 2, 2);
      const float value = convert(bits);
      std::memcpy(out + i * 4, &value, 4);
    } else {
      float value;
      std::memcpy(&value, in + i * 4, 4);
      const auto bits = static_cast<std::uint16_t>(convert(value));
      std::memcpy(out + i * 2, &bits, 2);
    }
  }
}

}  // namespace

std::string_view ReduceOpName(ReduceOp op) { return kOpNames[static_cast<std::size_t>(op)]; }

std::optional<ReduceOp> ReduceOpNamed(std::string_view name) {
  for (std::size_t i = 0; i < kOpNames.size(); ++i) {
    if (kOpNames[i] == name) return static_cast<ReduceOp>(i);
  }
  return std::nullopt;
}

std::optional<ReduceOp> ReduceOpOf(std::int64_t code) {
  if (code < 0 || code >= static_cast<std::int64_t>(kOpNames.size())) return std::nullopt;
  return static_cast<ReduceOp>(code);
}

std::optional<ElementType> ElementTypeNamed(std::string_view name) {
  for (const TypeEntry& entry : kTypes) {
    if (entry.name == name) return entry.type;
  }
  return std::nullopt;
}

std::string_view ElementTypeName(ElementType type) { return EntryOf(type).name; }
std::uint64_t ElementBytes(ElementType type) { return EntryOf(type).bytes; }
std::uint64_t AccumulatorBytes(ElementType type) {
  return type == ElementType::kFloat16 || type == ElementType::kBFloat16 ? 4 : ElementBytes(type);
}
bool IsFloating(ElementType type) {
  return type == ElementType::kFloat16 || type == ElementType::kBFloat16 ||
         type == ElementType::kFloat32 || type == ElementType::kFloat64;
}

Status CheckReducible(std::string_view operation, std::string_view dtype, std::int64_t code) {
  const std::optional<ElementType> type = ElementTypeNamed(dtype);
  if (!type) {
    std::string names;
    for (const TypeEntry& entry : kTypes) names += (names.empty() ? "" : ", ") + std::string(entry.name);
    return Status::Contract(ErrorCode::kInvalidArgument, std::string(operation) + " dtype",
                            "one of " + names, dtype.empty() ? "none" : std::string(dtype));
  }
  const std::optional<ReduceOp> op = ReduceOpOf(code);
  if (!op) {
    return Status::Contract(ErrorCode::kInvalidArgument, std::string(operation) + " op",
                            "one of sum, prod, min, max, and, or, xor", std::to_string(code));
  }
  if (IsFloating(*type) && *op >= ReduceOp::kAnd) {
    return Status::Contract(ErrorCode::kInvalidArgument, std::string(operation) + " op",
                            "sum, prod, min or max for " + std::string(dtype) +
                                " (and, or, xor take integers)",
                            std::string(ReduceOpName(*op)));
  }
  return Status::Ok();
}

float HalfToFloat(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  const std::uint32_t out = exponent == 0x1f ? (sign | 0x7f800000u | (mantissa << 13))
                                             : (sign | ((exponent + 112) << 23) | (mantissa << 13));
  return std::bit_cast<float>(out);
}

std::uint16_t FloatToHalf(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {  // NaN: quiet, keeping the payload's top bits
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520
  if (magnitude < 0x38800000u) {  // below 2^-14: a half subnormal (or zero)
    if (magnitude <= 0x33000000u) return sign;  // at most 2^-25: ties to the even zero
    const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - (magnitude >> 23);
    std::uint32_t half = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1);
    const std::uint32_t midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1u) != 0)) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = (((magnitude >> 23) - 112) << 10) | ((magnitude >> 13) & 0x3ffu);
  const std::uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u) != 0)) ++half;  // may carry: still < inf
  return static_cast<std::uint16_t>(sign | half);
}

float BFloat16ToFloat(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t FloatToBFloat16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

void ToAccumulators(ElementType type, const void* source, void* accumulators,
                    std::uint64_t count) {
  switch (type) {
    case ElementType::kFloat16:
      ConvertHalves(source, accumulators, count, true, [](std::uint16_t b) { return HalfToFloat(b); });
      return;
    case ElementType::kBFloat16:
      ConvertHalves(source, accumulators, count, true,
                    [](std::uint16_t b) { return BFloat16ToFloat(b); });
      return;
    default:
      if (count > 0) std::memcpy(accumulators, source, count * ElementBytes(type));
  }
}

void FromAccumulators(ElementType type, const void* accumulators, void* destination,
                      std::uint64_t count) {
  switch (type) {
    case ElementType::kFloat16:
      ConvertHalves(accumulators, destination, count, false, [](float v) { return FloatToHalf(v); });
      return;
    case ElementType::kBFloat16:
      ConvertHalves(accumulators, destination, count, false,
                    [](float v) { return FloatToBFloat16(v); });
      return;
    default:
      if (count > 0 && destination != accumulators) {
        std::memmove(destination, accumulators, count * ElementBytes(type));
      }
  }
}

void Combine(ElementType type, ReduceOp op, const void* lower, const void* upper, void* out,
             std::uint64_t count) {
  switch (type) {
    case ElementType::kFloat16:
    case ElementType::kBFloat16:
    case ElementType::kFloat32: return CombineAs<float>(op, lower, upper, out, count);
    case ElementType::kFloat64: return CombineAs<double>(op, lower, upper, out, count);
    case ElementType::kInt8: return CombineAs<std::int8_t>(op, lower, upper, out, count);
    case ElementType::kUInt8: return CombineAs<std::uint8_t>(op, lower, upper, out, count);
    case ElementType::kInt16: return CombineAs<std::int16_t>(op, lower, upper, out, count);
    case ElementType::kUInt16: return CombineAs<std::uint16_t>(op, lower, upper, out, count);
    case ElementType::kInt32: return CombineAs<std::int32_t>(op, lower, upper, out, count);
    case ElementType::kUInt32: return CombineAs<std::uint32_t>(op, lower, upper, out, count);
    case ElementType::kInt64: return CombineAs<std::int64_t>(op, lower, upper, out, count);
    case ElementType::kUInt64: return CombineAs<std::uint64_t>(op, lower, upper, out, count);
  }
}

void RunElementwise(const data_plane::ElementwiseStep& step) {
  using Kind = data_plane::ElementwiseStep::Kind;
  switch (step.kind) {
    case Kind::kWiden: return ToAccumulators(step.type, step.lower, step.out, step.count);
    case Kind::kNarrow: return FromAccumulators(step.type, step.lower, step.out, step.count);
    case Kind::kCombine:
      return Combine(step.type, step.op, step.lower, step.upper, step.out, step.count);
  }
}

}  // namespace hyper_parallel::shmem::ops
