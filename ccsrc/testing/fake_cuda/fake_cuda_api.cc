#include "testing/fake_cuda/fake_cuda_api.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "data_plane/comparison.h"
#include "ops/reduce/element.h"

namespace hyper_parallel::shmem::cuda {
namespace {

// The wire form of a fake IPC handle: as long as a cudaIpcMemHandle_t.
struct HandleBytes {
  char magic[8];
  std::int32_t pid;
  std::int32_t fd;
  std::uint64_t bytes;
  std::uint64_t inode;  // tells the memfd from a later file that reuses its descriptor number
  char reserved[32];
};
static_assert(sizeof(HandleBytes) == 64, "a fake IPC handle is as long as a CUDA one");
constexpr char kHandleMagic[8] = {'H', 'P', 'S', 'F', 'C', 'U', 'D', 'A'};

constexpr std::size_t kHostAlignment = 4096;
constexpr int kSpinsBeforeSleeping = 64;
constexpr std::chrono::microseconds kPollSleep{50};

// The failure the real runtime would give, in its words.
std::atomic<int> freed_allocations{0};  // FreedAllocations

Status Failed(std::string_view call, std::string_view error, std::string_view message) {
  return Status::Assertion(ErrorCode::kBackendError, "CUDA call failed",
                           {{"call", std::string(call)},
                            {"error", std::string(error)},
                            {"message", std::string(message)}});
}

Status InvalidValue(std::string_view call) {
  return Failed(call, "cudaErrorInvalidValue", "invalid argument");
}

Status InvalidHandle(std::string_view call) {
  return Failed(call, "cudaErrorInvalidResourceHandle", "invalid resource handle");
}

Status SystemFailed(std::string_view call, std::string_view error, int errnum) {
  return Failed(call, error, std::strerror(errnum));
}

std::string_view ComparisonName(WaitComparison comparison) {
  switch (comparison) {
    case WaitComparison::kEq: return "eq";
    case WaitComparison::kNe: return "ne";
    case WaitComparison::kGt: return "gt";
    case WaitComparison::kGe: return "ge";
    case WaitComparison::kLt: return "lt";
    case WaitComparison::kLe: return "le";
  }
  return "unknown";
}

std::atomic_ref<std::int64_t> Word(const void* address) {
  // The fake's words are plain host memory; a wait only loads.
  return std::atomic_ref<std::int64_t>(*static_cast<std::int64_t*>(const_cast<void*>(address)));
}

}  // namespace

FakeCudaApi::FakeCudaApi(int device_count) : device_count_(std::max(device_count, 1)) {}

FakeCudaApi::~FakeCudaApi() {
  for (const auto& [address, memory] : allocations_) {
    munmap(address, memory.bytes);
    close(memory.fd);
  }
  for (const auto& [address, memory] : opened_) {
    munmap(address, memory.bytes);
    close(memory.fd);
  }
  for (void* address : host_) std::free(address);
}

Status FakeCudaApi::Enter(std::string_view call, std::string entry) const {
  calls_.push_back(std::move(entry));
  const auto queued = failures_.find(call);
  if (queued == failures_.end()) return Status::Ok();
  Status failure = std::move(queued->second.front());
  queued->second.pop_front();
  if (queued->second.empty()) failures_.erase(queued);
  return failure;
}

Status FakeCudaApi::CheckStream(std::string_view cuda_call, void* stream) const {
  // As in CUDA: the null stream, cudaStreamLegacy (0x1) and cudaStreamPerThread (0x2) always
  // exist.
  const auto handle = reinterpret_cast<std::uintptr_t>(stream);
  if (handle <= 2 || streams_.count(stream) != 0) return Status::Ok();
  return InvalidHandle(cuda_call);
}

Status FakeCudaApi::CheckWord(std::string_view cuda_call, const void* address) const {
  if (address == nullptr || reinterpret_cast<std::uintptr_t>(address) % 8 != 0) {
    return InvalidValue(cuda_call);
  }
  return Status::Ok();
}

int& FakeCudaApi::CurrentDevice() const {
  return current_device_.try_emplace(std::this_thread::get_id(), 0).first->second;
}

// ---- device -----------------------------------------------------------------------------

Status FakeCudaApi::GetDevice(int* device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("GetDevice", "GetDevice"));
  *device = CurrentDevice();
  return Status::Ok();
}

Status FakeCudaApi::SetDevice(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("SetDevice", "SetDevice device=" + std::to_string(device)));
  if (device < 0 || device >= device_count_) {
    return Failed("cudaSetDevice", "cudaErrorInvalidDevice", "invalid device ordinal");
  }
  CurrentDevice() = device;
  return Status::Ok();
}

Status FakeCudaApi::DeviceUuid(int device, std::string* uuid) const {
  std::lock_guard<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("DeviceUuid", "DeviceUuid device=" + std::to_string(device)));
  if (device < 0 || device >= device_count_) {
    return Failed("cudaGetDeviceProperties", "cudaErrorInvalidDevice", "invalid device ordinal");
  }
  char text[33];
  std::snprintf(text, sizeof text, "facec0da%024llx", static_cast<unsigned long long>(device));
  *uuid = text;
  return Status::Ok();
}

void FakeCudaApi::DriftCurrentDevice(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  CurrentDevice() = device;
}

// ---- memory -----------------------------------------------------------------------------

Status FakeCudaApi::Malloc(std::size_t bytes, void** ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("Malloc", "Malloc bytes=" + std::to_string(bytes)));
  *ptr = nullptr;
  if (bytes == 0) return Status::Ok();  // cudaMalloc of 0 bytes: success, null
  const int fd = memfd_create("hps_fake_cuda", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return SystemFailed("cudaMalloc", "cudaErrorMemoryAllocation", errno);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int errnum = errno;
    close(fd);
    return SystemFailed("cudaMalloc", "cudaErrorMemoryAllocation", errnum);
  }
  void* address = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (address == MAP_FAILED) {
    const int errnum = errno;
    close(fd);
    return SystemFailed("cudaMalloc", "cudaErrorMemoryAllocation", errnum);
  }
  allocations_[address] = Memory{bytes, fd};
  *ptr = address;
  return Status::Ok();
}

Status FakeCudaApi::Free(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("Free", "Free ptr=" + Hex(ptr)));
  if (ptr == nullptr) return Status::Ok();  // cudaFree(nullptr) does nothing
  const auto found = allocations_.find(ptr);
  if (found == allocations_.end()) return InvalidValue("cudaFree");
  // Every IpcOpen of it holds a shared lock on its memory while mapped (in any process): memory
  // still open elsewhere is refused, where CUDA leaves freeing it undefined.
  if (flock(found->second.fd, LOCK_EX | LOCK_NB) != 0) {
    return Failed("cudaFree", "freed while open elsewhere",
                  "another mapping (IpcOpen) of this memory is still open: undefined in CUDA");
  }
  munmap(found->first, found->second.bytes);
  close(found->second.fd);
  allocations_.erase(found);
  freed_allocations.fetch_add(1);
  return Status::Ok();
}

Status FakeCudaApi::MallocHost(std::size_t bytes, void** ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("MallocHost", "MallocHost bytes=" + std::to_string(bytes)));
  *ptr = nullptr;
  if (bytes == 0) return Status::Ok();
  const std::size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void* address = std::aligned_alloc(kHostAlignment, rounded);
  if (address == nullptr) {
    return Failed("cudaHostAlloc", "cudaErrorMemoryAllocation", "out of memory");
  }
  host_.insert(address);
  *ptr = address;
  return Status::Ok();
}

Status FakeCudaApi::FreeHost(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("FreeHost", "FreeHost ptr=" + Hex(ptr)));
  if (ptr == nullptr) return Status::Ok();
  if (host_.erase(ptr) == 0) return InvalidValue("cudaFreeHost");
  std::free(ptr);
  return Status::Ok();
}

Status FakeCudaApi::IpcExport(void* ptr, std::string* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("IpcExport", "IpcExport ptr=" + Hex(ptr)));
  // Like cudaIpcGetMemHandle, any address inside an allocation exports the whole allocation.
  auto found = allocations_.upper_bound(ptr);
  if (found == allocations_.begin()) return InvalidValue("cudaIpcGetMemHandle");
  --found;
  const auto offset = static_cast<std::size_t>(static_cast<char*>(ptr) -
                                               static_cast<char*>(found->first));
  if (offset >= found->second.bytes) return InvalidValue("cudaIpcGetMemHandle");
  HandleBytes bytes{};
  std::memcpy(bytes.magic, kHandleMagic, sizeof bytes.magic);
  bytes.pid = static_cast<std::int32_t>(getpid());
  bytes.fd = found->second.fd;
  bytes.bytes = found->second.bytes;
  struct stat status {};
  if (fstat(found->second.fd, &status) != 0) {
    return SystemFailed("cudaIpcGetMemHandle", "cudaErrorInvalidValue", errno);
  }
  bytes.inode = static_cast<std::uint64_t>(status.st_ino);
  handle->assign(reinterpret_cast<const char*>(&bytes), sizeof bytes);
  return Status::Ok();
}

Status FakeCudaApi::IpcOpen(const std::string& handle, void** ptr) {
  HandleBytes bytes{};
  const bool well_formed = handle.size() == sizeof bytes;
  if (well_formed) std::memcpy(&bytes, handle.data(), sizeof bytes);
  const bool ours = well_formed && std::memcmp(bytes.magic, kHandleMagic, sizeof kHandleMagic) == 0;

  std::lock_guard<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("IpcOpen", ours ? "IpcOpen pid=" + std::to_string(bytes.pid) +
                                                  " bytes=" + std::to_string(bytes.bytes)
                                            : "IpcOpen malformed"));
  *ptr = nullptr;
  if (!ours || bytes.bytes == 0) return InvalidHandle("cudaIpcOpenMemHandle");
  const std::string path =
      "/proc/" + std::to_string(bytes.pid) + "/fd/" + std::to_string(bytes.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return SystemFailed("cudaIpcOpenMemHandle", "cudaErrorInvalidResourceHandle", errno);
  struct stat status {};
  if (fstat(fd, &status) != 0 || static_cast<std::uint64_t>(status.st_ino) != bytes.inode ||
      static_cast<std::uint64_t>(status.st_size) < bytes.bytes) {
    close(fd);
    return InvalidHandle("cudaIpcOpenMemHandle");
  }
  void* address = mmap(nullptr, bytes.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int errnum = errno;
  if (address == MAP_FAILED) {
    close(fd);
    return SystemFailed("cudaIpcOpenMemHandle", "cudaErrorMapBufferObjectFailed", errnum);
  }
  // Held while mapped: the exporter's Free checks that no mapping is left (its lifetime check).
  if (flock(fd, LOCK_SH) != 0) {
    const int lock_errnum = errno;
    munmap(address, bytes.bytes);
    close(fd);
    return SystemFailed("cudaIpcOpenMemHandle", "cudaErrorMapBufferObjectFailed", lock_errnum);
  }
  opened_[address] = Memory{static_cast<std::size_t>(bytes.bytes), fd};
  *ptr = address;
  return Status::Ok();
}

Status FakeCudaApi::IpcClose(void* ptr) {
  std::chrono::milliseconds delay{0};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::swap(delay, ipc_close_delay_);
  }
  std::this_thread::sleep_for(delay);  // a PE slow to close (DelayNextIpcClose)
  std::lock_guard<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("IpcClose", "IpcClose ptr=" + Hex(ptr)));
  const auto found = opened_.find(ptr);
  if (found == opened_.end()) return InvalidValue("cudaIpcCloseMemHandle");
  munmap(found->first, found->second.bytes);
  close(found->second.fd);  // and its lock
  opened_.erase(found);
  return Status::Ok();
}

// ---- streams ----------------------------------------------------------------------------

Status FakeCudaApi::StreamCreate(void** stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("StreamCreate", "StreamCreate"));
  *stream = reinterpret_cast<void*>(next_stream_++);
  streams_.insert(*stream);
  return Status::Ok();
}

Status FakeCudaApi::StreamDestroy(void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("StreamDestroy", "StreamDestroy stream=" + Hex(stream)));
  if (streams_.erase(stream) == 0) return InvalidHandle("cudaStreamDestroy");
  return Status::Ok();
}

Status FakeCudaApi::StreamSynchronize(void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("StreamSynchronize", "StreamSynchronize stream=" + Hex(stream)));
  return CheckStream("cudaStreamSynchronize", stream);
}

Status FakeCudaApi::MemcpyAsync(void* dst, const void* src, std::size_t bytes, void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("MemcpyAsync", "MemcpyAsync bytes=" + std::to_string(bytes)));
  HPS_RETURN_IF_ERROR(CheckStream("cudaMemcpyAsync", stream));
  if (bytes == 0) return Status::Ok();
  if (dst == nullptr || src == nullptr) return InvalidValue("cudaMemcpyAsync");
  std::memmove(dst, src, bytes);
  return Status::Ok();
}

namespace {

// Whether the real kernels could copy `blocks` concurrently with an order-independent result:
// no null pointer in a non-empty block, and no destination overlapping another block's bytes
// (a destination may be its own identical source). Half-open byte ranges.
bool ConcurrentlyCopyable(const CopyBlock* blocks, std::size_t count) {
  struct Range {
    std::uintptr_t begin, end;
    std::size_t block;
    bool destination;
  };
  std::vector<Range> ranges;
  for (std::size_t i = 0; i < count; ++i) {
    const CopyBlock& block = blocks[i];
    if (block.bytes == 0) continue;
    if (block.dst == nullptr || block.src == nullptr) return false;
    const auto dst = reinterpret_cast<std::uintptr_t>(block.dst);
    const auto src = reinterpret_cast<std::uintptr_t>(block.src);
    ranges.push_back({dst, dst + block.bytes, i, true});
    if (src != dst) ranges.push_back({src, src + block.bytes, i, false});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  // Sources may overlap sources; a destination may overlap nothing but its own identical source.
  std::uintptr_t source_end = 0, destination_end = 0;
  for (const Range& range : ranges) {
    if (range.begin < destination_end || (range.destination && range.begin < source_end)) {
      return false;
    }
    (range.destination ? destination_end : source_end) =
        std::max(range.destination ? destination_end : source_end, range.end);
  }
  return true;
}

}  // namespace

Status FakeCudaApi::CopyBlocksAsync(void* stream, const CopyBlock* blocks, std::size_t count) {
  constexpr std::string_view kCall = "cudaLaunchKernelEx(CopyBlocks)";
  std::unique_lock<std::mutex> lock(mutex_);
  std::uint64_t total = 0;
  for (std::size_t i = 0; blocks != nullptr && i < count; ++i) total += blocks[i].bytes;
  HPS_RETURN_IF_ERROR(Enter("CopyBlocksAsync", "CopyBlocksAsync blocks=" + std::to_string(count) +
                                                   " bytes=" + std::to_string(total)));
  HPS_RETURN_IF_ERROR(CheckStream(kCall, stream));
  if (count > 0 && blocks == nullptr) return InvalidValue(kCall);
  // The real kernel copies the blocks concurrently: a batch whose result would depend on the
  // order is refused, so that tests over the fake catch it.
  if (!ConcurrentlyCopyable(blocks, count)) return InvalidValue(kCall);
  LoadOnFirstLaunch(lock, "CopyBlocks");
  for (std::size_t i = 0; i < count; ++i) {
    if (blocks[i].bytes > 0) std::memmove(blocks[i].dst, blocks[i].src, blocks[i].bytes);
  }
  return Status::Ok();
}

Status FakeCudaApi::CopyBlocksAndAddAsync(void* stream, const SignalledCopyBlock* blocks,
                                          std::size_t count) {
  constexpr std::string_view kCall = "cudaLaunchKernelEx(CopyBlocksAndAdd)";
  std::unique_lock<std::mutex> lock(mutex_);
  std::uint64_t total = 0;
  for (std::size_t i = 0; blocks != nullptr && i < count; ++i) total += blocks[i].bytes;
  HPS_RETURN_IF_ERROR(Enter("CopyBlocksAndAddAsync", "CopyBlocksAndAddAsync blocks=" +
                                                         std::to_string(count) +
                                                         " bytes=" + std::to_string(total)));
  HPS_RETURN_IF_ERROR(CheckStream(kCall, stream));
  if (count > 0 && blocks == nullptr) return InvalidValue(kCall);
  std::vector<CopyBlock> copies;
  copies.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    HPS_RETURN_IF_ERROR(CheckWord(kCall, blocks[i].counter));
    copies.push_back({blocks[i].dst, blocks[i].src, blocks[i].bytes});
  }
  if (!ConcurrentlyCopyable(copies.data(), copies.size())) return InvalidValue(kCall);
  LoadOnFirstLaunch(lock, "CopyBlocks");
  LoadOnFirstLaunch(lock, "AddValues");
  // Each block, then its addition (the real kernel: its thread block's bytes, then the add).
  for (std::size_t i = 0; i < count; ++i) {
    if (blocks[i].bytes > 0) std::memmove(blocks[i].dst, blocks[i].src, blocks[i].bytes);
    Word(blocks[i].counter).fetch_add(blocks[i].add, std::memory_order_seq_cst);
  }
  return Status::Ok();
}

Status FakeCudaApi::WriteValue64(void* stream, void* address, std::int64_t value) {
  std::unique_lock<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("WriteValue64", "WriteValue64 value=" + std::to_string(value)));
  HPS_RETURN_IF_ERROR(CheckStream("cuStreamWriteValue64", stream));
  HPS_RETURN_IF_ERROR(CheckWord("cuStreamWriteValue64", address));
  // As its store kernel, the real layer's way wherever the driver refuses the stream write.
  LoadOnFirstLaunch(lock, "WriteValue64");
  Word(address).store(value, std::memory_order_seq_cst);
  return Status::Ok();
}

Status FakeCudaApi::AddValue64(void* stream, void* address, std::int64_t value) {
  std::unique_lock<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("AddValue64", "AddValue64 value=" + std::to_string(value)));
  HPS_RETURN_IF_ERROR(CheckStream("cudaLaunchKernelEx(AddValue64)", stream));
  HPS_RETURN_IF_ERROR(CheckWord("cudaLaunchKernelEx(AddValue64)", address));
  LoadOnFirstLaunch(lock, "AddValue64");
  // Wrapping like the kernel's unsigned atomicAdd (a signed fetch_add wraps too, by definition).
  Word(address).fetch_add(value, std::memory_order_seq_cst);
  return Status::Ok();
}

Status FakeCudaApi::ElementwiseAsync(void* stream, const data_plane::ElementwiseStep& step) {
  constexpr std::string_view kCall = "cudaLaunchKernelEx(Elementwise)";
  std::unique_lock<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("ElementwiseAsync",
                            "ElementwiseAsync kind=" + std::to_string(static_cast<int>(step.kind)) +
                                " count=" + std::to_string(step.count)));
  HPS_RETURN_IF_ERROR(CheckStream(kCall, stream));
  using Kind = data_plane::ElementwiseStep::Kind;
  const std::uint64_t element = ops::ElementBytes(step.type);
  const std::uint64_t accumulator = ops::AccumulatorBytes(step.type);
  const auto aligned = [](const void* p, std::uint64_t to) {
    return reinterpret_cast<std::uintptr_t>(p) % to == 0;
  };
  const std::uint64_t in = step.kind == Kind::kWiden ? element : accumulator;
  const std::uint64_t out = step.kind == Kind::kNarrow ? element : accumulator;
  if (step.count > 0 &&
      (step.lower == nullptr || step.out == nullptr || !aligned(step.lower, in) ||
       !aligned(step.out, out) ||
       (step.kind == Kind::kCombine && (step.upper == nullptr || !aligned(step.upper, in))))) {
    return InvalidValue(kCall);
  }
  LoadOnFirstLaunch(lock, "Elementwise");
  ops::RunElementwise(step);
  return Status::Ok();
}

Status FakeCudaApi::WaitValue64(void* stream, const void* address, WaitComparison comparison,
                                std::int64_t value, std::uint64_t timeout_ns,
                                WaitReport* report) {
  constexpr std::string_view kCall = "cudaLaunchKernelEx(WaitValue64)";
  {
    std::unique_lock<std::mutex> lock(mutex_);
    HPS_RETURN_IF_ERROR(Enter("WaitValue64", "WaitValue64 comparison=" +
                                                 std::string(ComparisonName(comparison)) +
                                                 " value=" + std::to_string(value) +
                                                 " timeout_ns=" + std::to_string(timeout_ns)));
    HPS_RETURN_IF_ERROR(CheckStream(kCall, stream));
    HPS_RETURN_IF_ERROR(CheckWord(kCall, address));
    if (report == nullptr) return InvalidValue(kCall);
    LoadOnFirstLaunch(lock, "WaitValue64");
    ++waits_running_;
  }
  // However the poll below ends, this wait is no longer running.
  struct Running {
    FakeCudaApi* api;
    ~Running() {
      std::lock_guard<std::mutex> lock(api->mutex_);
      if (--api->waits_running_ == 0) api->waits_ended_.notify_all();
    }
  } running{this};
  // Other threads and processes write the word meanwhile: poll without the mutex.
  using Clock = std::chrono::steady_clock;
  // Capped at ~146 years so that the deadline cannot overflow the clock.
  const std::chrono::nanoseconds budget(static_cast<std::int64_t>(
      std::min<std::uint64_t>(timeout_ns, std::numeric_limits<std::int64_t>::max() / 2)));
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(budget);
  const std::atomic_ref<std::int64_t> word = Word(address);
  const std::atomic_ref<std::uint64_t> finished(report->finished);
  for (int polls = 0;; ++polls) {
    const std::int64_t observed = word.load(std::memory_order_seq_cst);
    if (data_plane::Satisfies(observed, comparison, value)) {
      finished.store(1, std::memory_order_release);
      return Status::Ok();
    }
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      report->observed = observed;
      report->timed_out = 1;
      finished.store(1, std::memory_order_release);
      return Status::Ok();
    }
    if (polls < kSpinsBeforeSleeping) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::min<Clock::duration>(kPollSleep, deadline - now));
    }
  }
}

Status FakeCudaApi::LoadKernels() {
  std::lock_guard<std::mutex> lock(mutex_);
  HPS_RETURN_IF_ERROR(Enter("LoadKernels", "LoadKernels"));
  for (const char* kernel : {"CopyBlocks", "AddValues", "WriteValue64", "AddValue64",
                             "WaitValue64", "Elementwise"}) {
    loaded_.emplace(kernel);
  }
  return Status::Ok();
}

void FakeCudaApi::LoadOnFirstLaunch(std::unique_lock<std::mutex>& lock, std::string_view kernel) {
  if (loaded_.find(kernel) != loaded_.end()) return;
  if (first_launch_synchronises_) {
    waits_ended_.wait(lock, [this] { return waits_running_ == 0; });
  }
  loaded_.emplace(kernel);
}

// ---- test hooks -------------------------------------------------------------------------

int FakeCudaApi::FreedAllocations() { return freed_allocations.load(); }

void FakeCudaApi::DelayNextIpcClose(std::chrono::milliseconds delay) {
  std::lock_guard<std::mutex> lock(mutex_);
  ipc_close_delay_ = delay;
}

void FakeCudaApi::FirstLaunchSynchronises() {
  std::lock_guard<std::mutex> lock(mutex_);
  first_launch_synchronises_ = true;
}

void FakeCudaApi::FailNext(std::string_view call, Status status) {
  std::lock_guard<std::mutex> lock(mutex_);
  failures_[std::string(call)].push_back(std::move(status));
}

std::vector<std::string> FakeCudaApi::calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return calls_;
}

}  // namespace hyper_parallel::shmem::cuda
