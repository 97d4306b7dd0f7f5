// torch's own symmetric-memory API (torch.distributed._symmetric_memory) on this runtime
// (docs/api.md, "torch's symmetric-memory API"): the allocator torch calls for symm_mem.empty
// and symm_mem.rendezvous (symm_mem.cc), the handle (SymmetricMemory) it returns
// (symm_mem_handle.cc), and what the symm_mem operators (symm_mem_ops.h) need of both.
// Includes torch's SymmetricMemory interface and pybind11.
#pragma once

#include <ATen/core/Tensor.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "runtime/runtime.h"

namespace hyper_parallel::shmem::binding {

/// One allocation of the "HPS" allocator: the buffer torch sees (`bytes`), then the signal
/// pad (`pad_bytes`, zeroed at allocation) at `pad_offset` from `base`.
struct SymmBlock {
  AllocationId id = 0;
  std::uint64_t lifecycle = 0;
  std::byte* base = nullptr;  ///< in this PE's mapping of its heap
  std::uint64_t bytes = 0;
  std::uint64_t pad_offset = 0;
  std::uint64_t pad_bytes = 0;
  std::uint64_t heap_offset = 0;  ///< of `base` in the heap: the same on every PE
  bool released = false;          ///< torch's deleter ran here (guarded by the table's mutex)
};

/// The handle symm_mem.rendezvous returns: one allocation over one group (a team of this
/// runtime's PEs). Ranks are the group's; peers this process maps have buffer and signal pad
/// pointers, the others 0 (docs/api.md).
class HpsSymmetricMemory final : public c10d::symmetric_memory::SymmetricMemory {
 public:
  HpsSymmetricMemory(std::shared_ptr<SymmBlock> block, TeamHandle team, std::vector<int> pes,
                     int rank, c10::Device device, std::vector<void*> buffers,
                     std::vector<void*> pads);

  std::vector<void*> get_buffer_ptrs() override { return buffers_; }
  std::vector<void*> get_signal_pad_ptrs() override { return pads_; }
  // Host arrays: the peers' addresses are host addresses on the host backend.
  void** get_buffer_ptrs_dev() override { return buffers_.data(); }
  void** get_signal_pad_ptrs_dev() override { return pads_.data(); }
  size_t get_buffer_size() override { return block_->bytes; }
  size_t get_offset() override { return 0; }
  bool has_multicast_support() override { return false; }
  void* get_multicast_ptr() override { return nullptr; }
  void barrier(int channel, size_t timeout_ms) override;
  void put_signal(int dst_rank, int channel, size_t timeout_ms) override;
  void wait_signal(int src_rank, int channel, size_t timeout_ms) override;
  int get_rank() override { return rank_; }
  int get_world_size() override { return static_cast<int>(pes_.size()); }
  c10::Device get_device() override { return device_; }
  const std::vector<int>& get_rank_to_global_rank() override { return pes_; }
  int* get_rank_to_global_rank_dev() override { return pes_.data(); }
  bool world_within_direct_access() override;

  const SymmBlock& block() const { return *block_; }
  const TeamHandle& team() const { return team_; }
  /// The world PE of group rank `rank`.
  int pe(int rank) const { return pes_[static_cast<std::size_t>(rank)]; }

 private:
  // The signal word of (`channel`, `rank`) in this allocation's pad, as a symmetric view.
  SymmetricView Slot(std::string_view operation, int channel, int rank) const;

  std::shared_ptr<SymmBlock> block_;
  TeamHandle team_;
  std::vector<int> pes_;
  int rank_;
  c10::Device device_;
  std::vector<void*> buffers_;
  std::vector<void*> pads_;
};

/// A torch process group as this runtime sees it: its team, its ranks' world PEs, and this
/// process's rank in it.
struct SymmGroup {
  TeamHandle team = kWorldTeam;
  std::vector<int> pes;
  int rank = -1;
  int world() const { return static_cast<int>(pes.size()); }
};

/// The group torch names `group_name` (None: the WORLD). The first use of a subgroup's name
/// makes its team: collective over the group's members.
SymmGroup GroupNamed(std::string_view operation, const std::optional<std::string>& group_name);

/// Where symm_mem's transfers go: the calling thread on the CPU (the host backend's default
/// stream, which runs them before returning), torch's current stream on the NPU (the stream the
/// framework's own kernels and the barriers are enqueued on).
StreamRef StreamFor(const c10::Device& device);

/// Makes the host wait until the device's current stream ran what was enqueued (nothing to
/// wait for on the CPU): before the host reads what a get brought, and before an operator
/// returns.
void Synchronize(const c10::Device& device);

/// Runs `work` without the GIL where the caller holds it (torch's bindings may or may not).
template <typename Work>
auto WithoutGil(Work&& work) -> decltype(work()) {
  if (PyGILState_Check() != 0) {
    pybind11::gil_scoped_release no_gil;
    return work();
  }
  return work();
}

/// Registers the operators' kernels (symm_mem_ops.cc) for the NPU dispatch key, each only where
/// no kernel is registered for it yet (torch_npu's own stay its); once per process, once
/// torch_npu is loaded. Returns the operators it registered.
std::vector<std::string> RegisterNpuKernels();

}  // namespace hyper_parallel::shmem::binding
