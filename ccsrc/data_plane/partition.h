// Contiguous partition of `items` work items over `workers` workers: worker w gets one
// contiguous range, sizes differ by at most one, earlier workers get the larger share, and
// workers beyond `items` get empty ranges. Pure, header-only, constexpr.
#pragma once

#include <cstdint>

namespace hyper_parallel::shmem::data_plane {

struct Range {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  constexpr std::uint64_t size() const { return end - begin; }
  constexpr bool empty() const { return begin == end; }
  constexpr bool operator==(const Range&) const = default;
};

/// The range of worker `worker` in [0, workers); workers >= 1.
constexpr Range PartitionRange(std::uint64_t items, std::uint64_t workers, std::uint64_t worker) {
  const std::uint64_t base = items / workers;
  const std::uint64_t extra = items % workers;
  const std::uint64_t begin = worker * base + (worker < extra ? worker : extra);
  return Range{begin, begin + base + (worker < extra ? 1 : 0)};
}

/// Which worker owns item `item` under PartitionRange(items, workers, ·).
constexpr std::uint64_t PartitionOwner(std::uint64_t items, std::uint64_t workers,
                                       std::uint64_t item) {
  const std::uint64_t base = items / workers;
  const std::uint64_t extra = items % workers;
  const std::uint64_t big = extra * (base + 1);  // items held by the larger workers
  return item < big ? item / (base + 1) : extra + (item - big) / base;
}

}  // namespace hyper_parallel::shmem::data_plane
