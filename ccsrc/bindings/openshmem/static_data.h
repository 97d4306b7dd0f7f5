// The executable's static data (.data and .bss) made symmetric for the OpenSHMEM C library
// (docs/openshmem.md, "How it works"): every PE runs one executable, so the segment has one
// size everywhere; it is copied into a heap allocation whose pages are then mapped over it, so
// the program's own loads and stores and every PE's puts reach the same bytes.
#pragma once

#include <cstdint>
#include <optional>

#include "runtime/runtime.h"

namespace hyper_parallel::shmem::openshmem {

/// The executable's writable data remapped onto a heap allocation.
struct StaticData {
  std::uintptr_t lo = 0;
  std::uintptr_t hi = 0;
  Allocation allocation;
};

/// Collective (the allocation): maps the static data onto the heap; nullopt when the
/// executable has none. A failure ends the job naming shmem_init.
std::optional<StaticData> MapStaticData(Runtime& runtime);

/// Collective (the free): gives `data` private pages again (a copy of their last contents), so
/// the program keeps its globals after shmem_finalize releases the heap, then frees the
/// allocation. A failure ends the job naming shmem_finalize.
void UnmapStaticData(Runtime& runtime, const StaticData& data);

}  // namespace hyper_parallel::shmem::openshmem
