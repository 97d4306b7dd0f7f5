#include "data_plane/pe_address.h"

#include <gtest/gtest.h>

#include <vector>

namespace hyper_parallel::shmem::data_plane {
namespace {

TEST(PeAddress, TranslatesTheSameSymmetricByte) {
  std::vector<std::byte> local(4096), peer(4096);
  const void* address = local.data() + 1234;
  void* translated = TranslateAddress(address, local.data(), peer.data());
  EXPECT_EQ(translated, peer.data() + 1234);
  EXPECT_EQ(TranslateAddress(translated, peer.data(), local.data()), address);
  EXPECT_EQ(HeapOffset(address, local.data()), 1234u);
  EXPECT_EQ(TranslateAddress(nullptr, local.data(), peer.data()), nullptr);
  EXPECT_EQ(TranslateAddress(address, local.data(), nullptr), nullptr);
}

TEST(PeAddress, InsideHeapBounds) {
  std::vector<std::byte> heap(100);
  const std::byte* base = heap.data();
  EXPECT_TRUE(InsideHeap(base, 100, base, 100));
  EXPECT_TRUE(InsideHeap(base + 100, 0, base, 100));
  EXPECT_FALSE(InsideHeap(base + 1, 100, base, 100));
  EXPECT_FALSE(InsideHeap(base + 101, 0, base, 100));
  EXPECT_FALSE(InsideHeap(base - 1, 1, base, 100));
  EXPECT_FALSE(InsideHeap(base, UINT64_MAX, base, 100));
  EXPECT_FALSE(InsideHeap(base, 1, nullptr, 100));
}

TEST(PeAddress, SlotsAndRing) {
  static_assert(SlotOffset(3, 1000) == 3000);
  EXPECT_EQ(RingPeer(3, 1, 4), 0);
  EXPECT_EQ(RingPeer(0, 5, 4), 1);
  EXPECT_EQ(SlotOffset(7, 1ull << 33), 7ull << 33);
}

}  // namespace
}  // namespace hyper_parallel::shmem::data_plane
