// The copy kernel's choice of word (cuda_kernels.cu), kept where the host compiler sees it too,
// so that the choice is tested on machines without a GPU.
//
// A block is copied in the widest word in which its destination and source are equally aligned
// (bytes up to the first aligned destination address, then words, then the bytes left): 16, 8,
// 4 or 2 bytes, and byte by byte only where the two addresses differ by an odd number of bytes.
// bf16 or fp16 rows with an odd element count (2-byte aligned, differing by 2 modulo 4) move in
// 2-byte words, not byte by byte.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "data_plane/device_qualifiers.h"

namespace hyper_parallel::shmem::cuda {

/// The word, in bytes, a block from `src` to `dst` is copied in.
HPS_HOST_DEVICE constexpr unsigned CopyUnitBytes(std::uintptr_t dst, std::uintptr_t src) {
  const std::uintptr_t differ = dst ^ src;
  for (unsigned unit = 16; unit > 1; unit /= 2) {
    if (differ % unit == 0) return unit;
  }
  return 1;
}

}  // namespace hyper_parallel::shmem::cuda
