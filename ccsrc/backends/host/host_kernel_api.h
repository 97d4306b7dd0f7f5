// HostKernelApi: the kernel-side data-plane API (data_plane/kernel_api.h) on the host backend's
// device surface: blocks are memcpy into a peer's mapping (a batch spread over the copy
// workers), counters are seq_cst atomics followed by the owner's doorbell, epochs go to the
// owner's control block, waits follow the wait policy and give up when a peer is lost. One
// instance per launched kernel, on the thread that runs it (`kSite`: the caller's default
// stream, or a stream executor).
#pragma once

#include <vector>

#include "backends/host/host_device.h"
#include "data_plane/block_runs.h"
#include "data_plane/kernel_api.h"
#include "data_plane/partition.h"

namespace hyper_parallel::shmem::host {

template <CallSite kSite>
class HostKernelApi final : public data_plane::KernelApi {
 public:
  HostKernelApi(const HostDevice& device, const HostStream* stream)
      : device_(device), stream_(stream) {}

  int rank() const override { return device_.rank(); }
  int size() const override { return device_.size(); }
  int HostOf(int pe) const override { return device_.HostOf(pe); }
  std::byte* Local(std::uint64_t offset) const override {
    return device_.heap(device_.rank()) + offset;
  }
  bool HostAddressable() const override { return true; }
  void PutBlock(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes) override {
    if (bytes > 0) device_.PutTo<kSite>(pe, offset, source, bytes);
  }
  void AddCounter(int pe, std::uint64_t offset, std::int64_t value) override {
    device_.AddCounter<kSite>(pe, offset, value);
  }
  Status WaitCounter(std::uint64_t offset, std::int64_t target, std::string_view what) override {
    return device_.WaitCounter<kSite>(offset, target, what, stream_);
  }
  void PutBlocks(std::span<const data_plane::BlockPut> puts) override {
    PutBlocks(puts, Audience::kAnyone);
  }
  void PutBlocks(std::span<const data_plane::BlockPut> puts, Audience audience) {
    const int workers = device_.workers();
    if (workers <= 1 || puts.size() <= 1) {
      for (const data_plane::BlockPut& put : puts) {
        if (put.bytes > 0) device_.PutTo<kSite>(put.pe, put.offset, put.source, put.bytes, audience);
      }
      return;
    }
    // Contiguous runs per worker: a caller that orders its batch source-major keeps a source
    // block in one worker's cache while it goes to every PE.
    device_.RunParallel([&](int worker) {
      const data_plane::Range range = data_plane::PartitionRange(puts.size(), workers, worker);
      for (std::uint64_t i = range.begin; i < range.end; ++i) {
        const data_plane::BlockPut& put = puts[i];
        if (put.bytes > 0) {
          device_.PutTo<kSite>(put.pe, put.offset, put.source, put.bytes, audience);
        }
      }
    });
  }
  void PublishEpoch(int pe, int slot, std::uint64_t epoch) override {
    device_.Publish<kSite>(pe, slot, epoch);
  }
  // To a PE on another host, each block and its counter addition is one message; those are
  // begun first, in the batch's order (which each PE's messages keep), without waiting for
  // each, and the blocks to this host's PEs are copied while they travel.
  void PutBlocksSignalled(std::span<const data_plane::SignalledPut> puts) override {
    Outbound outbound;
    if (device_.HasRemote()) {
      for (const data_plane::SignalledPut& put : puts) {
        if (!device_.IsRemote(put.pe)) continue;
        device_.BeginRemote<kSite>(
            &outbound, put.pe, put.offset, put.source, put.bytes,
            RemoteSignal{put.counter_offset, 8, SignalAction::kAdd, put.add}, Audience::kAnyone);
      }
    }
    for (const data_plane::SignalledPut& put : puts) {
      if (device_.IsRemote(put.pe)) continue;
      device_.PutThenAdd<kSite>(put.pe, put.offset, put.source, put.bytes, put.counter_offset,
                                put.add);
    }
    if (device_.HasRemote()) device_.FinishRemote<kSite>(&outbound);
  }
  // To a PE on another host, blocks that continue each other (the chunks of one block, cut
  // for the copy workers) go as one message: the network takes a large message at its own
  // pace, while chunks sent one after another each wait for their rendezvous. The last
  // message of the batch to that PE carries the epoch; every other goes first, so the epoch
  // still lands after all of them. The messages to other hosts are begun first, in the
  // batch's order (a collective's pairwise order), at most Outbound::kMaxInFlight at a time;
  // the copies to this host's PEs run while they travel, then this waits for the messages.
  void PutBlocksAndPublish(std::span<const data_plane::BlockPut> batch,
                           std::span<const int> peers, int slot, std::uint64_t epoch) override {
    if (!device_.HasRemote()) {
      PutBlocks(batch);
      for (int pe : peers) PublishEpoch(pe, slot, epoch);
      return;
    }
    const std::vector<data_plane::BlockPut> puts = data_plane::MergeContinuingBlocks(
        batch, device_.size(), [this](int pe) { return device_.IsRemote(pe); });
    // By world PE: whether it is a remote peer to publish to, and its last block (the one
    // that carries the epoch; puts.size(): none).
    std::vector<bool> remote_peer(static_cast<std::size_t>(device_.size()), false);
    for (int pe : peers) remote_peer[pe] = device_.IsRemote(pe);
    std::vector<std::size_t> carrier(static_cast<std::size_t>(device_.size()), puts.size());
    for (std::size_t i = 0; i < puts.size(); ++i) {
      if (remote_peer[puts[i].pe] && puts[i].bytes > 0) carrier[puts[i].pe] = i;
    }
    Outbound outbound;
    std::vector<data_plane::BlockPut> local;
    local.reserve(puts.size());
    for (std::size_t i = 0; i < puts.size(); ++i) {
      const data_plane::BlockPut& put = puts[i];
      if (!device_.IsRemote(put.pe)) {
        local.push_back(put);
      } else if (put.bytes > 0) {
        device_.BeginRemote<kSite>(&outbound, put.pe, put.offset, put.source, put.bytes,
                                   carrier[put.pe] == i ? device_.ArrivalSignal(slot, epoch)
                                                        : RemoteSignal{},
                                   Audience::kTarget);
      }
    }
    for (int pe : peers) {
      if (remote_peer[pe] && carrier[pe] == puts.size()) {
        device_.BeginRemote<kSite>(&outbound, pe, 0, nullptr, 0,
                                   device_.ArrivalSignal(slot, epoch), Audience::kTarget);
      }
    }
    PutBlocks(local, Audience::kTarget);
    for (int pe : peers) {
      if (!remote_peer[pe]) PublishEpoch(pe, slot, epoch);
    }
    device_.FinishRemote<kSite>(&outbound);
  }
  int RoundWords() const override { return device_.RoundWords(); }
  // Every block but the last continuing run goes first; the last carries the word (one
  // message to a PE on another host).
  void PutBlocksAndSetRound(std::span<const data_plane::BlockPut> batch, int pe, int slot,
                            int word, std::uint64_t value) override {
    std::vector<data_plane::BlockPut> puts = data_plane::MergeContinuingBlocks(
        batch, device_.size(), [this](int peer) { return device_.IsRemote(peer); });
    while (!puts.empty() && puts.back().bytes == 0) puts.pop_back();
    if (puts.empty()) {
      device_.PutThenSetRound<kSite>(pe, 0, nullptr, 0, slot, word, value);
      return;
    }
    const data_plane::BlockPut last = puts.back();
    puts.pop_back();
    PutBlocks(puts, Audience::kTarget);
    device_.PutThenSetRound<kSite>(pe, last.offset, last.source, last.bytes, slot, word, value);
  }
  Status WaitRound(int slot, int word, std::uint64_t value, int source,
                   std::string_view operation, std::string_view waiting_for) override {
    return device_.WaitRound<kSite>(slot, word, value, source, operation, waiting_for, stream_);
  }
  Status WaitEpochs(int slot, std::uint64_t epoch, std::span<const int> sources,
                    std::string_view operation, std::string_view waiting_for) override {
    return device_.WaitAll<kSite>(slot, epoch, std::vector<int>(sources.begin(), sources.end()),
                                  operation, waiting_for, stream_);
  }

 private:
  const HostDevice& device_;
  const HostStream* stream_;
};

}  // namespace hyper_parallel::shmem::host
