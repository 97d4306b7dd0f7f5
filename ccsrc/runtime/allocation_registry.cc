#include "runtime/allocation_registry.h"

#include <algorithm>
#include <string>

namespace hyper_parallel::shmem {
namespace {

std::string Range(std::uint64_t offset, std::uint64_t bytes) {
  return "[" + Hex(offset) + ", " + Hex(offset + bytes) + ")";
}

}  // namespace

void AllocationRegistry::BeginLifecycle() {
  ++lifecycle_;
  first_id_ = next_id_;
  live_.clear();
  live_bytes_ = 0;
  peaks_ = RegistryPeaks{};
}

void AllocationRegistry::EndLifecycle() {
  live_.clear();
  live_bytes_ = 0;
  // The next lifecycle's ids start after every id ever issued, so old ones stay stale.
  first_id_ = next_id_;
}

AllocationId AllocationRegistry::Register(std::uint64_t offset, std::uint64_t bytes,
                                          std::uint64_t reserved_bytes,
                                          std::uint64_t alignment) {
  const AllocationId id = next_id_++;
  live_.emplace(id, AllocationRecord{id, lifecycle_, offset, bytes, reserved_bytes, alignment,
                                     false});
  live_bytes_ += bytes;
  peaks_.max_live_count = std::max<std::uint64_t>(peaks_.max_live_count, live_.size());
  peaks_.max_live_bytes = std::max(peaks_.max_live_bytes, live_bytes_);
  return id;
}

Status AllocationRegistry::Classify(
    AllocationId id, ErrorCode freed_code,
    std::map<AllocationId, AllocationRecord>::const_iterator* found) const {
  if (id == 0 || id >= next_id_) {
    return Status::Contract(ErrorCode::kInvalidArgument, "allocation id",
                            "an id this runtime issued (1 to " + std::to_string(next_id_ - 1) +
                                ")",
                            std::to_string(id));
  }
  if (id < first_id_) {
    return Status::Assertion(ErrorCode::kStaleLifecycle,
                             "allocation belongs to an earlier lifecycle",
                             {{"allocation_id", std::to_string(id)},
                              {"current_lifecycle", std::to_string(lifecycle_)},
                              {"first_id_of_current_lifecycle", std::to_string(first_id_)}});
  }
  auto it = live_.find(id);
  if (it == live_.end()) {
    return Status::Assertion(freed_code, "allocation was already freed",
                             {{"allocation_id", std::to_string(id)},
                              {"lifecycle", std::to_string(lifecycle_)}});
  }
  *found = it;
  return Status::Ok();
}

Status AllocationRegistry::CheckId(AllocationId id, ErrorCode freed_code) const {
  std::map<AllocationId, AllocationRecord>::const_iterator it;
  return Classify(id, freed_code, &it);
}

Status AllocationRegistry::Resolve(AllocationId id, std::uint64_t offset, std::uint64_t bytes,
                                   AllocationRecord* out) const {
  std::map<AllocationId, AllocationRecord>::const_iterator it;
  HPS_RETURN_IF_ERROR(Classify(id, ErrorCode::kUseAfterFree, &it));
  const AllocationRecord& record = it->second;
  const bool starts_inside = offset >= record.offset && offset - record.offset <= record.bytes;
  if (!starts_inside || bytes > record.bytes - (offset - record.offset)) {
    return Status::Contract(ErrorCode::kInvalidArgument, "operand byte range",
                            "inside allocation " + std::to_string(id) + " " +
                                Range(record.offset, record.bytes),
                            Range(offset, bytes));
  }
  *out = record;
  return Status::Ok();
}

Status AllocationRegistry::ResolveWhole(AllocationId id, std::uint64_t offset,
                                        std::uint64_t bytes, AllocationRecord* out) const {
  std::map<AllocationId, AllocationRecord>::const_iterator it;
  HPS_RETURN_IF_ERROR(Classify(id, ErrorCode::kDoubleFree, &it));
  const AllocationRecord& record = it->second;
  if (offset != record.offset || bytes != record.bytes) {
    return Status::Contract(ErrorCode::kInvalidArgument, "freed tensor",
                            "the whole allocation " + std::to_string(id) + " " +
                                Range(record.offset, record.bytes),
                            "a view " + Range(offset, bytes));
  }
  *out = record;
  return Status::Ok();
}

void AllocationRegistry::Release(AllocationId id) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  live_bytes_ -= it->second.bytes;
  live_.erase(it);
}

bool AllocationRegistry::MarkLeaked(AllocationId id) {
  auto it = live_.find(id);
  if (it == live_.end()) return false;
  it->second.leaked = true;
  return true;
}

std::vector<AllocationRecord> AllocationRegistry::Live() const {
  std::vector<AllocationRecord> records;
  records.reserve(live_.size());
  for (const auto& [id, record] : live_) records.push_back(record);
  return records;
}

std::vector<AllocationRecord> AllocationRegistry::Leaked() const {
  std::vector<AllocationRecord> records;
  for (const auto& [id, record] : live_) {
    if (record.leaked) records.push_back(record);
  }
  return records;
}

}  // namespace hyper_parallel::shmem
