// Runtime: symmetric allocation (runtime.h; docs/architecture.md, "The protection chain"):
// Allocate and Free, each a collective every PE agrees on before the heap changes, and the
// leaks a tensor's deleter reports, adopted at the next entry.
#include <cstring>

#include "base/log.h"
#include "runtime/runtime.h"

namespace hyper_parallel::shmem {

static_assert(HeapAllocator::kMaxAlignment == kHeapBaseAlignment,
              "an offset the allocator aligns must be an address aligned alike");

Status Runtime::Allocate(std::uint64_t bytes, std::uint64_t alignment, Allocation* out,
                         std::string_view note) {
  constexpr std::string_view kOp = "empty";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  AdoptOrphans();
  HPS_REJECT_IF_ERROR(WaitForOtherCollectives(World(), kOp), kOp, "state");
  // Every PE's heap has seen the same agreed allocations and frees, so the same request fails
  // alike on every PE. A request this PE cannot place (bad alignment, no room) still takes its
  // place, refused, so a PE that asked for something else fails too and the PEs stay in step
  // (docs/architecture.md, "A refused call keeps its place").
  HeapBlock block;
  if (Status placed = allocator_.Place(bytes, alignment, &block); !placed.ok()) {
    return RefuseInPlaceLocked(World(), kOp, std::move(placed), "allocate");
  }
  CollectiveDescriptor mine = CollectiveDescriptor::Of(
      "empty", data_plane::kAgreeBytes | data_plane::kAgreeAlignment | data_plane::kAgreeOffset |
                   data_plane::kAgreeLocal);
  HPS_REJECT_IF_ERROR(ClaimCollective(World(), OwnerOf({}, true), kOp, &mine.sequence), kOp, "state");
  // Only collectives change the allocator, and this PE has one in flight: the block is still
  // free when it is committed below.
  mine.bytes = bytes;
  mine.alignment = alignment;
  mine.offset = block.offset;
  HPS_REJECT_IF_ERROR(Agree(World(), kOp, mine), kOp, "agree");
  allocator_.Commit(block);

  const AllocationId id =
      registry_.Register(block.offset, bytes, block.reserved_bytes, alignment);
  *out = Allocation{id, registry_.lifecycle(), heap_base_ + block.offset, bytes, alignment};
  HPS_LOG_DEBUG("op=Empty id=" + std::to_string(id) + " base=" + Hex(out->data) +
                " bytes=" + std::to_string(bytes) + " alignment=" + std::to_string(alignment) +
                (note.empty() ? "" : " ") + std::string(note));
  return Status::Ok();
}

Status Runtime::Free(const SymmetricView& whole, std::string_view note) {
  constexpr std::string_view kOp = "free";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  AdoptOrphans();
  AllocationRecord record;
  std::uint64_t offset = 0;
  if (Status resolved = ResolveOperand(whole, &offset, &record, ErrorCode::kDoubleFree);
      !resolved.ok()) {
    // Refused in the call's place: the other PEs' free of this number fails too.
    return RefuseInPlaceLocked(World(), kOp, std::move(resolved), "validate");
  }
  // Queued work may still touch the allocation: drain before any PE can reuse it.
  HPS_REJECT_IF_ERROR(QuiesceOutside(), kOp, "quiesce");
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  HPS_REJECT_IF_ERROR(WaitForOtherCollectives(World(), kOp), kOp, "state");
  // Another thread may have freed it meanwhile.
  HPS_REJECT_IF_ERROR(ResolveOperand(whole, &offset, &record, ErrorCode::kDoubleFree), kOp,
                      "validate");
  CollectiveDescriptor mine =
      CollectiveDescriptor::Of("free", data_plane::kAgreeBytes | data_plane::kAgreeOffset);
  HPS_REJECT_IF_ERROR(ClaimCollective(World(), OwnerOf({}, true), kOp, &mine.sequence), kOp, "state");
  mine.bytes = record.bytes;
  mine.offset = record.offset;
  HPS_REJECT_IF_ERROR(Agree(World(), kOp, mine), kOp, "agree");
  // Poison: a stale alias (a numpy array, a DLPack capsule) reads NaN in every IEEE float
  // dtype (all bits set) and -1 in signed integers, not the data it had; no queued work of any
  // PE touches the allocation any more (each drained before agreeing).
  if (backend_->HostAddressableHeap() && record.bytes > 0) {
    std::memset(heap_base_ + record.offset, kPoisonByte, record.bytes);
  }
  HPS_REJECT_IF_ERROR(allocator_.Release(record.offset), kOp, "release");
  registry_.Release(record.id);
  HPS_LOG_DEBUG("op=Free id=" + std::to_string(record.id) + " base=" + Hex(whole.data) +
                " bytes=" + std::to_string(record.bytes) + (note.empty() ? "" : " ") +
                std::string(note));
  return Status::Ok();
}

Status Runtime::QuiesceOutside() {
  Backend* backend = backend_.get();
  CallScope call(this);
  mutex_.Unlock();
  Status drained = backend->Quiesce();
  mutex_.Lock();
  return drained;
}

Status Runtime::RefuseInPlaceLocked(TeamState& team, std::string_view operation, Status why,
                                    std::string_view phase) {
  why = RejectLocked(std::move(why), operation, phase);
  if (!WaitForOtherCollectives(team, operation).ok()) return why;
  CollectiveDescriptor mine = CollectiveDescriptor::Refusal(operation, why);
  if (!ClaimCollective(team, OwnerOf({}, true), operation, &mine.sequence).ok()) return why;
  // The peers' verdict is theirs to report (a lost peer still makes this Runtime Failed).
  (void)Agree(team, operation, mine);
  return why;
}

void Runtime::ReportOrphan(const OrphanReport& report) {
  if (report.lifecycle != heap_lifecycle_.load(std::memory_order_acquire)) {
    HPS_LOG_INFO("a tensor of a lifecycle whose heap is gone was released: id=" +
                 std::to_string(report.id) + ", lifecycle=" + std::to_string(report.lifecycle));
    return;
  }
  HPS_LOG_ERROR("symmetric allocation lost its last reference without free (leak): id=" +
                std::to_string(report.id) + ", base=" + Hex(report.base) +
                ", bytes=" + std::to_string(report.bytes) + ", rank=" +
                std::to_string(report.rank) + ", lifecycle=" + std::to_string(report.lifecycle));
  MutexLock lock(&orphan_mutex_);
  pending_orphans_.push_back(report);
}

void Runtime::Release(const OrphanReport& report) {
  if (report.lifecycle != heap_lifecycle_.load(std::memory_order_acquire)) return;  // heap gone
  HPS_LOG_DEBUG("op=Release id=" + std::to_string(report.id) + " base=" + Hex(report.base) +
                " bytes=" + std::to_string(report.bytes) + " (waits for the agreed reclaim)");
  OrphanReport released = report;
  released.released = true;
  MutexLock lock(&orphan_mutex_);
  pending_orphans_.push_back(released);
}

Status Runtime::ReclaimReleased(std::string_view operation,
                                std::vector<AllocationId>* reclaimed) {
  if (reclaimed != nullptr) reclaimed->clear();
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(operation), operation, "state");
  const std::shared_ptr<Bootstrap> bootstrap = bootstrap_;
  const auto timeout = config_.timeout();
  // As Free: this PE's queued and outstanding work completes before any PE reuses the memory.
  HPS_REJECT_IF_ERROR(QuiesceOutside(), operation, "quiesce");
  HPS_REJECT_IF_ERROR(CheckReady(operation), operation, "state");
  AdoptOrphans();
  std::vector<AllocationRecord> mine;
  for (const AllocationRecord& record : registry_.Leaked()) {
    if (record.released) mine.push_back(record);
  }
  std::string offer(mine.size() * sizeof(AllocationId), '\0');
  for (std::size_t i = 0; i < mine.size(); ++i) {
    std::memcpy(offer.data() + i * sizeof(AllocationId), &mine[i].id, sizeof(AllocationId));
  }
  std::vector<std::string> all;
  Status gathered;
  {
    CallScope call(this);
    lock.Unlock();
    gathered = bootstrap->AllGather(offer, timeout, &all);
    lock.Lock();
  }
  HPS_REJECT_IF_ERROR(gathered, operation, "exchange");
  HPS_REJECT_IF_ERROR(CheckReady(operation), operation, "state");
  // Released everywhere: in every PE's offer (ids agree across PEs: allocations are collective).
  std::vector<AllocationRecord> common;
  for (const AllocationRecord& record : mine) {
    bool everywhere = true;
    for (const std::string& theirs : all) {
      bool found = false;
      for (std::size_t at = 0; at + sizeof(AllocationId) <= theirs.size() && !found;
           at += sizeof(AllocationId)) {
        AllocationId id = 0;
        std::memcpy(&id, theirs.data() + at, sizeof(AllocationId));
        found = id == record.id;
      }
      everywhere = everywhere && found;
    }
    if (everywhere) common.push_back(record);
  }
  std::string ids;
  for (const AllocationRecord& record : common) {
    if (backend_->HostAddressableHeap() && record.bytes > 0) {
      std::memset(heap_base_ + record.offset, kPoisonByte, record.bytes);  // as Free poisons
    }
    HPS_REJECT_IF_ERROR(allocator_.Release(record.offset), operation, "release");
    registry_.Release(record.id);
    if (reclaimed != nullptr) reclaimed->push_back(record.id);
    ids += (ids.empty() ? "" : ",") + std::to_string(record.id);
  }
  if (!common.empty()) {
    HPS_LOG_DEBUG("op=Reclaim released allocations every PE released: ids=[" + ids + "]");
  }
  return Status::Ok();
}

void Runtime::AdoptOrphans() {
  std::vector<OrphanReport> pending;
  {
    MutexLock lock(&orphan_mutex_);
    pending.swap(pending_orphans_);
  }
  for (const OrphanReport& report : pending) {
    if (report.lifecycle == registry_.lifecycle()) {
      registry_.MarkLeaked(report.id, report.released);
    }
  }
}

}  // namespace hyper_parallel::shmem
