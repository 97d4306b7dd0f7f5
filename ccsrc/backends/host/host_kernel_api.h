// HostKernelApi: the kernel-side data-plane API (data_plane/kernel_api.h) on the host backend's
// device surface: blocks are memcpy into a peer's mapping, counters are seq_cst atomics followed
// by the owner's doorbell, waits follow the wait policy and give up when a peer is lost. One
// instance per launched kernel, on the thread that runs it (`kSite`: the caller's default
// stream, or a stream executor).
#pragma once

#include "backends/host/host_device.h"
#include "data_plane/kernel_api.h"

namespace hyper_parallel::shmem::host {

template <CallSite kSite>
class HostKernelApi final : public data_plane::KernelApi {
 public:
  HostKernelApi(const HostDevice& device, const HostStream* stream)
      : device_(device), stream_(stream) {}

  int rank() const override { return device_.rank(); }
  int size() const override { return device_.size(); }
  std::byte* Local(std::uint64_t offset) const override {
    return device_.heap(device_.rank()) + offset;
  }
  void PutBlock(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes) override {
    if (bytes > 0) device_.Copy<kSite>(device_.heap(pe) + offset, source, bytes);
  }
  void AddCounter(int pe, std::uint64_t offset, std::int64_t value) override {
    device_.AddCounter<kSite>(pe, offset, value);
  }
  Status WaitCounter(std::uint64_t offset, std::int64_t target, std::string_view what) override {
    return device_.WaitCounter<kSite>(offset, target, what, stream_);
  }
  std::int64_t ReadCounter(std::uint64_t offset) const override {
    return device_.ReadCounter(device_.rank(), offset);
  }

 private:
  const HostDevice& device_;
  const HostStream* stream_;
};

}  // namespace hyper_parallel::shmem::host
