#include "backends/collective.h"

#include <algorithm>
#include <cstring>

namespace hyper_parallel::shmem {
namespace {

using data_plane::kAgreeAlignment;
using data_plane::kAgreeArguments;
using data_plane::kAgreeBytes;
using data_plane::kAgreeDtype;
using data_plane::kAgreeLocal;
using data_plane::kAgreeOffset;

void StoreName(std::array<char, 16>* field, std::string_view name) {
  field->fill('\0');
  if (name.empty()) return;  // a default string_view's data() may be null
  std::memcpy(field->data(), name.data(), std::min(name.size(), field->size() - 1));
}

std::string_view NameOf(const std::array<char, 16>& field) {
  return std::string_view(field.data(), ::strnlen(field.data(), field.size()));
}

// The first compared field in which `a` and `b` differ, or null. The fields compared are the
// ones `a` (PE 0's call) declares.
const char* FirstDifference(const CollectiveDescriptor& a, const CollectiveDescriptor& b) {
  if (a.kind != b.kind) return "kind";
  if (a.sequence != b.sequence) return "sequence";
  if (a.fields != b.fields) return "fields";
  if ((a.fields & kAgreeBytes) && a.bytes != b.bytes) return "bytes";
  if ((a.fields & kAgreeAlignment) && a.alignment != b.alignment) return "alignment";
  if ((a.fields & kAgreeDtype) && a.dtype != b.dtype) return "dtype";
  if ((a.fields & kAgreeOffset) && a.offset != b.offset) return "offset";
  if ((a.fields & kAgreeLocal) && a.local != b.local) return "local_outcome";
  if ((a.fields & kAgreeArguments) && a.extra != b.extra) return "arguments";
  return nullptr;
}

}  // namespace

CollectiveDescriptor CollectiveDescriptor::Of(std::string_view kind, unsigned fields) {
  CollectiveDescriptor d;
  StoreName(&d.kind, kind);
  d.fields = fields;
  return d;
}

std::string_view CollectiveDescriptor::kind_name() const { return NameOf(kind); }

void CollectiveDescriptor::SetDtype(std::string_view name) { StoreName(&dtype, name); }

std::string_view CollectiveDescriptor::dtype_name() const { return NameOf(dtype); }

bool CollectiveDescriptor::DecidedByCoreWords() const {
  return (fields & (kAgreeAlignment | kAgreeArguments)) == 0;
}

std::array<std::uint64_t, CollectiveDescriptor::kWords> CollectiveDescriptor::Pack() const {
  std::array<std::uint64_t, kWords> words{};
  words[0] = sequence;
  words[1] = static_cast<std::uint64_t>(fields & 0xff) | (static_cast<std::uint64_t>(local) << 8);
  std::memcpy(&words[2], kind.data(), kind.size());
  words[4] = bytes;
  words[5] = offset;
  std::memcpy(&words[6], dtype.data(), dtype.size());
  words[8] = alignment;
  for (std::size_t i = 0; i < extra.size(); ++i) words[9 + i] = extra[i];
  return words;
}

CollectiveDescriptor CollectiveDescriptor::Unpack(const std::array<std::uint64_t, kWords>& words) {
  CollectiveDescriptor d;
  d.sequence = words[0];
  d.fields = static_cast<unsigned>(words[1] & 0xff);
  d.local = static_cast<ErrorCode>((words[1] >> 8) & 0xff);
  std::memcpy(d.kind.data(), &words[2], d.kind.size());
  d.kind.back() = '\0';
  d.bytes = words[4];
  d.offset = words[5];
  std::memcpy(d.dtype.data(), &words[6], d.dtype.size());
  d.dtype.back() = '\0';
  d.alignment = words[8];
  for (std::size_t i = 0; i < d.extra.size(); ++i) d.extra[i] = words[9 + i];
  return d;
}

std::string CollectiveDescriptor::Describe() const {
  std::string text(kind[0] == '\0' ? std::string_view("none") : kind_name());
  text += " #" + std::to_string(sequence);
  if (fields & kAgreeBytes) text += " bytes=" + std::to_string(bytes);
  if (fields & kAgreeAlignment) text += " alignment=" + std::to_string(alignment);
  if ((fields & kAgreeDtype) && dtype[0] != '\0') text += " dtype=" + std::string(dtype_name());
  if (fields & kAgreeOffset) {
    text += " offset=" + (offset == kNoOffset ? std::string("-") : Hex(offset));
  }
  if (fields & kAgreeArguments) {
    text += " arguments=[";
    for (std::size_t i = 0; i < extra.size(); ++i) {
      if (i > 0) text += ",";
      text += std::to_string(static_cast<std::int64_t>(extra[i]));
    }
    text += "]";
  }
  if ((fields & kAgreeLocal) && local != ErrorCode::kOk) {
    text += " local=" + std::string(ErrorCodeName(local));
  }
  return text;
}

std::string GroupLabel(const data_plane::CollectiveGroup& group) {
  if (group.sync_slot == 0) return "world";
  std::string pes = "[";
  for (int member = 0; member < group.size(); ++member) {
    if (member > 0) pes += ",";
    pes += std::to_string(group.pe(member));
  }
  return "team " + std::to_string(group.sync_slot) + " pes=" + pes + "]";
}

Status MatchDescriptors(const CollectiveDescriptor& mine,
                        const std::vector<CollectiveDescriptor>& all,
                        const data_plane::CollectiveGroup* group) {
  // Every member compares against member 0's call, so every member names the same field.
  const CollectiveDescriptor& reference = all.empty() ? mine : all.front();
  const char* field = FirstDifference(reference, mine);
  for (std::size_t member = 1; field == nullptr && member < all.size(); ++member) {
    field = FirstDifference(reference, all[member]);
  }
  if (field == nullptr) return Status::Ok();
  const bool team = group != nullptr && group->sync_slot != 0;
  std::string calls;
  for (std::size_t member = 0; member < all.size(); ++member) {
    if (member > 0) calls += "; ";
    const int index = static_cast<int>(member);
    const int pe = group != nullptr && index < group->size() ? group->pe(index) : index;
    calls += "pe " + std::to_string(pe);
    if (team) calls += " (team pe " + std::to_string(member) + ")";
    calls += ": " + all[member].Describe();
  }
  std::vector<Field> fields;
  if (team) fields.push_back({"team", GroupLabel(*group)});
  fields.push_back({"sequence", std::to_string(mine.sequence)});
  fields.push_back({"field", field});
  fields.push_back({"calls", calls});
  return Status::Assertion(ErrorCode::kCollectiveMismatch,
                           team ? "team collective calls differ across the team's PEs"
                                : "collective calls differ across PEs",
                           fields);
}

}  // namespace hyper_parallel::shmem
