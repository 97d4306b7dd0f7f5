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
  EndLifecycle();
  peaks_ = RegistryPeaks{};
}

void AllocationRegistry::EndLifecycle() {
  slots_.clear();
  base_id_ = next_id_;
  live_count_ = 0;
  live_bytes_ = 0;
  // The next lifecycle's ids start after every id ever issued, so old ones stay stale.
  first_id_ = next_id_;
}

AllocationId AllocationRegistry::Register(std::uint64_t offset, std::uint64_t bytes,
                                          std::uint64_t reserved_bytes,
                                          std::uint64_t alignment) {
  const AllocationId id = next_id_++;
  if (slots_.empty()) base_id_ = id;
  slots_.push_back(Slot{AllocationRecord{id, lifecycle_, offset, bytes, reserved_bytes,
                                         alignment, false, false},
                        true});
  ++live_count_;
  live_bytes_ += bytes;
  peaks_.max_live_count = std::max<std::uint64_t>(peaks_.max_live_count, live_count_);
  peaks_.max_live_bytes = std::max(peaks_.max_live_bytes, live_bytes_);
  return id;
}

Status AllocationRegistry::Classify(AllocationId id, ErrorCode freed_code,
                                    const AllocationRecord** found) const {
  if (const Slot* slot = Find(id); slot != nullptr && id >= first_id_) [[likely]] {
    *found = &slot->record;
    return Status::Ok();
  }
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
  return Status::Assertion(freed_code, "allocation was already freed",
                           {{"allocation_id", std::to_string(id)},
                            {"lifecycle", std::to_string(lifecycle_)}});
}

Status AllocationRegistry::CheckId(AllocationId id, ErrorCode freed_code) const {
  const AllocationRecord* ignored = nullptr;
  return Classify(id, freed_code, &ignored);
}

Status AllocationRegistry::Resolve(AllocationId id, std::uint64_t offset, std::uint64_t bytes,
                                   AllocationRecord* out) const {
  const AllocationRecord* record = nullptr;
  HPS_RETURN_IF_ERROR(Classify(id, ErrorCode::kUseAfterFree, &record));
  if (record->released) [[unlikely]] {
    return Status::Assertion(ErrorCode::kUseAfterFree,
                             "allocation was released (its last torch tensor is gone) and "
                             "waits for the agreed reclaim",
                             {{"allocation_id", std::to_string(id)}});
  }
  const bool starts_inside = offset >= record->offset && offset - record->offset <= record->bytes;
  if (!starts_inside || bytes > record->bytes - (offset - record->offset)) [[unlikely]] {
    return Status::Contract(ErrorCode::kInvalidArgument, "operand byte range",
                            "inside allocation " + std::to_string(id) + " " +
                                Range(record->offset, record->bytes),
                            Range(offset, bytes));
  }
  *out = *record;
  return Status::Ok();
}

Status AllocationRegistry::ResolveWhole(AllocationId id, std::uint64_t offset,
                                        std::uint64_t bytes, AllocationRecord* out) const {
  const AllocationRecord* record = nullptr;
  HPS_RETURN_IF_ERROR(Classify(id, ErrorCode::kDoubleFree, &record));
  if (offset != record->offset || bytes != record->bytes) {
    return Status::Contract(ErrorCode::kInvalidArgument, "freed tensor",
                            "the whole allocation " + std::to_string(id) + " " +
                                Range(record->offset, record->bytes),
                            "a view " + Range(offset, bytes));
  }
  *out = *record;
  return Status::Ok();
}

void AllocationRegistry::Release(AllocationId id) {
  Slot* slot = Find(id);
  if (slot == nullptr) return;
  slot->live = false;
  --live_count_;
  live_bytes_ -= slot->record.bytes;
  while (!slots_.empty() && !slots_.front().live) {
    slots_.pop_front();
    ++base_id_;
  }
}

bool AllocationRegistry::MarkLeaked(AllocationId id, bool released) {
  Slot* slot = Find(id);
  if (slot == nullptr) return false;
  slot->record.leaked = true;
  slot->record.released = slot->record.released || released;
  return true;
}

std::vector<AllocationRecord> AllocationRegistry::Live() const {
  std::vector<AllocationRecord> records;
  records.reserve(live_count_);
  for (const Slot& slot : slots_) {
    if (slot.live) records.push_back(slot.record);
  }
  return records;
}

std::vector<AllocationRecord> AllocationRegistry::Leaked() const {
  std::vector<AllocationRecord> records;
  for (const Slot& slot : slots_) {
    if (slot.live && slot.record.leaked) records.push_back(slot.record);
  }
  return records;
}

}  // namespace hyper_parallel::shmem
