// The handle symm_mem.rendezvous returns (symm_mem.h; docs/api.md, "torch's symmetric-memory
// API"): its pointers and its synchronisation through the signal pad (put_signal, wait_signal,
// barrier), with this runtime's get and signal, so on every backend and across hosts. The
// allocator that makes it is symm_mem.cc's. Includes torch's SymmetricMemory interface.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "bindings/torch/errors.h"
#include "bindings/torch/symm_mem.h"
#include "runtime/runtime.h"

namespace hyper_parallel::shmem::binding {
namespace {

std::chrono::milliseconds Bound(size_t timeout_ms) {
  return timeout_ms == 0 ? Runtime::Process().timeout()
                         : std::chrono::milliseconds(static_cast<std::int64_t>(timeout_ms));
}

// Spins briefly, then sleeps longer and longer (up to 1 ms): PEs share the cores.
void Backoff(int attempt) {
  if (attempt < 64) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 10 * (attempt - 63))));
}

}  // namespace

HpsSymmetricMemory::HpsSymmetricMemory(std::shared_ptr<SymmBlock> block, TeamHandle team,
                                       std::vector<int> pes, int rank, c10::Device device,
                                       std::vector<void*> buffers, std::vector<void*> pads)
    : block_(std::move(block)),
      team_(team),
      pes_(std::move(pes)),
      rank_(rank),
      device_(device),
      buffers_(std::move(buffers)),
      pads_(std::move(pads)) {}

bool HpsSymmetricMemory::world_within_direct_access() {
  return std::all_of(buffers_.begin(), buffers_.end(), [](void* p) { return p != nullptr; });
}

SymmetricView HpsSymmetricMemory::Slot(std::string_view operation, int channel, int rank) const {
  const int world = static_cast<int>(pes_.size());
  if (rank < 0 || rank >= world) {
    Throw(Contract(operation, "rank", "a rank of the group, 0 to " + std::to_string(world - 1),
                   std::to_string(rank)));
  }
  const std::uint64_t channels = block_->pad_bytes / 4 / static_cast<std::uint64_t>(world);
  if (channel < 0 || static_cast<std::uint64_t>(channel) >= channels) {
    Throw(Contract(operation, "channel",
                   "0 to " + std::to_string(channels - 1) + " (the signal pad holds " +
                       std::to_string(channels) + " channels of " + std::to_string(world) +
                       " words)",
                   std::to_string(channel)));
  }
  const std::uint64_t word = static_cast<std::uint64_t>(channel) * world + rank;
  return SymmetricView{block_->id, block_->base + block_->pad_offset + 4 * word, 4};
}

// torch's semantics: put_signal waits (bounded) until the peer's word of (channel, this rank)
// is 0, then sets it to 1; wait_signal waits until this rank's word of (channel, src) is 1,
// then resets it to 0. Each word has one writer per transition (the sender sets it, its owner
// resets it), so a get and a signal do it without atomics: on every backend (CANN has no
// atomics) and across hosts.
namespace {

// Waits (bounded) until `slot` on world PE `pe` holds `expected`, then sets it to `next`.
void Transition(std::string_view operation, const SymmetricView& slot, int pe,
                std::uint32_t expected, std::uint32_t next, const c10::Device& device,
                size_t timeout_ms, const std::vector<Field>& names) {
  Runtime& runtime = Runtime::Process();
  const StreamRef stream = StreamFor(device);
  const auto bound = Bound(timeout_ms);
  const auto deadline = std::chrono::steady_clock::now() + bound;
  for (int attempt = 0;; ++attempt) {
    std::uint32_t seen = expected + 1;
    Check(WithoutGil([&] { return runtime.Get(&seen, slot, pe, stream); }));
    Synchronize(device);
    if (seen == expected) {
      Check(WithoutGil([&] {
        return runtime.Signal(slot, SignalWidth::k32, next, pe, SignalOp::kSet, stream);
      }));
      Synchronize(device);
      return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::vector<Field> fields = names;
      fields.push_back({"timeout_ms", std::to_string(bound.count())});
      const char* what = expected == 0
                             ? "put_signal timed out waiting for the peer's signal slot to be 0"
                             : "wait_signal timed out waiting for the peer's signal";
      Throw(Status::Assertion(ErrorCode::kTimeout, what, fields).At(operation, "wait"));
    }
    Backoff(attempt);
  }
}

}  // namespace

void HpsSymmetricMemory::put_signal(int dst_rank, int channel, size_t timeout_ms) {
  constexpr std::string_view kOp = "symm_mem.put_signal";
  const SymmetricView slot = Slot(kOp, channel, rank_);
  (void)Slot(kOp, channel, dst_rank);  // checks dst_rank
  Transition(kOp, slot, pe(dst_rank), 0, 1, device_, timeout_ms,
             {{"channel", std::to_string(channel)},
              {"peer", std::to_string(dst_rank)},
              {"peer_pe", std::to_string(pe(dst_rank))}});
}

void HpsSymmetricMemory::wait_signal(int src_rank, int channel, size_t timeout_ms) {
  constexpr std::string_view kOp = "symm_mem.wait_signal";
  const SymmetricView slot = Slot(kOp, channel, src_rank);
  Transition(kOp, slot, pe(rank_), 1, 0, device_, timeout_ms,
             {{"channel", std::to_string(channel)},
              {"peer", std::to_string(src_rank)},
              {"peer_pe", std::to_string(pe(src_rank))}});
}

void HpsSymmetricMemory::barrier(int channel, size_t timeout_ms) {
  const int world = static_cast<int>(pes_.size());
  for (int step = 1; step < world; ++step) put_signal((rank_ + step) % world, channel, timeout_ms);
  for (int step = 1; step < world; ++step) {
    wait_signal((rank_ - step + world) % world, channel, timeout_ms);
  }
}

}  // namespace hyper_parallel::shmem::binding
