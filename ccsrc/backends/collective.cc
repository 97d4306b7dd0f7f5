#include "backends/collective.h"

#include <algorithm>
#include <cstring>

namespace hyper_parallel::shmem {
namespace {

// The fields a kind compares, in the order a mismatch is reported.
enum Field : unsigned {
  kBytes = 1u << 0,
  kAlignment = 1u << 1,
  kOffset = 1u << 2,
  kDtype = 1u << 3,
  kLocal = 1u << 4,
};

unsigned ComparedFields(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kEmpty: return kBytes | kAlignment | kOffset | kLocal;
    case CollectiveKind::kFree: return kBytes | kOffset;
    case CollectiveKind::kAllGather: return kBytes | kDtype | kOffset;
    case CollectiveKind::kBarrier:
    case CollectiveKind::kClose:
    case CollectiveKind::kNone: return 0;
  }
  return 0;
}

// The first compared field in which `a` and `b` differ, or null.
const char* FirstDifference(const CollectiveDescriptor& a, const CollectiveDescriptor& b) {
  if (a.kind != b.kind) return "kind";
  if (a.sequence != b.sequence) return "sequence";
  const unsigned fields = ComparedFields(a.kind);
  if ((fields & kBytes) && a.bytes != b.bytes) return "bytes";
  if ((fields & kAlignment) && a.alignment != b.alignment) return "alignment";
  if ((fields & kDtype) && a.dtype != b.dtype) return "dtype";
  if ((fields & kOffset) && a.offset != b.offset) return "offset";
  if ((fields & kLocal) && a.local != b.local) return "local_outcome";
  return nullptr;
}

}  // namespace

std::string_view CollectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kNone: return "none";
    case CollectiveKind::kEmpty: return "empty";
    case CollectiveKind::kFree: return "free";
    case CollectiveKind::kBarrier: return "barrier";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kClose: return "close";
  }
  return "unknown";
}

void CollectiveDescriptor::SetDtype(std::string_view name) {
  dtype.fill('\0');
  if (name.empty()) return;  // a default string_view's data() may be null
  std::memcpy(dtype.data(), name.data(), std::min(name.size(), dtype.size() - 1));
}

std::string_view CollectiveDescriptor::dtype_name() const {
  return std::string_view(dtype.data(), ::strnlen(dtype.data(), dtype.size()));
}

std::array<std::uint64_t, CollectiveDescriptor::kWords> CollectiveDescriptor::Pack() const {
  std::array<std::uint64_t, kWords> words{};
  words[0] = sequence;
  words[1] = static_cast<std::uint64_t>(kind) | (static_cast<std::uint64_t>(local) << 8);
  words[2] = bytes;
  words[3] = alignment;
  words[4] = offset;
  std::memcpy(&words[5], dtype.data(), dtype.size());
  for (std::size_t i = 0; i < extra.size(); ++i) words[7 + i] = extra[i];
  return words;
}

CollectiveDescriptor CollectiveDescriptor::Unpack(const std::array<std::uint64_t, kWords>& words) {
  CollectiveDescriptor d;
  d.sequence = words[0];
  d.kind = static_cast<CollectiveKind>(words[1] & 0xff);
  d.local = static_cast<ErrorCode>((words[1] >> 8) & 0xff);
  d.bytes = words[2];
  d.alignment = words[3];
  d.offset = words[4];
  std::memcpy(d.dtype.data(), &words[5], d.dtype.size());
  for (std::size_t i = 0; i < d.extra.size(); ++i) d.extra[i] = words[7 + i];
  return d;
}

std::string CollectiveDescriptor::Describe() const {
  std::string text(CollectiveKindName(kind));
  text += " #" + std::to_string(sequence);
  const unsigned fields = ComparedFields(kind);
  if (fields & kBytes) text += " bytes=" + std::to_string(bytes);
  if (fields & kAlignment) text += " alignment=" + std::to_string(alignment);
  if ((fields & kDtype) && dtype[0] != '\0') text += " dtype=" + std::string(dtype_name());
  if (fields & kOffset) text += " offset=" + (offset == kNoOffset ? std::string("-") : Hex(offset));
  if ((fields & kLocal) && local != ErrorCode::kOk) {
    text += " local=" + std::string(ErrorCodeName(local));
  }
  return text;
}

Status MatchDescriptors(const CollectiveDescriptor& mine,
                        const std::vector<CollectiveDescriptor>& all) {
  // Every PE compares against PE 0's call, so every PE names the same field.
  const CollectiveDescriptor& reference = all.empty() ? mine : all.front();
  const char* field = FirstDifference(reference, mine);
  for (std::size_t pe = 1; field == nullptr && pe < all.size(); ++pe) {
    field = FirstDifference(reference, all[pe]);
  }
  if (field == nullptr) return Status::Ok();
  std::string calls;
  for (std::size_t pe = 0; pe < all.size(); ++pe) {
    if (pe > 0) calls += "; ";
    calls += "pe " + std::to_string(pe) + ": " + all[pe].Describe();
  }
  return Status::Assertion(ErrorCode::kCollectiveMismatch, "collective calls differ across PEs",
                           {{"sequence", std::to_string(mine.sequence)},
                            {"field", field},
                            {"calls", calls}});
}

}  // namespace hyper_parallel::shmem
