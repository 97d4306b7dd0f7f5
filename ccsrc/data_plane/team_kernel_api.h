// TeamKernelApi: the kernel-side API (kernel_api.h) as a kernel launched over a team sees it
// (docs/teams.md): rank() is this PE's team PE, size() the team's size, and every PE argument
// is a team PE, translated to its world PE number before the backend's API gets it. Offsets,
// counters and waits are unchanged: a kernel written for the world runs over any team.
//
// Thread-safety: as KernelApi (one kernel at a time); the group is immutable.
#pragma once

#include <vector>

#include "data_plane/collective.h"
#include "data_plane/kernel_api.h"

namespace hyper_parallel::shmem::data_plane {

class TeamKernelApi final : public KernelApi {
 public:
  /// `inner` (the backend's API, in world numbering) and `group` outlive this.
  TeamKernelApi(KernelApi& inner, const CollectiveGroup& group) : inner_(inner), group_(group) {}

  int rank() const override { return group_.index; }
  int size() const override { return group_.size(); }
  int HostOf(int pe) const override { return inner_.HostOf(group_.pe(pe)); }
  std::byte* Local(std::uint64_t offset) const override { return inner_.Local(offset); }
  bool HostAddressable() const override { return inner_.HostAddressable(); }
  Status ReadLocal(void* destination, std::uint64_t offset, std::uint64_t bytes) override {
    return inner_.ReadLocal(destination, offset, bytes);
  }
  bool ComputesElementwise() const override { return inner_.ComputesElementwise(); }
  Status Elementwise(const ElementwiseStep& step) override { return inner_.Elementwise(step); }
  void PutBlock(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes) override {
    inner_.PutBlock(group_.pe(pe), offset, source, bytes);
  }
  void AddCounter(int pe, std::uint64_t offset, std::int64_t value) override {
    inner_.AddCounter(group_.pe(pe), offset, value);
  }
  Status WaitCounter(std::uint64_t offset, std::int64_t target, std::string_view what) override {
    return inner_.WaitCounter(offset, target, what);
  }
  void PutBlocks(std::span<const BlockPut> puts) override {
    std::vector<BlockPut> world(puts.begin(), puts.end());
    for (BlockPut& put : world) put.pe = group_.pe(put.pe);
    inner_.PutBlocks(world);
  }
  void PutBlocksSignalled(std::span<const SignalledPut> puts) override {
    std::vector<SignalledPut> world(puts.begin(), puts.end());
    for (SignalledPut& put : world) put.pe = group_.pe(put.pe);
    inner_.PutBlocksSignalled(world);
  }
  void PublishEpoch(int pe, int slot, std::uint64_t epoch) override {
    inner_.PublishEpoch(group_.pe(pe), slot, epoch);
  }
  void PutBlocksAndPublish(std::span<const BlockPut> puts, std::span<const int> peers, int slot,
                           std::uint64_t epoch) override {
    std::vector<BlockPut> world(puts.begin(), puts.end());
    for (BlockPut& put : world) put.pe = group_.pe(put.pe);
    std::vector<int> world_peers(peers.begin(), peers.end());
    for (int& pe : world_peers) pe = group_.pe(pe);
    inner_.PutBlocksAndPublish(world, world_peers, slot, epoch);
  }
  Status WaitEpochs(int slot, std::uint64_t epoch, std::span<const int> sources,
                    std::string_view operation, std::string_view waiting_for) override {
    std::vector<int> world(sources.begin(), sources.end());
    for (int& pe : world) pe = group_.pe(pe);
    return inner_.WaitEpochs(slot, epoch, world, operation, waiting_for);
  }
  int RoundWords() const override { return inner_.RoundWords(); }
  void PutBlocksAndSetRound(std::span<const BlockPut> puts, int pe, int slot, int word,
                            std::uint64_t value) override {
    std::vector<BlockPut> world(puts.begin(), puts.end());
    for (BlockPut& put : world) put.pe = group_.pe(put.pe);
    inner_.PutBlocksAndSetRound(world, group_.pe(pe), slot, word, value);
  }
  Status WaitRound(int slot, int word, std::uint64_t value, int source,
                   std::string_view operation, std::string_view waiting_for) override {
    return inner_.WaitRound(slot, word, value, group_.pe(source), operation, waiting_for);
  }

 private:
  KernelApi& inner_;
  const CollectiveGroup& group_;
};

}  // namespace hyper_parallel::shmem::data_plane
