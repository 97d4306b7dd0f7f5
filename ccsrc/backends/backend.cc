#include "backends/backend.h"

namespace hyper_parallel::shmem {

std::string DeviceId::ToString() const {
  const char* prefix = type == DeviceType::kCpu ? "cpu" : type == DeviceType::kCuda ? "cuda" : "npu";
  return std::string(prefix) + ":" + std::to_string(index);
}

std::string_view SignalOpName(SignalOp op) { return op == SignalOp::kSet ? "set" : "add"; }

std::string_view ComparisonName(Comparison comparison) {
  switch (comparison) {
    case Comparison::kEq: return "eq";
    case Comparison::kNe: return "ne";
    case Comparison::kGt: return "gt";
    case Comparison::kGe: return "ge";
    case Comparison::kLt: return "lt";
    case Comparison::kLe: return "le";
  }
  return "unknown";
}

bool Compare(std::int64_t observed, Comparison comparison, std::int64_t expected) {
  switch (comparison) {
    case Comparison::kEq: return observed == expected;
    case Comparison::kNe: return observed != expected;
    case Comparison::kGt: return observed > expected;
    case Comparison::kGe: return observed >= expected;
    case Comparison::kLt: return observed < expected;
    case Comparison::kLe: return observed <= expected;
  }
  return false;
}

}  // namespace hyper_parallel::shmem
