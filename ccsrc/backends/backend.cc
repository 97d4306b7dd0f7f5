#include "backends/backend.h"

#include "data_plane/comparison.h"

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

std::string_view AtomicOpName(AtomicOp op) {
  switch (op) {
    case AtomicOp::kFetch: return "fetch";
    case AtomicOp::kSet: return "set";
    case AtomicOp::kSwap: return "swap";
    case AtomicOp::kCompareSwap: return "compare_swap";
    case AtomicOp::kAdd: return "add";
    case AtomicOp::kAnd: return "and";
    case AtomicOp::kOr: return "or";
    case AtomicOp::kXor: return "xor";
  }
  return "unknown";
}

std::string_view WaitSetName(WaitSet set) {
  return set == WaitSet::kAny ? "any" : set == WaitSet::kAll ? "all" : "some";
}

Status Backend::Unsupported(std::string_view operation) const {
  return Status::Assertion(ErrorCode::kUnsupportedCapability,
                           "the " + std::string(name()) + " backend has no " +
                               std::string(operation) + " yet (docs/atomics.md, \"Backends\")",
                           {{"backend", std::string(name())}});
}

Status Backend::Atomic(StreamRef, const AtomicRequest&, int, void*, KeepAlive) {
  return Unsupported("atomics");
}
Status Backend::Fence(StreamRef) { return Unsupported("fence"); }
Status Backend::Quiet(StreamRef) { return Unsupported("quiet"); }
Status Backend::PutNbi(StreamRef stream, std::uint64_t offset, const void* source,
                       std::uint64_t bytes, int pe, KeepAlive keep_alive) {
  return Put(stream, offset, source, bytes, pe, std::move(keep_alive));
}
Status Backend::GetNbi(StreamRef stream, void* destination, std::uint64_t offset,
                       std::uint64_t bytes, int pe, KeepAlive keep_alive) {
  return Get(stream, destination, offset, bytes, pe, std::move(keep_alive));
}
Status Backend::WaitSignals(StreamRef, const SignalSet&, std::uint8_t*, KeepAlive) {
  return Unsupported("waits on several signals");
}

bool Compare(std::int64_t observed, Comparison comparison, std::int64_t expected) {
  return data_plane::Satisfies(observed, comparison, expected);
}

}  // namespace hyper_parallel::shmem
