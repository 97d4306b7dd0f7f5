// PE address arithmetic in Root-PE coordinates: symmetric offsets, translation of an address
// in one PE's mapping of the heap to the same byte in another's, and the slot of a root rank
// in a gathered buffer. Pure, header-only, constexpr where it can be.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hyper_parallel::shmem::data_plane {

/// Offset of `address` from `heap_base`; the caller knows `address` is inside the heap.
inline std::uint64_t HeapOffset(const void* address, const void* heap_base) {
  return static_cast<std::uint64_t>(static_cast<const std::byte*>(address) -
                                    static_cast<const std::byte*>(heap_base));
}

/// True when [address, address + bytes) lies inside [heap_base, heap_base + heap_bytes).
inline bool InsideHeap(const void* address, std::uint64_t bytes, const void* heap_base,
                       std::uint64_t heap_bytes) {
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  const auto base = reinterpret_cast<std::uintptr_t>(heap_base);
  return heap_base != nullptr && a >= base && a - base <= heap_bytes &&
         bytes <= heap_bytes - (a - base);
}

/// The byte at the same symmetric offset in the mapping starting at `to_base`.
inline void* TranslateAddress(const void* address, const void* from_base, const void* to_base) {
  if (address == nullptr || from_base == nullptr || to_base == nullptr) return nullptr;
  return const_cast<std::byte*>(static_cast<const std::byte*>(to_base)) +
         HeapOffset(address, from_base);
}

/// Byte offset of root rank `rank`'s slot in a buffer of `slot_bytes`-sized slots.
constexpr std::uint64_t SlotOffset(int rank, std::uint64_t slot_bytes) {
  return static_cast<std::uint64_t>(rank) * slot_bytes;
}

/// The peer `distance` steps after `rank` on a ring of `size` PEs (distance may exceed size).
constexpr int RingPeer(int rank, int distance, int size) {
  return static_cast<int>((static_cast<long long>(rank) + distance) % size);
}

}  // namespace hyper_parallel::shmem::data_plane
