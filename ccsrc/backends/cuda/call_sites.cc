#include "backends/cuda/call_sites.h"

#include <string>

namespace hyper_parallel::shmem::cuda {
namespace {

class Checked final : public CudaApi {
 public:
  explicit Checked(std::unique_ptr<CudaApi> inner) : inner_(std::move(inner)) {}

  std::string_view name() const override { return inner_->name(); }
  bool HostAddressableMemory() const override { return inner_->HostAddressableMemory(); }

  Status GetDevice(int* device) const override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kGetDevice));
    return inner_->GetDevice(device);
  }
  Status SetDevice(int device) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kSetDevice));
    return inner_->SetDevice(device);
  }
  Status DeviceUuid(int device, std::string* uuid) const override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kDeviceUuid));
    return inner_->DeviceUuid(device, uuid);
  }
  Status LoadKernels() override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kLoadKernels));
    return inner_->LoadKernels();
  }
  Status Malloc(std::size_t bytes, void** ptr) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kMalloc));
    return inner_->Malloc(bytes, ptr);
  }
  Status Free(void* ptr) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kFree));
    return inner_->Free(ptr);
  }
  Status MallocHost(std::size_t bytes, void** ptr) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kMallocHost));
    return inner_->MallocHost(bytes, ptr);
  }
  Status FreeHost(void* ptr) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kFreeHost));
    return inner_->FreeHost(ptr);
  }
  Status IpcExport(void* ptr, std::string* handle) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kIpcExport));
    return inner_->IpcExport(ptr, handle);
  }
  Status IpcOpen(const std::string& handle, void** ptr) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kIpcOpen));
    return inner_->IpcOpen(handle, ptr);
  }
  Status IpcClose(void* ptr) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kIpcClose));
    return inner_->IpcClose(ptr);
  }
  Status StreamCreate(void** stream) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kStreamCreate));
    return inner_->StreamCreate(stream);
  }
  Status StreamDestroy(void* stream) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kStreamDestroy));
    return inner_->StreamDestroy(stream);
  }
  Status StreamSynchronize(void* stream) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kStreamSynchronize));
    return inner_->StreamSynchronize(stream);
  }
  Status MemcpyAsync(void* dst, const void* src, std::size_t bytes, void* stream) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kMemcpyAsync));
    return inner_->MemcpyAsync(dst, src, bytes, stream);
  }
  Status CopyBlocksAsync(void* stream, const CopyBlock* blocks, std::size_t count) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kCopyBlocksAsync));
    return inner_->CopyBlocksAsync(stream, blocks, count);
  }
  Status CopyBlocksAndAddAsync(void* stream, const SignalledCopyBlock* blocks,
                               std::size_t count) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kCopyBlocksAndAddAsync));
    return inner_->CopyBlocksAndAddAsync(stream, blocks, count);
  }
  Status WriteValue64(void* stream, void* address, std::int64_t value) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kWriteValue64));
    return inner_->WriteValue64(stream, address, value);
  }
  Status AddValue64(void* stream, void* address, std::int64_t value) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kAddValue64));
    return inner_->AddValue64(stream, address, value);
  }
  Status WaitValue64(void* stream, const void* address, WaitComparison comparison,
                     std::int64_t value, std::uint64_t timeout_ns, WaitReport* report) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kWaitValue64));
    return inner_->WaitValue64(stream, address, comparison, value, timeout_ns, report);
  }
  Status ElementwiseAsync(void* stream, const data_plane::ElementwiseStep& step) override {
    HPS_RETURN_IF_ERROR(Check(CudaCall::kElementwiseAsync));
    return inner_->ElementwiseAsync(stream, step);
  }

 private:
  static Status Check(CudaCall call) { return CheckCudaCall(call, CurrentCallSite()); }

  std::unique_ptr<CudaApi> inner_;
};

}  // namespace

Status CheckCudaCall(CudaCall call, CallSite site) {
  if (IsCallable(call, site)) return Status::Ok();
  return Status::Assertion(ErrorCode::kUnsupportedCapability, "CUDA call is not callable here",
                           {{"call", std::string(kCudaCallRules[static_cast<int>(call)].name)},
                            {"context", std::string(CallSiteName(site))}});
}

std::unique_ptr<CudaApi> CheckedCudaApi(std::unique_ptr<CudaApi> inner) {
  return std::make_unique<Checked>(std::move(inner));
}

}  // namespace hyper_parallel::shmem::cuda
