// DeviceControl: the control block and the descriptor exchange of a backend whose heap only
// its stream operations reach (CANN, CUDA), written once.
//
// Each PE allocates, beside its heap, a control block of this layout:
//   descriptors [2][P][kWords] uint64   collective n's descriptor rows in slot n % 2
//   flags       [2][P]        64-bit words, 64 bytes apart: a row's flag (n) once it is written
//   epochs      [kEpochSlots][P] 64-bit words, 64 bytes apart: the kernel-side API's op epochs
// A collective writes its row into slot n % 2 at every PE, then raises its flag there (stream
// order: row before flag), waits on its stream until every PE's flag here reached n, reads the
// rows back to the host and returns them. A PE writes slot n % 2 again (for n + 2) only after
// every PE raised its flag for n + 1, which each does only after it read n: no row is
// overwritten before it was read. Numbers only grow; the block starts zeroed.
//
// CallerStreams is what such a backend remembers of the work it only enqueued on a caller's
// stream: the streams, to synchronise at Quiesce, and the local operands that work still reads.
//
// Thread-safety: ExchangeThroughDeviceControl is a pure function of its arguments and the
// operations it is given; the caller serialises exchanges (one collective at a time per PE).
// CallerStreams may be used from any thread.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/collective.h"
#include "base/status.h"
#include "data_plane/kernel_api.h"

namespace hyper_parallel::shmem {

struct DeviceControlLayout {
  static constexpr std::uint64_t kLine = 64;
  static constexpr std::uint64_t kRowBytes = CollectiveDescriptor::kWords * sizeof(std::uint64_t);

  explicit DeviceControlLayout(int size = 1) : pes(static_cast<std::uint64_t>(size)) {
    flags = (2 * pes * kRowBytes + kLine - 1) / kLine * kLine;
    epochs = flags + 2 * pes * kLine;
    bytes = epochs + static_cast<std::uint64_t>(data_plane::kEpochSlots) * pes * kLine;
  }

  /// Offsets inside the block.
  std::uint64_t Row(std::uint64_t sequence, int pe) const {
    return (sequence % 2 * pes + static_cast<std::uint64_t>(pe)) * kRowBytes;
  }
  std::uint64_t Flag(std::uint64_t sequence, int pe) const {
    return flags + (sequence % 2 * pes + static_cast<std::uint64_t>(pe)) * kLine;
  }
  std::uint64_t Epoch(int slot, int source) const {
    return epochs + (static_cast<std::uint64_t>(slot) * pes + static_cast<std::uint64_t>(source)) * kLine;
  }

  std::uint64_t pes = 1;
  std::uint64_t flags = 0;
  std::uint64_t epochs = 0;
  std::uint64_t bytes = 0;
};

/// The caller's streams work was enqueued on, and the operands it holds, until the next Quiesce.
class CallerStreams {
 public:
  /// Notes that work holding `keep_alive` (may be null) was enqueued on `stream`.
  void Note(void* stream, std::shared_ptr<const void> keep_alive) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(streams_.begin(), streams_.end(), stream) == streams_.end()) {
      streams_.push_back(stream);
    }
    if (keep_alive != nullptr) keep_alive_.push_back(std::move(keep_alive));
  }

  /// Everything noted so far, forgotten here: the caller synchronises the streams, then drops
  /// the operands (work noted meanwhile keeps its own).
  struct Taken {
    std::vector<void*> streams;
    std::vector<std::shared_ptr<const void>> keep_alive;
  };
  Taken Take() {
    std::lock_guard<std::mutex> lock(mutex_);
    Taken taken{std::move(streams_), std::move(keep_alive_)};
    streams_.clear();
    keep_alive_.clear();
    return taken;
  }

 private:
  std::mutex mutex_;
  std::vector<void*> streams_;
  std::vector<std::shared_ptr<const void>> keep_alive_;
};

/// The stream operations an exchange needs, each enqueued on the backend's own stream.
struct DeviceControlOps {
  /// Copies our row (`bytes` at `row`) to `offset` of PE `pe`'s control block.
  std::function<Status(int pe, std::uint64_t offset, const void* row, std::uint64_t bytes)> put;
  /// Sets the flag word at `offset` of PE `pe`'s block to `value`, after the puts before it.
  std::function<Status(int pe, std::uint64_t offset, std::int64_t value)> set_flag;
  /// Waits until the flag word at `offset` of our block is at least `value`.
  std::function<Status(std::uint64_t offset, std::int64_t value, int from_pe)> wait_flag;
  /// Copies `bytes` from `offset` of our block to host memory `out`.
  std::function<Status(std::uint64_t offset, void* out, std::uint64_t bytes)> read;
  /// Runs everything enqueued so far.
  std::function<Status()> synchronize;
};

/// Collective: every PE's descriptor of collective mine.sequence, in rank order.
inline Status ExchangeThroughDeviceControl(const CollectiveDescriptor& mine, int rank, int size,
                                           const DeviceControlLayout& layout,
                                           const DeviceControlOps& ops,
                                           std::vector<CollectiveDescriptor>* all) {
  const std::array<std::uint64_t, CollectiveDescriptor::kWords> words = mine.Pack();
  // The flag is the number's low 31 bits: it fits the 32-bit words of a vendor that has no
  // wider signals, and grows for two billion collectives.
  const auto number = static_cast<std::int64_t>(mine.sequence & 0x7fffffff);
  for (int pe = 0; pe < size; ++pe) {
    HPS_RETURN_IF_ERROR(ops.put(pe, layout.Row(mine.sequence, rank), words.data(),
                                DeviceControlLayout::kRowBytes));
    HPS_RETURN_IF_ERROR(ops.set_flag(pe, layout.Flag(mine.sequence, rank), number));
  }
  for (int pe = 0; pe < size; ++pe) {
    HPS_RETURN_IF_ERROR(ops.wait_flag(layout.Flag(mine.sequence, pe), number, pe));
  }
  std::vector<std::uint64_t> table(static_cast<std::size_t>(size) * CollectiveDescriptor::kWords);
  HPS_RETURN_IF_ERROR(ops.read(layout.Row(mine.sequence, 0), table.data(),
                               table.size() * sizeof(std::uint64_t)));
  HPS_RETURN_IF_ERROR(ops.synchronize());
  all->clear();
  for (int pe = 0; pe < size; ++pe) {
    std::array<std::uint64_t, CollectiveDescriptor::kWords> theirs;
    std::copy_n(table.begin() + static_cast<std::ptrdiff_t>(pe) * CollectiveDescriptor::kWords,
                CollectiveDescriptor::kWords, theirs.begin());
    all->push_back(CollectiveDescriptor::Unpack(theirs));
  }
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem
