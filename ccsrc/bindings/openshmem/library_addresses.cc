// The OpenSHMEM C library's symmetric addresses (docs/openshmem.md, "How it works"): the
// blocks (heap allocations and the static data), the lookup of an address in them with each
// thread's cache, where a peer's copy lies in this process, and the blocks' allocation.
#include <cstdio>

#include "bindings/openshmem/library_state.h"

namespace hyper_parallel::shmem::openshmem {

bool TryResolve(const void* address, std::uint64_t bytes, SymmetricView* out) {
  // Each thread keeps the block it found last: a program's calls mostly name the same few
  // buffers, and then a lookup takes no lock.
  thread_local Block cached;
  thread_local std::uint64_t cached_generation = 0;
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  const std::uint64_t generation = S().generation.load(std::memory_order_acquire);
  if (cached_generation != generation || at < cached.lo || at >= cached.hi) {
    MutexLock lock(&S().mutex);
    auto it = S().blocks.upper_bound(at);
    if (it == S().blocks.begin()) return false;
    const Block& block = std::prev(it)->second;
    if (at >= block.hi) return false;
    cached = block;
    cached_generation = S().generation.load(std::memory_order_relaxed);
  }
  if (bytes > cached.hi - at) return false;
  *out = SymmetricView{cached.id, cached.heap + (at - cached.lo), bytes};
  return true;
}

std::uint64_t BytesToEnd(const void* address) {
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  MutexLock lock(&S().mutex);
  auto it = S().blocks.upper_bound(at);
  if (it == S().blocks.begin()) return 0;
  const Block& block = std::prev(it)->second;
  return at < block.hi ? block.hi - at : 0;
}

SymmetricView Resolve(std::string_view call, std::string_view argument, const void* address,
                      std::uint64_t bytes) {
  SymmetricView view;
  if (!TryResolve(address, bytes, &view)) {
    char text[96];
    std::snprintf(text, sizeof(text), "%p (+%llu bytes)", address,
                  static_cast<unsigned long long>(bytes));
    FailArgument(call, argument,
                 "symmetric: inside one shmem_malloc'd block or the program's static data", text);
  }
  return view;
}

std::uint64_t Bytes(std::string_view call, std::uint64_t count, std::uint64_t size) {
  if (size != 0 && count > UINT64_MAX / size) {
    FailArgument(call, "nelems", "a count whose bytes fit 64 bits",
                 std::to_string(count) + " elements of " + std::to_string(size) + " bytes");
  }
  return count * size;
}

void* Direct(int pe, const SymmetricView& view) {
  // Read without the lock: the table is written once by shmem_init, before any operation.
  const std::vector<std::byte*>& heaps = S().peer_heaps;
  std::byte* peer = heaps[static_cast<std::size_t>(pe)];
  if (peer == nullptr || S().my_heap == nullptr) return nullptr;
  return peer + (static_cast<const std::byte*>(view.data) - S().my_heap);
}

void* Target(std::string_view call, std::string_view argument, const void* address,
             std::uint64_t bytes, int pe, SymmetricView* view) {
  if (!S().ready.load(std::memory_order_relaxed)) Ready(call);  // fails saying why
  if (pe < 0 || pe >= S().n_pes) CheckPe(call, pe);
  if (!TryResolve(address, bytes, view)) Resolve(call, argument, address, bytes);  // fails
  return Direct(pe, *view);
}

void CheckPe(std::string_view call, int pe) {
  const int n = S().n_pes;
  if (pe < 0 || pe >= n) {
    FailArgument(call, "pe", "in [0, " + std::to_string(n) + ")", std::to_string(pe));
  }
}

void* Allocate(std::string_view call, std::uint64_t bytes, std::uint64_t alignment) {
  Runtime& runtime = Ready(call);
  // A block's usable size is its size rounded up to the heap's granule, which the allocator
  // reserves anyway (as malloc's usable size): programs that write a few bytes past what they
  // asked for (tests-uh's put tests do) touch only their own reservation.
  if (bytes > UINT64_MAX - HeapAllocator::kGranule) {
    FailArgument(call, "size", "a size the heap can describe", std::to_string(bytes));
  }
  bytes = (bytes + HeapAllocator::kGranule - 1) / HeapAllocator::kGranule * HeapAllocator::kGranule;
  // An alignment above the allocator's largest: a larger block, aligned inside (at the same
  // offset on every PE, whose heaps are alike).
  const std::uint64_t slack = alignment > HeapAllocator::kMaxAlignment ? alignment : 0;
  if (slack > UINT64_MAX - bytes) {
    FailArgument(call, "alignment", "one the heap can describe", std::to_string(alignment));
  }
  Allocation allocation;
  if (Status s = runtime.Allocate(bytes + slack, slack ? HeapAllocator::kMaxAlignment : alignment,
                                  &allocation, call);
      !s.ok()) {
    // Every PE judges the same heap alike, so an allocation the heap cannot hold is null on
    // every PE; anything else (PEs that asked for different sizes) ends the job.
    if (s.code() == ErrorCode::kOutOfMemory) return nullptr;
    Fail(call, s);
  }
  auto* base = static_cast<std::byte*>(allocation.data);
  auto lo = reinterpret_cast<std::uintptr_t>(base);
  if (slack) lo = (lo + alignment - 1) / alignment * alignment;
  MutexLock lock(&S().mutex);
  S().blocks[lo] = Block{lo, lo + bytes, allocation.id, base + (lo - reinterpret_cast<std::uintptr_t>(base)),
                         base, allocation.bytes};
  ++S().generation;
  return reinterpret_cast<void*>(lo);
}

void Release(std::string_view call, void* address) {
  Runtime& runtime = Ready(call);
  const auto lo = reinterpret_cast<std::uintptr_t>(address);
  Block block;
  {
    MutexLock lock(&S().mutex);
    auto it = S().blocks.find(lo);
    if (it == S().blocks.end() || (S().static_data && S().static_data->lo == lo)) {
      char text[32];
      std::snprintf(text, sizeof(text), "%p", address);
      FailArgument(call, "ptr", "null or an address shmem_malloc returned", text);
    }
    block = it->second;
    S().blocks.erase(it);
    ++S().generation;
  }
  if (Status s = runtime.Free(SymmetricView{block.id, block.base, block.bytes}, call); !s.ok()) {
    Fail(call, s);
  }
}

}  // namespace hyper_parallel::shmem::openshmem
