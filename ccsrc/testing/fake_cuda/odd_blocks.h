// Test batches for CudaApi::CopyBlocksAsync, shared by the fake's test and the real runtime's
// (tests only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hyper_parallel::shmem::cuda {

/// Where one block of a test batch lies: offsets into a destination and a source buffer.
struct BlockAt {
  std::size_t dst = 0, src = 0, bytes = 0;
};

/// `count` blocks of odd sizes at odd offsets, packed with gaps of 1 to 7 bytes, so that the
/// destination's and the source's alignments differ from block to block (every word width of
/// the copy kernel, and byte copies, get used) and an overrun lands in a gap. Every ninth block
/// spans several of the kernel's 64 KiB slices and ends inside one; every fiftieth is empty.
/// Sets the buffer sizes the blocks need.
inline std::vector<BlockAt> OddBlocks(int count, std::size_t* dst_bytes, std::size_t* src_bytes) {
  std::vector<BlockAt> blocks;
  std::size_t dst = 3, src = 5;
  for (int i = 0; i < count; ++i) {
    const auto n = static_cast<std::size_t>(i);
    std::size_t bytes = n * 131 % 4093 + 1;
    if (i % 9 == 4) bytes = (3 << 16) + n * 17 + 1;
    if (i % 50 == 25) bytes = 0;
    blocks.push_back({dst, src, bytes});
    dst += bytes + 1 + n % 7;
    src += bytes + 1 + n % 5;
  }
  *dst_bytes = dst + 8;
  *src_bytes = src + 8;
  return blocks;
}

/// The counter block `i` of a signalled test batch adds to (of three), and what it adds: some
/// additions are negative, and every counter gets several.
inline int CounterOf(int i) { return i % 3; }
inline std::int64_t AdditionOf(int i) { return i % 5 - 1; }

}  // namespace hyper_parallel::shmem::cuda
