// Fuzz harness for the symmetric-heap bookkeeping: a HeapAllocator and an AllocationRegistry
// driven together the way the Runtime drives them, checked after every operation against a
// reference model that knows only the documented contracts.
//
// The input is a heap size followed by operations, each an opcode byte and its operands; a
// short input reads as zeros. The model keeps the live blocks by offset and by id, the ids
// freed in this lifecycle and the ids of earlier lifecycles. From the live blocks alone it
// derives the free gaps, so it predicts where best fit (smallest gap, lowest offset on ties)
// must place a request and when OUT_OF_MEMORY is the only right answer.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "runtime/allocation_registry.h"
#include "base/config.h"
#include "runtime/heap_allocator.h"
#include "base/status.h"

namespace hyper_parallel::shmem {
namespace {

constexpr std::uint64_t kGranule = HeapAllocator::kGranule;
constexpr int kMaxOperations = 1024;
constexpr int kMaxFillAllocations = 256;

std::string Dec(std::uint64_t value) { return std::to_string(value); }

// Reads the fuzz input front to back; past the end every read is zero, so any input is valid.
class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool empty() const { return position_ >= size_; }
  std::uint8_t U8() { return empty() ? 0 : data_[position_++]; }
  std::uint64_t Bytes(int count) {
    std::uint64_t value = 0;
    for (int i = 0; i < count; ++i) value |= static_cast<std::uint64_t>(U8()) << (8 * i);
    return value;
  }
  std::uint16_t U16() { return static_cast<std::uint16_t>(Bytes(2)); }
  std::uint32_t U32() { return static_cast<std::uint32_t>(Bytes(4)); }
  std::uint64_t U64() { return Bytes(8); }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t position_ = 0;
};

struct Gap {
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

// The granule-rounded reservation of a request, computed wide so it cannot wrap.
unsigned __int128 Reservation(std::uint64_t bytes) {
  const unsigned __int128 wanted = std::max<std::uint64_t>(bytes, 1);
  return (wanted + kGranule - 1) / kGranule * kGranule;
}

// Restated rather than taken from heap_allocator.h, whose IsPowerOfTwo is part of what runs.
bool ValidAlignment(std::uint64_t alignment) {
  return alignment != 0 && (alignment & (alignment - 1)) == 0 &&
         alignment <= HeapAllocator::kMaxAlignment;
}

class AllocatorFuzzer {
 public:
  explicit AllocatorFuzzer(ByteReader* input) : in_(*input) {}

  void Run() {
    BeginLifecycle();
    for (int step = 0; step < kMaxOperations && !in_.empty(); ++step) {
      step_ = step;
      const std::uint8_t opcode = in_.U8();
      switch (opcode % 16) {
        case 0:
        case 1: AllocateOp(/*place_then_commit=*/false); break;
        case 2: AllocateOp(/*place_then_commit=*/true); break;
        case 3:
        case 4: FreeLiveOp(); break;
        case 5: FreeFreedOp(); break;
        case 6: FreeViewOp(); break;
        case 7:
        case 8: ResolveOp(); break;
        case 9: MarkLeakedOp(); break;
        case 10: EndLifecycleOp(); break;
        case 11: BeginLifecycleOp(); break;
        case 12: ForeignIdOp(); break;
        case 13: ReleaseUnknownOffsetOp(); break;
        case 14: FreeAllOp(); break;
        case 15: FillOp(); break;
      }
      CheckInvariants();
    }
    // Whatever the sequence, freeing everything leaves one coalesced free block.
    step_ = kMaxOperations;
    op_ = "final free-all";
    if (in_lifecycle_) FreeAll(0);
    CheckInvariants();
  }

 private:
  std::string Where() const { return "step " + Dec(step_) + " " + op_ + ": "; }

#define CHECK_OP(condition, detail) HPS_FUZZ_CHECK(condition, Where() + (detail))

  std::uint64_t PickHeapBytes() {
    switch (in_.U8() % 5) {
      case 0: return in_.U8();  // tiny, often below a granule
      case 1: return (std::uint64_t{in_.U8()} + 1) * kGranule;  // whole granules, to 16 KiB
      case 2: {  // a ragged end
        const std::uint64_t granules = in_.U16();
        return granules * kGranule + in_.U8() % kGranule;
      }
      case 3: return (std::uint64_t{in_.U8()} % 8 + 1) << 20;  // MiBs, for 2 MiB alignment
      default: return Config::kMaxHeapBytes - in_.U8();  // the largest the runtime accepts
    }
  }

  std::uint64_t PickBytes() {
    const std::uint64_t heap = allocator_.heap_bytes();
    switch (in_.U8() % 8) {
      case 0: return 0;
      case 1: return in_.U8();
      case 2: return in_.U16();
      case 3: return std::uint64_t{in_.U8()} * kGranule;
      case 4: return in_.U32() % (heap + 1);
      case 5: {  // around the largest free block, where fits/doesn't-fit flips
        const auto delta = static_cast<std::int8_t>(in_.U8());
        return allocator_.Usage().largest_free_block + static_cast<std::uint64_t>(delta);
      }
      case 6: return UINT64_MAX - in_.U8();
      default: return heap - in_.U8();
    }
  }

  std::uint64_t PickAlignment() {
    const std::uint8_t choice = in_.U8();
    if (choice < 192) return std::uint64_t{1} << (choice % 22);  // 1 .. kMaxAlignment
    switch (choice % 8) {
      case 0: return 0;
      case 1: return 3;
      case 2: return 48;
      case 3: return HeapAllocator::kMaxAlignment * 2;
      case 4: return std::uint64_t{1} << 63;
      case 5: return UINT64_MAX;
      case 6: return in_.U64();
      default: return HeapAllocator::kMaxAlignment;
    }
  }

  // A live block chosen by the input, or null when none is live.
  const AllocationRecord* PickLive() {
    if (live_.empty()) return nullptr;
    auto it = live_.begin();
    std::advance(it, in_.U16() % live_.size());
    return &it->second;
  }

  // Free gaps between live blocks over the usable heap, checking on the way that the blocks
  // lie inside it and never overlap.
  std::vector<Gap> Gaps() const {
    std::vector<Gap> gaps;
    std::uint64_t cursor = 0;
    for (const auto& [offset, placed] : by_offset_) {
      CHECK_OP(offset >= cursor, "block " + Dec(placed.id) + " at " + Dec(offset) +
                                     " overlaps the block ending at " + Dec(cursor));
      CHECK_OP(placed.reserved <= usable_ && offset <= usable_ - placed.reserved,
               "block " + Dec(placed.id) + " [" + Dec(offset) + ", +" + Dec(placed.reserved) +
                   ") leaves the usable heap of " + Dec(usable_));
      if (offset > cursor) gaps.push_back(Gap{cursor, offset - cursor});
      cursor = offset + placed.reserved;
    }
    if (usable_ > cursor) gaps.push_back(Gap{cursor, usable_ - cursor});
    return gaps;
  }

  // Where best fit must put the request: the smallest gap that holds it once aligned, the
  // lowest such gap on ties; nullopt when no gap holds it.
  std::optional<HeapBlock> Predict(std::uint64_t bytes, std::uint64_t alignment) const {
    const unsigned __int128 align = std::max(alignment, kGranule);
    const unsigned __int128 reserve = Reservation(bytes);
    std::optional<HeapBlock> best;
    std::uint64_t best_gap = 0;
    for (const Gap& gap : Gaps()) {
      const unsigned __int128 start = (gap.offset + align - 1) / align * align;
      const unsigned __int128 end = static_cast<unsigned __int128>(gap.offset) + gap.bytes;
      if (start + reserve > end) continue;
      if (!best || gap.bytes < best_gap) {
        best = HeapBlock{static_cast<std::uint64_t>(start), static_cast<std::uint64_t>(reserve)};
        best_gap = gap.bytes;
      }
    }
    return best;
  }

  void AddLive(const AllocationRecord& block) {
    live_.emplace(block.id, block);
    by_offset_.emplace(block.offset, Placed{block.id, block.reserved_bytes});
    allocated_ += block.reserved_bytes;
    max_allocated_ = std::max(max_allocated_, allocated_);
    live_bytes_ += block.bytes;
    max_live_count_ = std::max<std::uint64_t>(max_live_count_, live_.size());
    max_live_bytes_ = std::max(max_live_bytes_, live_bytes_);
  }

  void RemoveLive(AllocationId id) {
    const AllocationRecord block = live_.at(id);
    by_offset_.erase(block.offset);
    live_.erase(id);
    allocated_ -= block.reserved_bytes;
    live_bytes_ -= block.bytes;
    freed_.push_back(block);
  }

  void ExpectCode(const Status& status, ErrorCode code, const std::string& what) const {
    CHECK_OP(status.code() == code, what + " gave " + std::string(ErrorCodeName(status.code())) +
                                        ", expected " + std::string(ErrorCodeName(code)) +
                                        " (" + status.message() + ")");
  }

  void ExpectMessageStart(const Status& status, const std::string& start,
                          const std::string& what) const {
    CHECK_OP(status.message().starts_with(start),
             what + " message \"" + status.message() + "\" does not start with \"" + start + "\"");
  }

  // Every query on an id that is not live in this lifecycle gives the same code, from each
  // entry, and never a record.
  void ExpectRejectedId(AllocationId id, std::uint64_t offset, std::uint64_t bytes,
                        ErrorCode resolve_code, ErrorCode free_code,
                        const std::string& message_start) const {
    AllocationRecord record;
    const AllocationRecord untouched = record;
    const Status resolved = registry_.Resolve(id, offset, bytes, &record);
    ExpectCode(resolved, resolve_code, "Resolve(" + Dec(id) + ")");
    ExpectMessageStart(resolved, message_start, "Resolve(" + Dec(id) + ")");
    const Status whole = registry_.ResolveWhole(id, offset, bytes, &record);
    ExpectCode(whole, free_code, "ResolveWhole(" + Dec(id) + ")");
    ExpectMessageStart(whole, message_start, "ResolveWhole(" + Dec(id) + ")");
    // The freed code is the caller's choice; the other outcomes ignore it.
    const ErrorCode chosen = ErrorCode::kTimeout;
    const ErrorCode expected_check =
        resolve_code == ErrorCode::kUseAfterFree ? chosen : resolve_code;
    ExpectCode(registry_.CheckId(id, chosen), expected_check, "CheckId(" + Dec(id) + ")");
    CHECK_OP(record == untouched, "a rejected lookup of " + Dec(id) + " wrote a record");
  }

  void ExpectStale(AllocationId id, std::uint64_t offset, std::uint64_t bytes) const {
    ExpectRejectedId(id, offset, bytes, ErrorCode::kStaleLifecycle, ErrorCode::kStaleLifecycle,
                     "allocation belongs to an earlier lifecycle");
  }

  void ExpectNeverIssued(AllocationId id) const {
    ExpectRejectedId(id, 0, 0, ErrorCode::kInvalidArgument, ErrorCode::kInvalidArgument,
                     "allocation id must be an id this runtime issued");
  }

  void ExpectRecord(const AllocationRecord& block) const {
    AllocationRecord record;
    const Status status = registry_.Resolve(block.id, block.offset, block.bytes, &record);
    CHECK_OP(status.ok(), "live id " + Dec(block.id) + " does not resolve: " + status.message());
    CHECK_OP(record == block, "record of id " + Dec(block.id) + " differs: offset " +
                                  Dec(record.offset) + " bytes " + Dec(record.bytes) +
                                  " reserved " + Dec(record.reserved_bytes) + " leaked " +
                                  Dec(record.leaked));
  }

  void CheckInvariants() const {
    const std::vector<Gap> gaps = Gaps();
    std::uint64_t largest_gap = 0;
    for (const Gap& gap : gaps) largest_gap = std::max(largest_gap, gap.bytes);

    const HeapUsage usage = allocator_.Usage();
    CHECK_OP(usage.heap_bytes == heap_bytes_, "heap_bytes " + Dec(usage.heap_bytes));
    CHECK_OP(usage.allocated_bytes == allocated_,
             "allocated_bytes " + Dec(usage.allocated_bytes) + ", model " + Dec(allocated_));
    CHECK_OP(usage.allocated_bytes + usage.remaining_bytes == usage.heap_bytes,
             "allocated " + Dec(usage.allocated_bytes) + " + remaining " +
                 Dec(usage.remaining_bytes) + " != heap " + Dec(usage.heap_bytes));
    CHECK_OP(usage.max_allocated_bytes == max_allocated_,
             "max_allocated_bytes " + Dec(usage.max_allocated_bytes) + ", model " +
                 Dec(max_allocated_));
    CHECK_OP(usage.largest_free_block == largest_gap,
             "largest_free_block " + Dec(usage.largest_free_block) + ", largest gap " +
                 Dec(largest_gap));
    CHECK_OP(allocator_.free_block_count() == gaps.size(),
             "free_block_count " + Dec(allocator_.free_block_count()) + ", gaps " +
                 Dec(gaps.size()) + " (coalescing)");
    if (live_.empty()) {
      CHECK_OP(allocator_.free_block_count() == (usable_ > 0 ? 1u : 0u),
               "an empty heap is " + Dec(allocator_.free_block_count()) + " free blocks");
    }
    // largest_free_block is "the biggest contiguous request that could fit".
    HeapBlock placed;
    if (largest_gap > 0) {
      const Status fits = allocator_.Place(largest_gap, 1, &placed);
      CHECK_OP(fits.ok(), "Place(largest_free_block) failed: " + fits.message());
    }
    ExpectCode(allocator_.Place(largest_gap + 1, 1, &placed), ErrorCode::kOutOfMemory,
               "Place(largest_free_block + 1)");
    CHECK_OP(allocator_.Usage() == usage, "Place changed the usage");

    CHECK_OP(registry_.live_count() == live_.size(),
             "live_count " + Dec(registry_.live_count()) + ", model " + Dec(live_.size()));
    CHECK_OP(registry_.live_bytes() == live_bytes_,
             "live_bytes " + Dec(registry_.live_bytes()) + ", model " + Dec(live_bytes_));
    CHECK_OP(registry_.peaks().max_live_count == max_live_count_ &&
                 registry_.peaks().max_live_bytes == max_live_bytes_,
             "peaks " + Dec(registry_.peaks().max_live_count) + "/" +
                 Dec(registry_.peaks().max_live_bytes) + ", model " + Dec(max_live_count_) +
                 "/" + Dec(max_live_bytes_));
    CHECK_OP(registry_.next_id() == next_id_, "next_id " + Dec(registry_.next_id()));
    CHECK_OP(registry_.lifecycle() == lifecycle_, "lifecycle " + Dec(registry_.lifecycle()));
    CHECK_OP(registry_.first_id_of_lifecycle() == first_id_,
             "first_id_of_lifecycle " + Dec(registry_.first_id_of_lifecycle()) + ", model " +
                 Dec(first_id_));
    std::vector<AllocationRecord> live, leaked;
    for (const auto& [id, block] : live_) {
      live.push_back(block);
      if (block.leaked) leaked.push_back(block);
    }
    CHECK_OP(registry_.Live() == live, "Live() differs from the model");
    CHECK_OP(registry_.Leaked() == leaked, "Leaked() differs from the model");
  }

  void Allocate(std::uint64_t bytes, std::uint64_t alignment, bool place_then_commit,
                bool* out_of_memory) {
    op_ = std::string(place_then_commit ? "place+commit" : "allocate") + "(bytes=" + Dec(bytes) +
          ", alignment=" + Dec(alignment) + ")";
    *out_of_memory = false;
    const HeapUsage before = allocator_.Usage();
    const std::size_t free_blocks_before = allocator_.free_block_count();
    HeapBlock block;
    Status status;
    if (place_then_commit) {
      status = allocator_.Place(bytes, alignment, &block);
      CHECK_OP(allocator_.Usage() == before && allocator_.free_block_count() == free_blocks_before,
               "Place changed the heap");
    } else {
      status = allocator_.Allocate(bytes, alignment, &block);
    }

    if (!ValidAlignment(alignment)) {
      ExpectCode(status, ErrorCode::kInvalidArgument, "bad alignment");
      ExpectMessageStart(status, "alignment must be a power of two no greater than " +
                                     Dec(HeapAllocator::kMaxAlignment) + ", but got " +
                                     Dec(alignment), "bad alignment");
    } else if (const std::optional<HeapBlock> expected = Predict(bytes, alignment); !expected) {
      ExpectCode(status, ErrorCode::kOutOfMemory, "no gap holds the request, so it");
      ExpectMessageStart(status, "symmetric heap exhausted: requested_bytes=" + Dec(bytes),
                         "out of memory");
      *out_of_memory = true;
    } else {
      CHECK_OP(status.ok(), "failed although a gap holds it: " + status.ToString());
      CHECK_OP(block.offset % std::max(alignment, kGranule) == 0,
               "offset " + Dec(block.offset) + " is not aligned");
      CHECK_OP(block.reserved_bytes == Reservation(bytes),
               "reserved " + Dec(block.reserved_bytes) + " is not the granule-rounded request");
      CHECK_OP(block == *expected, "placed at " + Dec(block.offset) + " (+" +
                                       Dec(block.reserved_bytes) + "), best fit is " +
                                       Dec(expected->offset) + " (+" +
                                       Dec(expected->reserved_bytes) + ")");
      if (place_then_commit) allocator_.Commit(block);

      const AllocationId id = registry_.Register(block.offset, bytes, block.reserved_bytes,
                                                 alignment);
      CHECK_OP(id == next_id_, "issued id " + Dec(id) + ", expected " + Dec(next_id_));
      ++next_id_;
      const AllocationRecord added{
          id, lifecycle_, block.offset, bytes, block.reserved_bytes, alignment, false};
      AddLive(added);
      ExpectRecord(added);
      return;
    }
    CHECK_OP(allocator_.Usage() == before && allocator_.free_block_count() == free_blocks_before,
             "a failed request changed the heap");
  }

  void AllocateOp(bool place_then_commit) {
    if (!in_lifecycle_) return;
    const std::uint64_t bytes = PickBytes();
    const std::uint64_t alignment = PickAlignment();
    bool out_of_memory = false;
    Allocate(bytes, alignment, place_then_commit, &out_of_memory);
  }

  // The Runtime's free: validate the whole allocation, release the heap block, forget the id.
  void Free(AllocationId id) {
    const AllocationRecord block = live_.at(id);
    op_ = "free(id=" + Dec(id) + ")";
    AllocationRecord record;
    const Status valid = registry_.ResolveWhole(id, block.offset, block.bytes, &record);
    CHECK_OP(valid.ok(), "ResolveWhole of a live allocation failed: " + valid.message());
    CHECK_OP(record == block, "ResolveWhole returned another record");
    const Status released = allocator_.Release(record.offset);
    CHECK_OP(released.ok(), "heap Release failed: " + released.message());
    registry_.Release(id);
    RemoveLive(id);
  }

  void FreeLiveOp() {
    if (const AllocationRecord* block = PickLive()) Free(block->id);
  }

  void FreeFreedOp() {
    op_ = "free a freed id";
    if (freed_.empty()) return;
    const AllocationRecord block = freed_[in_.U16() % freed_.size()];
    op_ = "double free(id=" + Dec(block.id) + ")";
    ExpectRejectedId(block.id, block.offset, block.bytes, ErrorCode::kUseAfterFree,
                     ErrorCode::kDoubleFree, "allocation was already freed");
    CHECK_OP(!registry_.MarkLeaked(block.id), "MarkLeaked accepted a freed id");
    registry_.Release(block.id);  // must change nothing: the invariants check that
    // The heap alone cannot tell a double free; it may only refuse an offset nobody owns.
    if (!by_offset_.contains(block.offset)) {
      ExpectCode(allocator_.Release(block.offset), ErrorCode::kInvalidArgument,
                 "heap Release of a freed offset");
    }
  }

  void FreeViewOp() {
    const AllocationRecord* block = PickLive();
    if (block == nullptr) return;
    const auto offset_delta = static_cast<std::int8_t>(in_.U8());
    const auto bytes_delta = static_cast<std::int8_t>(in_.U8());
    const std::uint64_t offset = block->offset + static_cast<std::uint64_t>(offset_delta);
    const std::uint64_t bytes = block->bytes + static_cast<std::uint64_t>(bytes_delta);
    op_ = "free view(id=" + Dec(block->id) + ", offset=" + Dec(offset) + ", bytes=" + Dec(bytes) +
          ")";
    AllocationRecord record;
    const Status status = registry_.ResolveWhole(block->id, offset, bytes, &record);
    if (offset == block->offset && bytes == block->bytes) {
      CHECK_OP(status.ok(), "the whole allocation was refused: " + status.message());
      CHECK_OP(record == *block, "ResolveWhole returned another record");
    } else {
      ExpectCode(status, ErrorCode::kInvalidArgument, "freeing a view");
      ExpectMessageStart(status, "freed tensor must be the whole allocation", "freeing a view");
    }
  }

  void ResolveOp() {
    const AllocationRecord* block = PickLive();
    if (block == nullptr) return;
    // Offsets before, inside and past the allocation, and lengths up to far beyond it.
    std::uint64_t offset = block->offset;
    switch (in_.U8() % 4) {
      case 0: offset += in_.U8() % (block->bytes + 1); break;
      case 1: offset += block->bytes + in_.U8(); break;
      case 2: offset -= in_.U8(); break;
      default: offset = in_.U64(); break;
    }
    std::uint64_t bytes = 0;
    switch (in_.U8() % 4) {
      case 0: bytes = in_.U8(); break;
      case 1: bytes = block->bytes - (offset - block->offset); break;  // exactly to the end
      case 2: bytes = block->bytes - (offset - block->offset) + 1; break;
      default: bytes = in_.U64(); break;
    }
    op_ = "resolve(id=" + Dec(block->id) + ", offset=" + Dec(offset) + ", bytes=" + Dec(bytes) +
          ")";
    const bool inside = offset >= block->offset &&
                        static_cast<unsigned __int128>(offset) + bytes <=
                            static_cast<unsigned __int128>(block->offset) + block->bytes;
    AllocationRecord record;
    const Status status = registry_.Resolve(block->id, offset, bytes, &record);
    if (inside) {
      CHECK_OP(status.ok(), "an operand inside the allocation was refused: " + status.message());
      CHECK_OP(record == *block, "Resolve returned another record");
    } else {
      ExpectCode(status, ErrorCode::kInvalidArgument, "an operand outside the allocation");
      ExpectMessageStart(status, "operand byte range must be inside allocation " +
                                     Dec(block->id), "an operand outside the allocation");
    }
  }

  void MarkLeakedOp() {
    op_ = "mark leaked";
    if (in_.U8() % 4 == 0 || live_.empty()) {
      const AllocationId id = in_.U8() % 2 ? next_id_ + in_.U8() : in_.U8();
      op_ = "mark leaked(id=" + Dec(id) + ")";
      const bool live = in_lifecycle_ && live_.contains(id);
      CHECK_OP(registry_.MarkLeaked(id) == live, "MarkLeaked of an id whose liveness is " +
                                                     Dec(live));
      if (live) live_.at(id).leaked = true;
      return;
    }
    AllocationRecord& block = live_.at(PickLive()->id);
    op_ = "mark leaked(id=" + Dec(block.id) + ")";
    CHECK_OP(registry_.MarkLeaked(block.id), "MarkLeaked refused a live id");
    block.leaked = true;
    ExpectRecord(block);
  }

  // What Shutdown does before ending a lifecycle: reclaim the leaked allocations.
  void ReclaimLeaked() {
    std::vector<AllocationId> leaked;
    for (const auto& [id, block] : live_) {
      if (block.leaked) leaked.push_back(id);
    }
    for (AllocationId id : leaked) Free(id);
  }

  void EndLifecycle() {
    op_ = "end lifecycle";
    if (in_.U8() % 2) ReclaimLeaked();
    registry_.EndLifecycle();
    allocator_.Reset(0);
    for (const auto& [id, block] : live_) stale_.push_back(block);
    stale_.insert(stale_.end(), freed_.begin(), freed_.end());
    live_.clear();
    by_offset_.clear();
    freed_.clear();
    first_id_ = next_id_;
    ResetHeapModel(0);
    in_lifecycle_ = false;
  }

  void BeginLifecycle() {
    if (in_lifecycle_) EndLifecycle();
    const std::uint64_t heap_bytes = PickHeapBytes();
    op_ = "begin lifecycle(heap_bytes=" + Dec(heap_bytes) + ")";
    allocator_.Reset(heap_bytes);
    registry_.BeginLifecycle();
    ++lifecycle_;
    first_id_ = next_id_;
    max_live_count_ = 0;
    max_live_bytes_ = 0;
    ResetHeapModel(heap_bytes);
    in_lifecycle_ = true;
  }

  void ResetHeapModel(std::uint64_t heap_bytes) {
    heap_bytes_ = heap_bytes;
    usable_ = heap_bytes / kGranule * kGranule;
    allocated_ = 0;
    max_allocated_ = 0;
    live_bytes_ = 0;
  }

  void EndLifecycleOp() {
    if (in_lifecycle_) EndLifecycle();
  }

  void BeginLifecycleOp() { BeginLifecycle(); }

  // Ids that are not live here: from an earlier lifecycle, or never issued.
  void ForeignIdOp() {
    op_ = "foreign id";
    if (in_.U8() % 2 && !stale_.empty()) {
      const AllocationRecord& block = stale_[in_.U16() % stale_.size()];
      op_ = "stale id(id=" + Dec(block.id) + ")";
      ExpectStale(block.id, block.offset, block.bytes);
      CHECK_OP(!registry_.MarkLeaked(block.id), "MarkLeaked accepted a stale id");
      registry_.Release(block.id);
      return;
    }
    AllocationId id = 0;
    switch (in_.U8() % 3) {
      case 0: id = 0; break;
      case 1: id = next_id_ + in_.U8(); break;
      default: id = UINT64_MAX - in_.U8(); break;
    }
    op_ = "never-issued id(id=" + Dec(id) + ")";
    ExpectNeverIssued(id);
    CHECK_OP(!registry_.MarkLeaked(id), "MarkLeaked accepted a never-issued id");
    registry_.Release(id);
  }

  void ReleaseUnknownOffsetOp() {
    const std::uint64_t offset = in_.U8() % 2 ? in_.U32() % (heap_bytes_ + kGranule + 1)
                                              : in_.U64();
    op_ = "heap release(offset=" + Dec(offset) + ")";
    if (by_offset_.contains(offset)) return;  // that is a real free, done through Free
    const HeapUsage before = allocator_.Usage();
    const Status status = allocator_.Release(offset);
    ExpectCode(status, ErrorCode::kInvalidArgument, "releasing an offset no block starts at");
    ExpectMessageStart(status, "no heap block starts at this offset", "heap release");
    CHECK_OP(allocator_.Usage() == before, "a refused release changed the heap");
  }

  // Frees every live block in an order the input picks; the heap must coalesce into one.
  void FreeAll(std::uint8_t order) {
    std::vector<AllocationId> ids;
    switch (order % 3) {
      case 0:
        for (const auto& [id, block] : live_) ids.push_back(id);
        break;
      case 1:
        for (const auto& [offset, placed] : by_offset_) ids.push_back(placed.id);
        std::reverse(ids.begin(), ids.end());
        break;
      default: {  // even offsets first, then odd ones: the most fragmenting order
        std::vector<AllocationId> odd;
        bool even = true;
        for (const auto& [offset, placed] : by_offset_) {
          (even ? ids : odd).push_back(placed.id);
          even = !even;
        }
        ids.insert(ids.end(), odd.begin(), odd.end());
      }
    }
    for (AllocationId id : ids) Free(id);
    op_ = "free all";
    CHECK_OP(allocator_.free_block_count() == (usable_ > 0 ? 1u : 0u),
             "after freeing everything the heap is " + Dec(allocator_.free_block_count()) +
                 " free blocks");
    CHECK_OP(allocator_.Usage().largest_free_block == usable_,
             "after freeing everything the largest free block is " +
                 Dec(allocator_.Usage().largest_free_block));
  }

  void FreeAllOp() {
    if (in_lifecycle_) FreeAll(in_.U8());
  }

  // Allocates one shape until the heap refuses it: exhaustion must come exactly when no gap
  // is left for it.
  void FillOp() {
    if (!in_lifecycle_) return;
    const std::uint64_t bytes = PickBytes();
    const std::uint64_t alignment = PickAlignment();
    const bool place_then_commit = in_.U8() % 2;
    for (int i = 0; i < kMaxFillAllocations; ++i) {
      bool out_of_memory = false;
      Allocate(bytes, alignment, place_then_commit, &out_of_memory);
      if (out_of_memory || !ValidAlignment(alignment)) break;
    }
  }

#undef CHECK_OP

  ByteReader& in_;
  int step_ = 0;
  std::string op_ = "start";

  HeapAllocator allocator_;
  AllocationRegistry registry_;

  bool in_lifecycle_ = false;
  std::uint64_t heap_bytes_ = 0;
  std::uint64_t usable_ = 0;  // whole granules of the heap
  std::uint64_t allocated_ = 0;
  std::uint64_t max_allocated_ = 0;
  std::map<AllocationId, AllocationRecord> live_;
  struct Placed {
    AllocationId id;
    std::uint64_t reserved;
  };
  std::map<std::uint64_t, Placed> by_offset_;  // the live blocks again, in heap order
  std::vector<AllocationRecord> freed_;  // in this lifecycle
  std::vector<AllocationRecord> stale_;  // live or freed in an earlier lifecycle
  AllocationId next_id_ = 1;
  AllocationId first_id_ = 1;
  std::uint64_t lifecycle_ = 0;
  std::uint64_t live_bytes_ = 0;
  std::uint64_t max_live_count_ = 0;
  std::uint64_t max_live_bytes_ = 0;
};

}  // namespace
}  // namespace hyper_parallel::shmem

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hyper_parallel::shmem::ByteReader input(data, size);
  hyper_parallel::shmem::AllocatorFuzzer(&input).Run();
  return 0;
}
