// A fake NPU device for PyTorch (tests only): torch's PrivateUse1 device, renamed "npu" by the
// Python package, over the fake ACL runtime (ccsrc/testing/fake_cann/fake_aclshmem.cc).
//
// Device memory is the fake's aclrtMalloc memory (host memory), so CPU kernels compute on it.
// Every operator without a kernel here goes through one boxed fallback that
//   1. runs the operator on meta tensors shaped like the arguments (output sizes, strides, dtype,
//      and which outputs are views of or writes to an input);
//   2. allocates fresh NPU outputs, and
//   3. queues a closure that runs the operator on CPU views of the same memory and copies each
//      result into its output.
// Closures go to the current stream's host task queue (as torch_npu's task queue) and reach the
// ACL stream (aclrtLaunchCallback: the fake's worker thread of that stream runs them in order)
// only when the queue is flushed: reading `npu_stream`, a synchronisation (stream, device,
// event, a copy to the CPU, item()), an event record, or more than kFlushBound queued tasks.
// Operators whose outputs the meta run cannot describe (data-dependent shapes, non-tensor
// results) run blocking: synchronise the current stream, run on the host thread.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <dlfcn.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fake_npu {
namespace {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;
constexpr int kMaxDevices = 64;
constexpr std::size_t kFlushBound = 64;  // queued host tasks before a forced flush
constexpr int kCallbackBlock = 1;        // ACL_CALLBACK_BLOCK

// ---- The fake ACL runtime (dlopen'ed: the same instance the SHMEM backend loads) ------------

struct PtrAttributes {
  struct {
    std::uint32_t id;
    int type;  // 0 host, 1 device
  } location;
  std::uint32_t pageSize;
  std::uint32_t rsv[4];
};

struct Acl {
  void* handle = nullptr;
  std::string path;
  int (*SetDevice)(std::int32_t) = nullptr;
  int (*GetDevice)(std::int32_t*) = nullptr;
  int (*GetDeviceCount)(std::uint32_t*) = nullptr;
  int (*CreateStream)(void**) = nullptr;
  int (*SynchronizeStream)(void*) = nullptr;
  int (*SynchronizeDevice)() = nullptr;
  int (*Malloc)(void**, std::size_t, int) = nullptr;
  int (*Free)(void*) = nullptr;
  int (*Memcpy)(void*, std::size_t, const void*, std::size_t, int) = nullptr;
  int (*CreateEvent)(void**) = nullptr;
  int (*DestroyEvent)(void*) = nullptr;
  int (*RecordEvent)(void*, void*) = nullptr;
  int (*StreamWaitEvent)(void*, void*) = nullptr;
  int (*SynchronizeEvent)(void*) = nullptr;
  int (*QueryEventStatus)(void*, int*) = nullptr;
  int (*PointerGetAttributes)(const void*, PtrAttributes*) = nullptr;
  int (*LaunchCallback)(void (*)(void*), void*, int, void*) = nullptr;
  void (*SetAsyncStreams)(int) = nullptr;  // hps_fake_set_async_streams
  int (*Pending)(void*) = nullptr;         // hps_fake_pending (optional)
};

Acl g_acl;
std::atomic<bool> g_loaded{false};
std::atomic<bool> g_shutdown{false};
std::atomic<int> g_device_count{0};  // fixed once loaded (HPS_FAKE_NPU_DEVICES)

Acl& A() {
  TORCH_CHECK(g_loaded.load(std::memory_order_acquire),
              "fake torch_npu: the fake ACL runtime is not loaded (import torch_npu first)");
  return g_acl;
}

void Check(int rc, const char* what) {
  TORCH_CHECK(rc == 0, "fake torch_npu: ", what, " failed with aclError ", rc);
}

template <typename F>
void Sym(F*& fn, const char* name, bool required) {
  fn = reinterpret_cast<F*>(dlsym(g_acl.handle, name));
  TORCH_CHECK(fn != nullptr || !required, "fake torch_npu: ", g_acl.path, " has no symbol ", name,
              " (rebuild the fake ACL library: cmake --build <build> --target hps_fake_cann_v1_5)");
}

int LoadAcl(const std::string& path) {
  if (g_loaded.load()) {
    TORCH_CHECK(path == g_acl.path, "fake torch_npu: already loaded ", g_acl.path);
  } else {
    g_acl.path = path;
    g_acl.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    TORCH_CHECK(g_acl.handle != nullptr, "fake torch_npu: cannot load ", path, ": ", dlerror());
    Sym(g_acl.SetDevice, "aclrtSetDevice", true);
    Sym(g_acl.GetDevice, "aclrtGetDevice", true);
    Sym(g_acl.GetDeviceCount, "aclrtGetDeviceCount", true);
    Sym(g_acl.CreateStream, "aclrtCreateStream", true);
    Sym(g_acl.SynchronizeStream, "aclrtSynchronizeStream", true);
    Sym(g_acl.SynchronizeDevice, "aclrtSynchronizeDevice", true);
    Sym(g_acl.Malloc, "aclrtMalloc", true);
    Sym(g_acl.Free, "aclrtFree", true);
    Sym(g_acl.Memcpy, "aclrtMemcpy", true);
    Sym(g_acl.CreateEvent, "aclrtCreateEvent", true);
    Sym(g_acl.DestroyEvent, "aclrtDestroyEvent", true);
    Sym(g_acl.RecordEvent, "aclrtRecordEvent", true);
    Sym(g_acl.StreamWaitEvent, "aclrtStreamWaitEvent", true);
    Sym(g_acl.SynchronizeEvent, "aclrtSynchronizeEvent", true);
    Sym(g_acl.QueryEventStatus, "aclrtQueryEventStatus", true);
    Sym(g_acl.PointerGetAttributes, "aclrtPointerGetAttributes", true);
    Sym(g_acl.LaunchCallback, "aclrtLaunchCallback", true);
    Sym(g_acl.SetAsyncStreams, "hps_fake_set_async_streams", true);
    Sym(g_acl.Pending, "hps_fake_pending", false);
    // Before any stream exists: every stream gets its own worker thread.
    g_acl.SetAsyncStreams(1);
    // CPU kernels with one intra-op thread (they run on the streams' worker threads).
    at::set_num_threads(1);
    g_loaded.store(true, std::memory_order_release);
  }
  std::uint32_t count = 0;
  Check(g_acl.GetDeviceCount(&count), "aclrtGetDeviceCount");
  g_device_count.store(static_cast<int>(std::min<std::uint32_t>(count, kMaxDevices)));
  return g_device_count.load();
}

int DeviceCount() noexcept { return g_device_count.load(std::memory_order_acquire); }

// ---- Devices (per thread, through aclrtSetDevice/aclrtGetDevice) -----------------------------

thread_local int tls_device = -1;  // mirror of this thread's ACL device (-1: ask ACL)
thread_local bool tls_in_callback = false;

void SetDevice(int device) {
  TORCH_CHECK(device >= 0 && device < DeviceCount(), "fake torch_npu: invalid device index ",
              device, " (", DeviceCount(), " devices; HPS_FAKE_NPU_DEVICES sets the count)");
  if (tls_device == device) return;
  Check(A().SetDevice(device), "aclrtSetDevice");
  tls_device = device;
}

int CurrentDevice() {
  if (tls_device >= 0) return tls_device;
  std::int32_t device = -1;
  if (A().GetDevice(&device) == 0 && device >= 0) {
    tls_device = device;
    return device;
  }
  SetDevice(0);  // as torch_npu: device 0 until set
  return 0;
}

int IndexOr(c10::DeviceIndex index) { return index < 0 ? CurrentDevice() : index; }

// ---- Streams and their host task queues ------------------------------------------------------

struct EventRec {
  void* event = nullptr;
  int device = 0;
  std::atomic<int> refs{1};
  std::atomic<bool> recorded{false};
};

void Unref(EventRec* e) {
  if (e != nullptr && e->refs.fetch_sub(1) == 1) {
    if (!g_shutdown.load()) g_acl.DestroyEvent(e->event);
    delete e;
  }
}

struct StreamRec {
  int device = 0;
  std::int64_t id = 0;
  void* acl = nullptr;
  std::mutex mu;  // the queue, and launching in order
  struct Item {
    std::function<void()> run;    // a closure for the stream's worker
    EventRec* wait = nullptr;     // or: the stream waits for this event
  };
  std::vector<Item> queue;
  std::atomic<std::int64_t> launched{0};
  std::atomic<std::int64_t> completed{0};
  std::mutex error_mu;
  std::string error;  // the first failure of a closure since the last synchronisation
};

struct DeviceState {
  std::mutex mu;
  std::vector<std::unique_ptr<StreamRec>> streams;  // id = index; 0 is the default stream
  std::vector<std::int64_t> pool;
  std::size_t pool_next = 0;
};

DeviceState g_devices[kMaxDevices];
thread_local std::int64_t tls_stream[kMaxDevices] = {};  // current stream id per device

StreamRec* CreateStreamLocked(DeviceState& state, int device) {
  const int previous = CurrentDevice();
  SetDevice(device);
  void* stream = nullptr;
  const int rc = A().CreateStream(&stream);
  SetDevice(previous);
  Check(rc, "aclrtCreateStream");
  auto rec = std::make_unique<StreamRec>();
  rec->device = device;
  rec->id = static_cast<std::int64_t>(state.streams.size());
  rec->acl = stream;
  state.streams.push_back(std::move(rec));
  return state.streams.back().get();
}

DeviceState& Device(int device) {
  TORCH_CHECK(device >= 0 && device < DeviceCount(), "fake torch_npu: invalid device index ",
              device);
  DeviceState& state = g_devices[device];
  std::lock_guard<std::mutex> lock(state.mu);
  if (state.streams.empty()) CreateStreamLocked(state, device);
  return state;
}

StreamRec* Rec(int device, std::int64_t id) {
  DeviceState& state = Device(device);
  std::lock_guard<std::mutex> lock(state.mu);
  TORCH_CHECK(id >= 0 && id < static_cast<std::int64_t>(state.streams.size()),
              "fake torch_npu: unknown stream id ", id, " on npu:", device);
  return state.streams[static_cast<std::size_t>(id)].get();
}

StreamRec* Rec(const c10::Stream& stream) {
  return Rec(IndexOr(stream.device_index()), stream.id());
}

StreamRec* CurrentRec(int device) { return Rec(device, tls_stream[device]); }

c10::Stream Wrap(const StreamRec* rec) {
  return c10::Stream(c10::Stream::UNSAFE,
                     c10::Device(kNpu, static_cast<c10::DeviceIndex>(rec->device)),
                     rec->id);
}

struct CallbackData {
  std::function<void()> run;
  StreamRec* stream;
};

// Runs on the stream's worker thread (or inline on a synchronous fake stream). Never takes
// the GIL; a failure is recorded on the stream and raised by its next synchronisation.
void RunCallback(void* data) {
  std::unique_ptr<CallbackData> d(static_cast<CallbackData*>(data));
  StreamRec* stream = d->stream;
  const bool outer = tls_in_callback;
  tls_in_callback = true;
  std::string failure;
  try {
    d->run();
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "unknown exception";
  }
  d.reset();  // the captures die here: frees of NPU memory from this thread go straight to ACL
  tls_in_callback = outer;
  if (!failure.empty()) {
    std::lock_guard<std::mutex> lock(stream->error_mu);
    if (stream->error.empty()) stream->error = failure;
  }
  stream->completed.fetch_add(1, std::memory_order_acq_rel);
}

void LaunchLocked(StreamRec* s, std::function<void()> run) {
  auto* data = new CallbackData{std::move(run), s};
  s->launched.fetch_add(1, std::memory_order_acq_rel);
  const int rc = A().LaunchCallback(&RunCallback, data, kCallbackBlock, s->acl);
  if (rc != 0) {
    s->launched.fetch_sub(1, std::memory_order_acq_rel);
    delete data;
    Check(rc, "aclrtLaunchCallback");
  }
}

void FlushLocked(StreamRec* s) {
  std::vector<StreamRec::Item> items;
  items.swap(s->queue);
  for (auto& item : items) {
    if (item.wait != nullptr) {
      const int rc = A().StreamWaitEvent(s->acl, item.wait->event);
      Unref(item.wait);
      item.wait = nullptr;
      Check(rc, "aclrtStreamWaitEvent");
    } else {
      LaunchLocked(s, std::move(item.run));
    }
  }
}

void Flush(StreamRec* s) {
  std::lock_guard<std::mutex> lock(s->mu);
  FlushLocked(s);
}

void Enqueue(StreamRec* s, std::function<void()> run) {
  std::lock_guard<std::mutex> lock(s->mu);
  s->queue.push_back(StreamRec::Item{std::move(run), nullptr});
  if (s->queue.size() > kFlushBound) FlushLocked(s);
}

void QueueWait(StreamRec* s, EventRec* e) {
  std::lock_guard<std::mutex> lock(s->mu);
  e->refs.fetch_add(1);
  s->queue.push_back(StreamRec::Item{nullptr, e});
  if (s->queue.size() > kFlushBound) FlushLocked(s);
}

void RaiseIfFailed(StreamRec* s, int acl_rc) {
  std::string error;
  {
    std::lock_guard<std::mutex> lock(s->error_mu);
    error.swap(s->error);
  }
  TORCH_CHECK(error.empty(), "fake torch_npu: work queued on stream ", s->id, " of npu:",
              s->device, " failed: ", error);
  TORCH_CHECK(acl_rc == 0, "fake torch_npu: aclrtSynchronizeStream of stream ", s->id,
              " of npu:", s->device, " failed with aclError ", acl_rc,
              acl_rc == 507898 ? " (timed out: the stream did not finish its work)" : "");
}

// Flushes, then waits until the stream ran everything queued before (the fake bounds the wait:
// 60 s without a SHMEM job, else its control timeout + 1 s); raises what failed on it.
void SyncStream(StreamRec* s) {
  Flush(s);
  RaiseIfFailed(s, A().SynchronizeStream(s->acl));
}

std::vector<StreamRec*> StreamsOf(int device) {
  DeviceState& state = Device(device);
  std::lock_guard<std::mutex> lock(state.mu);
  std::vector<StreamRec*> out;
  for (auto& s : state.streams) out.push_back(s.get());
  return out;
}

void SyncDevice(int device) {
  const std::vector<StreamRec*> streams = StreamsOf(device);
  for (StreamRec* s : streams) Flush(s);
  const int previous = CurrentDevice();
  SetDevice(device);
  const int rc = A().SynchronizeDevice();  // every stream, bounded by the fake
  SetDevice(previous);
  for (StreamRec* s : streams) RaiseIfFailed(s, A().SynchronizeStream(s->acl));
  Check(rc, "aclrtSynchronizeDevice");
}

EventRec* NewEvent(int device) {
  const int previous = CurrentDevice();
  SetDevice(device);
  auto* e = new EventRec();
  e->device = device;
  const int rc = A().CreateEvent(&e->event);
  SetDevice(previous);
  if (rc != 0) {
    delete e;
    Check(rc, "aclrtCreateEvent");
  }
  return e;
}

void RecordEvent(EventRec* e, StreamRec* s) {
  std::lock_guard<std::mutex> lock(s->mu);
  FlushLocked(s);
  Check(A().RecordEvent(e->event, s->acl), "aclrtRecordEvent");
  e->recorded.store(true);
}

// `waiter` runs its later work only after everything queued so far on `producer`.
void StreamWaitsFor(StreamRec* waiter, StreamRec* producer) {
  if (waiter == producer) return;
  EventRec* e = NewEvent(producer->device);
  RecordEvent(e, producer);
  QueueWait(waiter, e);
  Unref(e);
}

// ---- Allocator over aclrtMalloc/aclrtFree -----------------------------------------------------

struct Block {
  void* ptr = nullptr;
  int device = 0;
  std::mutex mu;
  std::vector<StreamRec*> used_on;  // record_stream
};

void FreeBlock(void* context) noexcept {
  auto* block = static_cast<Block*>(context);
  void* ptr = block->ptr;
  if (g_shutdown.load() || !g_loaded.load()) {
    delete block;  // the process is ending: leave the memory to it
    return;
  }
  if (tls_in_callback) {
    // A stream's last use of the block just finished on this worker.
    delete block;
    g_acl.Free(ptr);
    return;
  }
  try {
    // Freed after the current stream (and every stream it was recorded on) passes this point.
    StreamRec* current = CurrentRec(block->device);
    for (StreamRec* other : block->used_on) StreamWaitsFor(current, other);
    delete block;
    Enqueue(current, [ptr] { g_acl.Free(ptr); });
  } catch (...) {
    g_acl.Free(ptr);
  }
}

struct NpuAllocator final : c10::Allocator {
  c10::DataPtr allocate(std::size_t bytes) override {
    const int device = CurrentDevice();
    const c10::Device where(kNpu, static_cast<c10::DeviceIndex>(device));
    if (bytes == 0) return c10::DataPtr(nullptr, nullptr, &c10::detail::deleteNothing, where);
    void* ptr = nullptr;
    const int rc = A().Malloc(&ptr, bytes, 0);
    TORCH_CHECK(rc == 0 && ptr != nullptr, "fake torch_npu: aclrtMalloc of ", bytes,
                " bytes failed with aclError ", rc);
    auto* block = new Block();
    block->ptr = ptr;
    block->device = device;
    return c10::DataPtr(ptr, block, &FreeBlock, where);
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    SyncStream(CurrentRec(CurrentDevice()));
    Check(A().Memcpy(dest, count, src, count, 3), "aclrtMemcpy");
  }
};

NpuAllocator g_allocator;
REGISTER_ALLOCATOR(kNpu, &g_allocator)

void RecordDataPtrOnStream(const c10::DataPtr& data, const c10::Stream& stream) {
  if (data.get_deleter() != &FreeBlock) return;
  auto* block = static_cast<Block*>(data.get_context());
  StreamRec* rec = Rec(stream);
  std::lock_guard<std::mutex> lock(block->mu);
  if (std::find(block->used_on.begin(), block->used_on.end(), rec) == block->used_on.end()) {
    block->used_on.push_back(rec);
  }
}

// ---- Guard ----------------------------------------------------------------------------------

struct NpuGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNpu; }
  c10::Device exchangeDevice(c10::Device d) const override {
    const int previous = CurrentDevice();
    if (d.index() >= 0 && d.index() != previous) SetDevice(d.index());
    return c10::Device(kNpu, static_cast<c10::DeviceIndex>(previous));
  }
  c10::Device getDevice() const override {
    return c10::Device(kNpu, static_cast<c10::DeviceIndex>(CurrentDevice()));
  }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kNpu, "fake torch_npu: expected an npu device, got ", d);
    SetDevice(IndexOr(d.index()));
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      SetDevice(IndexOr(d.index()));
    } catch (...) {
    }
  }
  c10::Stream getStream(c10::Device d) const override {
    return Wrap(CurrentRec(IndexOr(d.index())));
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return Wrap(Rec(IndexOr(d.index()), 0));
  }
  c10::Stream getNewStream(c10::Device d, int /*priority*/) const override {
    DeviceState& state = Device(IndexOr(d.index()));
    std::lock_guard<std::mutex> lock(state.mu);
    return Wrap(CreateStreamLocked(state, IndexOr(d.index())));
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*high*/) const override {
    const int device = IndexOr(d.index());
    DeviceState& state = Device(device);
    std::lock_guard<std::mutex> lock(state.mu);
    if (state.pool.size() < 8) {
      state.pool.push_back(CreateStreamLocked(state, device)->id);
      return Wrap(state.streams.back().get());
    }
    const std::int64_t id = state.pool[state.pool_next++ % state.pool.size()];
    return Wrap(state.streams[static_cast<std::size_t>(id)].get());
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    const int device = IndexOr(s.device_index());
    StreamRec* next = Rec(device, s.id());
    StreamRec* previous = CurrentRec(device);
    tls_stream[device] = next->id;
    return Wrap(previous);
  }
  // As torch_npu's guard: no native handle (torch.npu's Stream.npu_stream is the way).
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(DeviceCount());
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    Unref(static_cast<EventRec*>(event));
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "fake torch_npu: event of npu:", device_index, " recorded on a stream of npu:",
                stream.device_index());
    auto* e = static_cast<EventRec*>(*event);
    StreamRec* s = Rec(stream);
    if (e == nullptr) {
      e = NewEvent(s->device);
      *event = e;
    }
    RecordEvent(e, s);
  }
  void block(void* event, const c10::Stream& stream) const override {
    auto* e = static_cast<EventRec*>(event);
    if (e == nullptr || !e->recorded.load()) return;
    QueueWait(Rec(stream), e);
  }
  bool queryEvent(void* event) const override {
    auto* e = static_cast<EventRec*>(event);
    if (e == nullptr || !e->recorded.load()) return true;
    int status = 0;
    Check(A().QueryEventStatus(e->event, &status), "aclrtQueryEventStatus");
    return status == 1;
  }
  bool queryStream(const c10::Stream& stream) const override {
    StreamRec* s = Rec(stream);
    std::lock_guard<std::mutex> lock(s->mu);
    return s->queue.empty() && s->completed.load() == s->launched.load();
  }
  void synchronizeStream(const c10::Stream& stream) const override { SyncStream(Rec(stream)); }
  void synchronizeEvent(void* event) const override {
    auto* e = static_cast<EventRec*>(event);
    if (e == nullptr || !e->recorded.load()) return;
    Check(A().SynchronizeEvent(e->event), "aclrtSynchronizeEvent (bounded by the fake)");
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    SyncDevice(IndexOr(device_index));
  }
  void recordDataPtrOnStream(const c10::DataPtr& data, const c10::Stream& stream) const override {
    RecordDataPtrOnStream(data, stream);
  }
  double elapsedTime(void*, void*, const c10::DeviceIndex) const override {
    TORCH_CHECK(false, "fake torch_npu: Event.elapsed_time is not supported");
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NpuGuardImpl)

// ---- Hooks ----------------------------------------------------------------------------------

struct NpuHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return DeviceCount() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return g_loaded.load(); }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(DeviceCount());
  }
  void setCurrentDevice(c10::DeviceIndex device) const override { SetDevice(device); }
  c10::DeviceIndex getCurrentDevice() const override {
    return static_cast<c10::DeviceIndex>(CurrentDevice());
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const int previous = CurrentDevice();
    if (device >= 0) SetDevice(device);
    return static_cast<c10::DeviceIndex>(previous);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    PtrAttributes attributes{};
    const int rc = A().PointerGetAttributes(data, &attributes);
    TORCH_CHECK(rc == 0 && attributes.location.type == 1, "fake torch_npu: ", data,
                " is not fake NPU device memory (aclrtPointerGetAttributes: rc ", rc, ", type ",
                attributes.location.type, ")");
    return at::Device(kNpu, static_cast<c10::DeviceIndex>(attributes.location.id));
  }
  bool isPinnedPtr(const void*) const override { return false; }
  c10::Allocator* getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    return at::detail::getDefaultCPUGenerator();  // the kernels run on the CPU
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, std::size_t bytes) const override;
};

// ---- Tensors: CPU views of NPU memory, meta stand-ins -----------------------------------------

bool IsNpu(const at::Tensor& t) { return t.defined() && t.device().type() == kNpu; }

// A CPU tensor over the same memory; holds the NPU storage alive while it lives.
at::Tensor CpuAlias(const at::Tensor& t) {
  auto* holder = new c10::Storage(t.storage());
  return at::for_blob(t.data_ptr(), t.sizes())
      .strides(t.strides())
      .context(holder, [](void* p) { delete static_cast<c10::Storage*>(p); })
      .options(at::TensorOptions().dtype(t.scalar_type()).device(at::kCPU))
      .make_tensor();
}

// The same over a resizable CPU storage: for arguments a CPU kernel writes, which may resize
// them on the way (mse_loss.out grows its output, then reduces into it). A grown storage is new
// CPU memory; WriteBack copies the result back into the NPU memory then.
at::Tensor CpuAliasResizable(const at::Tensor& t) {
  auto* holder = new c10::Storage(t.storage());
  c10::DataPtr data(holder->mutable_data(), holder,
                    [](void* p) { delete static_cast<c10::Storage*>(p); }, c10::Device(at::kCPU));
  c10::Storage storage(c10::Storage::use_byte_size_t(), holder->nbytes(), std::move(data),
                       c10::GetCPUAllocator(), /*resizable=*/true);
  at::Tensor cpu = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  cpu.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return cpu;
}

struct WriteBack {
  at::Tensor cpu;     // what the kernel got (CpuAliasResizable)
  const void* data;   // its memory then
  at::Tensor target;  // CPU view of the NPU tensor
  void Apply() const {
    if (cpu.const_data_ptr() == data) return;
    at::Tensor out = target;
    TORCH_CHECK(out.sizes() == cpu.sizes(), "fake torch_npu: the CPU kernel left a written ",
                "argument with sizes ", cpu.sizes(), ", the meta kernel with ", out.sizes());
    out.copy_(cpu);
  }
};

// A meta tensor with the same sizes, strides and storage offset over a storage as large.
at::Tensor MetaLike(const at::Tensor& t) {
  const auto item = static_cast<std::int64_t>(t.element_size());
  const auto bytes = static_cast<std::int64_t>(t.storage().nbytes());
  const std::int64_t elements = (bytes + item - 1) / item;
  at::Tensor base =
      at::empty({elements}, at::TensorOptions().dtype(t.scalar_type()).device(at::kMeta));
  return base.as_strided(t.sizes(), t.strides(), t.storage_offset());
}

// A view of `base`'s storage with `like`'s dtype, sizes, strides and storage offset.
at::Tensor ViewOf(const at::Tensor& base, const at::Tensor& like, std::int64_t storage_offset) {
  at::Tensor view = at::detail::make_tensor<c10::TensorImpl>(
      c10::TensorImpl::VIEW, c10::Storage(base.storage()), base.key_set(), like.dtype());
  view.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(), storage_offset);
  return view;
}

void ResizeBytes(const c10::Storage& storage, std::size_t bytes) {
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  TORCH_CHECK(impl->resizable(), "fake torch_npu: trying to resize storage that is not resizable");
  const std::size_t old_bytes = impl->nbytes();
  if (bytes == old_bytes) return;
  c10::Allocator* allocator = impl->allocator() != nullptr ? impl->allocator() : &g_allocator;
  c10::DataPtr fresh = allocator->allocate(bytes);
  const int device = fresh.device().index() >= 0 ? fresh.device().index() : CurrentDevice();
  void* dst = fresh.get();
  auto old = std::make_shared<c10::DataPtr>(impl->set_data_ptr(std::move(fresh)));
  impl->set_nbytes(bytes);
  const std::size_t keep = std::min(old_bytes, bytes);
  if (keep > 0 && old->get() != nullptr) {
    c10::Storage alive(storage);
    Enqueue(CurrentRec(device), [old, alive, dst, keep] { std::memcpy(dst, old->get(), keep); });
  } else if (old->get() != nullptr) {
    Enqueue(CurrentRec(device), [old] {});  // freed in stream order
  }
}

void NpuHooks::resizePrivateUse1Bytes(const c10::Storage& storage, std::size_t bytes) const {
  ResizeBytes(storage, bytes);
}

// Gives an NPU tensor the sizes/strides/offset of `meta`, growing its storage if needed.
void Restride(const at::Tensor& t, const at::Tensor& meta) {
  if (t.sizes() == meta.sizes() && t.strides() == meta.strides() &&
      t.storage_offset() == meta.storage_offset()) {
    return;
  }
  const std::size_t needed = at::detail::computeStorageNbytes(
      meta.sizes(), meta.strides(), t.element_size(),
      static_cast<std::size_t>(meta.storage_offset()));
  if (needed > t.storage().nbytes()) ResizeBytes(t.storage(), needed);
  t.unsafeGetTensorImpl()->set_sizes_and_strides(meta.sizes(), meta.strides(),
                                                 meta.storage_offset());
}

// ---- Native kernels ---------------------------------------------------------------------------

at::Tensor EmptyMemoryFormat(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                             std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                             std::optional<bool> pin_memory,
                             std::optional<c10::MemoryFormat> memory_format) {
  const c10::Device where = c10::device_or_default(device);
  TORCH_CHECK(where.type() == kNpu);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "fake torch_npu: only strided tensors");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "pinned memory is CPU memory");
  const c10::DeviceGuard guard(where);
  return at::detail::empty_generic(size, &g_allocator,
                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor EmptyStrided(c10::IntArrayRef size, c10::IntArrayRef stride,
                        std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                        std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  const c10::Device where = c10::device_or_default(device);
  TORCH_CHECK(where.type() == kNpu);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "fake torch_npu: only strided tensors");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "pinned memory is CPU memory");
  const c10::DeviceGuard guard(where);
  return at::detail::empty_strided_generic(size, stride, &g_allocator,
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

at::Tensor AsStrided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                     std::optional<c10::SymInt> offset) {
  std::optional<std::int64_t> o;
  if (offset) o = offset->expect_int();
  return at::native::as_strided_tensorimpl(self, C10_AS_INTARRAYREF_SLOW(size),
                                           C10_AS_INTARRAYREF_SLOW(stride), o);
}

at::Tensor View(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor ReshapeAlias(const at::Tensor& self, c10::SymIntArrayRef size,
                        c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size),
                                    C10_AS_INTARRAYREF_SLOW(stride));
}

const at::Tensor& Resize(const at::Tensor& self, c10::SymIntArrayRef size_sym,
                         std::optional<at::MemoryFormat> memory_format) {
  const c10::IntArrayRef size = C10_AS_INTARRAYREF_SLOW(size_sym);
  TORCH_CHECK(memory_format != at::MemoryFormat::Preserve,
              "Unsupported memory format Preserve");
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  if (self.sizes() != size || !self.is_contiguous()) impl->set_sizes_contiguous(size);
  const std::size_t needed = at::detail::computeStorageNbytesContiguous(
      size, self.element_size(), static_cast<std::size_t>(self.storage_offset()));
  if (needed > self.storage().nbytes()) ResizeBytes(self.storage(), needed);
  if (memory_format) impl->empty_tensor_restride(*memory_format);
  return self;
}

at::Tensor CopyFrom(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  TORCH_CHECK(self.defined() && dst.defined(), "fake torch_npu: copy of an undefined tensor");
  if (dst.numel() == 0) return dst;
  if (IsNpu(dst) && self.is_cpu()) {
    // The source as it is now (the caller may change it right after), copied in stream order.
    at::Tensor snapshot = self.clone();
    at::Tensor target = CpuAlias(dst);
    Enqueue(CurrentRec(IndexOr(dst.device().index())),
            [target, snapshot]() mutable { target.copy_(snapshot); });
  } else if (IsNpu(dst) && IsNpu(self)) {
    StreamRec* s = CurrentRec(IndexOr(dst.device().index()));
    if (self.device() != dst.device()) {
      StreamWaitsFor(s, CurrentRec(IndexOr(self.device().index())));
    }
    at::Tensor target = CpuAlias(dst);
    at::Tensor source = CpuAlias(self);
    Enqueue(s, [target, source]() mutable { target.copy_(source); });
  } else if (IsNpu(self) && dst.is_cpu()) {
    StreamRec* s = CurrentRec(IndexOr(self.device().index()));
    at::Tensor source = CpuAlias(self);
    at::Tensor target = dst;
    Enqueue(s, [target, source]() mutable { target.copy_(source); });
    SyncStream(s);  // copies to the CPU are the operations that block the host
  } else {
    TORCH_CHECK(false, "fake torch_npu: copy from ", self.device(), " to ", dst.device(),
                " is not supported");
  }
  return dst;
}

at::Tensor CopyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  if (IsNpu(dst)) {
    Resize(dst, c10::fromIntArrayRefSlow(self.sizes()), std::nullopt);
  } else {
    dst.resize_(self.sizes());
  }
  return CopyFrom(self, dst, false);
}

at::Scalar LocalScalarDense(const at::Tensor& self) {
  SyncStream(CurrentRec(IndexOr(self.device().index())));
  return at::_local_scalar_dense(CpuAlias(self));
}

at::Tensor& SetStorageOffset(at::Tensor& self, c10::Storage storage, std::int64_t offset,
                             c10::IntArrayRef size, c10::IntArrayRef stride) {
  // Sets like the CPU kernel; storage growth (rare) goes through ResizeBytes.
  TORCH_CHECK(offset >= 0, "Tensor: invalid storage offset ", offset);
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  if (!self.storage().is_alias_of(storage)) impl->set_storage_keep_dtype(std::move(storage));
  std::vector<std::int64_t> strides;
  if (stride.data() != nullptr && !stride.empty()) {
    strides.assign(stride.begin(), stride.end());
  } else {
    const c10::DimVector contiguous = c10::contiguous_strides(size);
    strides.assign(contiguous.begin(), contiguous.end());
  }
  const std::size_t needed = at::detail::computeStorageNbytes(size, strides, self.element_size(),
                                                              static_cast<std::size_t>(offset));
  if (needed > self.storage().nbytes()) ResizeBytes(self.storage(), needed);
  impl->set_sizes_and_strides(size, strides, offset);
  return self;
}

at::Tensor& SetStorage(at::Tensor& self, c10::Storage source) {
  const std::int64_t elements =
      static_cast<std::int64_t>(source.nbytes() / self.element_size());
  return SetStorageOffset(self, std::move(source), 0, {elements}, {});
}

at::Tensor& SetTensor(at::Tensor& self, const at::Tensor& source) {
  if (self.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) return self;
  return SetStorageOffset(self, source.storage(), source.storage_offset(), source.sizes(),
                          source.strides());
}

at::Tensor& SetEmpty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, &g_allocator, true);
  return SetStorageOffset(self, std::move(storage), 0, {0}, {});
}

void RecordStream(at::Tensor& self, c10::Stream stream) {
  RecordDataPtrOnStream(self.storage().data_ptr(), stream);
}

// ---- The boxed fallback -------------------------------------------------------------------------

enum class Mode { kMeta, kCpu };

at::Tensor MapTensor(const at::Tensor& t, Mode mode, bool written,
                     std::vector<WriteBack>* writes) {
  if (!t.defined()) return t;
  if (IsNpu(t) && mode == Mode::kMeta) return MetaLike(t);
  if (IsNpu(t) && written && writes != nullptr) {
    at::Tensor cpu = CpuAliasResizable(t);
    writes->push_back(WriteBack{cpu, cpu.const_data_ptr(), CpuAlias(t)});
    return cpu;
  }
  if (IsNpu(t)) return CpuAlias(t);
  // A CPU operand (an index, a 0-dim scalar) stays on the CPU; the closure takes a snapshot.
  if (t.is_cpu() && mode == Mode::kCpu && !written) return t.clone();
  return t;
}

c10::IValue MapValue(const c10::IValue& v, Mode mode, bool written,
                     std::vector<WriteBack>* writes = nullptr) {
  if (v.isTensor()) return MapTensor(v.toTensor(), mode, written, writes);
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(MapTensor(t, mode, written, writes));
    return out;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const std::optional<at::Tensor>& t : v.toOptionalTensorList()) {
      out.push_back(t.has_value() ? std::optional<at::Tensor>(MapTensor(*t, mode, written, writes))
                                  : std::nullopt);
    }
    return out;
  }
  if (v.isDevice() && v.toDevice().type() == kNpu) {
    return c10::Device(mode == Mode::kMeta ? at::kMeta : at::kCPU);
  }
  return v;
}

template <typename F>
void ForEachTensor(const c10::IValue& v, F&& f) {
  if (v.isTensor()) {
    f(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) f(t);
  } else if (v.isOptionalTensorList()) {
    for (const std::optional<at::Tensor>& t : v.toOptionalTensorList()) {
      if (t.has_value()) f(*t);
    }
  }
}

bool Written(const c10::Argument& a) {
  return a.alias_info() != nullptr && a.alias_info()->isWrite();
}

bool TensorLike(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return true;
  if (auto opt = type->cast<c10::OptionalType>()) return TensorLike(opt->getElementType());
  if (auto list = type->cast<c10::ListType>()) {
    return list->getElementType()->kind() == c10::TypeKind::TensorType;
  }
  return false;
}

// The argument index whose alias set a return shares, or -1.
int AliasedArgument(const c10::FunctionSchema& schema, const c10::Argument& ret) {
  const c10::AliasInfo* info = ret.alias_info();
  if (info == nullptr) return -1;
  const auto& args = schema.arguments();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const c10::AliasInfo* a = args[i].alias_info();
    if (a == nullptr) continue;
    for (const auto& set : info->beforeSets()) {
      if (a->beforeSets().count(set) != 0) return static_cast<int>(i);
    }
  }
  return -1;
}

struct FreshOutput {
  std::size_t ret;
  int element;  // -1: the return itself; else its list element
  at::Tensor target;  // CPU view of the NPU output
};

std::string OpName(const c10::OperatorHandle& op) {
  const auto& name = op.schema().operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

// An output aliasing NPU argument `npu` (whose stand-in is `stand_in`), from the stand-in's
// result `result` (meta or CPU): the argument itself, or a view of its storage.
at::Tensor MapAliasResult(const at::Tensor& result, const c10::IValue& npu_arg,
                          const c10::IValue& stand_in_arg) {
  std::vector<at::Tensor> npus, stand_ins;
  ForEachTensor(npu_arg, [&](const at::Tensor& t) { npus.push_back(t); });
  ForEachTensor(stand_in_arg, [&](const at::Tensor& t) { stand_ins.push_back(t); });
  for (std::size_t i = 0; i < npus.size() && i < stand_ins.size(); ++i) {
    if (result.is_same(stand_ins[i])) return npus[i];
  }
  for (std::size_t i = 0; i < npus.size() && i < stand_ins.size(); ++i) {
    if (!stand_ins[i].defined() || !result.is_alias_of(stand_ins[i])) continue;
    std::int64_t offset = result.storage_offset();
    if (result.is_cpu()) {
      // A CPU alias starts at the NPU tensor's first element, not its storage's.
      const auto* base = static_cast<const char*>(npus[i].storage().data());
      offset = (static_cast<const char*>(result.data_ptr()) - base) /
               static_cast<std::int64_t>(result.element_size());
    }
    return ViewOf(npus[i], result, offset);
  }
  TORCH_CHECK(false, "fake torch_npu: cannot map an aliasing output back to its NPU input");
}

void PushReturn(torch::jit::Stack* stack, std::vector<at::Tensor> tensors, bool list) {
  if (list) {
    c10::List<at::Tensor> out;
    for (auto& t : tensors) out.push_back(std::move(t));
    stack->emplace_back(std::move(out));
  } else {
    stack->emplace_back(std::move(tensors.at(0)));
  }
}

at::Tensor NewNpuLike(const at::Tensor& like, int device) {
  return EmptyStrided(like.sizes(), like.strides(), like.scalar_type(), std::nullopt,
                      c10::Device(kNpu, static_cast<c10::DeviceIndex>(device)), std::nullopt);
}

// Runs the operator on the host thread after the current stream drained (data-dependent
// shapes, non-tensor results, operators without a meta kernel).
void RunBlocking(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args, int device,
                 torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  StreamRec* s = CurrentRec(device);
  SyncStream(s);
  std::vector<c10::IValue> cpu_args;
  std::vector<WriteBack> writes;
  for (std::size_t i = 0; i < args.size(); ++i) {
    cpu_args.push_back(MapValue(args[i], Mode::kCpu, Written(schema.arguments()[i]), &writes));
  }
  torch::jit::Stack cpu_stack(cpu_args.begin(), cpu_args.end());
  op.callBoxed(&cpu_stack);
  for (const WriteBack& w : writes) w.Apply();
  for (std::size_t r = 0; r < schema.returns().size(); ++r) {
    const c10::Argument& ret = schema.returns()[r];
    c10::IValue& value = cpu_stack[r];
    if (!TensorLike(ret.type()) || value.isNone()) {
      stack->push_back(std::move(value));
      continue;
    }
    const int alias = AliasedArgument(schema, ret);
    std::vector<at::Tensor> results;
    ForEachTensor(value, [&](const at::Tensor& t) { results.push_back(t); });
    std::vector<at::Tensor> outs;
    for (const at::Tensor& t : results) {
      if (!t.defined()) {
        outs.push_back(t);
      } else if (alias >= 0) {
        outs.push_back(MapAliasResult(t, args[alias], cpu_args[alias]));
      } else if (!t.is_cpu()) {
        outs.push_back(t);
      } else {
        at::Tensor out = NewNpuLike(t, device);
        at::Tensor target = CpuAlias(out);
        at::Tensor source = t;
        Enqueue(s, [target, source]() mutable { target.copy_(source); });
        outs.push_back(out);
      }
    }
    PushReturn(stack, std::move(outs), value.isTensorList());
  }
}

void Fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const std::size_t nargs = schema.arguments().size();
  std::vector<c10::IValue> args(stack->end() - static_cast<std::ptrdiff_t>(nargs), stack->end());
  torch::jit::drop(*stack, nargs);

  int device = -1;
  for (const c10::IValue& v : args) {
    ForEachTensor(v, [&](const at::Tensor& t) {
      if (device < 0 && IsNpu(t)) device = IndexOr(t.device().index());
    });
    if (device < 0 && v.isDevice() && v.toDevice().type() == kNpu) {
      device = IndexOr(v.toDevice().index());
    }
  }
  if (device < 0) device = CurrentDevice();

  bool blocking = false;
  for (const c10::Argument& ret : schema.returns()) blocking = blocking || !TensorLike(ret.type());
  std::vector<c10::IValue> meta_args;
  torch::jit::Stack meta_stack;
  if (!blocking) {
    for (const c10::IValue& v : args) meta_args.push_back(MapValue(v, Mode::kMeta, false));
    meta_stack.assign(meta_args.begin(), meta_args.end());
    try {
      op.callBoxed(&meta_stack);
    } catch (const std::exception&) {
      blocking = true;  // no meta kernel, or a data-dependent shape: run it for real
    }
  }
  if (!blocking) {
    for (std::size_t r = 0; r < schema.returns().size() && !blocking; ++r) {
      ForEachTensor(meta_stack[r], [&](const at::Tensor& t) {
        blocking = blocking || (t.defined() && !t.is_meta());
      });
    }
  }
  if (blocking) {
    RunBlocking(op, args, device, stack);
    return;
  }

  // Outputs written in place whose shape the meta run changed (out= arguments resized).
  bool any_write = false;
  for (std::size_t i = 0; i < nargs; ++i) {
    if (!Written(schema.arguments()[i])) continue;
    any_write = true;
    std::vector<at::Tensor> npus, metas;
    ForEachTensor(args[i], [&](const at::Tensor& t) { npus.push_back(t); });
    ForEachTensor(meta_args[i], [&](const at::Tensor& t) { metas.push_back(t); });
    for (std::size_t k = 0; k < npus.size() && k < metas.size(); ++k) {
      if (IsNpu(npus[k]) && metas[k].is_meta()) Restride(npus[k], metas[k]);
    }
  }

  std::vector<FreshOutput> fresh;
  for (std::size_t r = 0; r < schema.returns().size(); ++r) {
    const c10::Argument& ret = schema.returns()[r];
    const c10::IValue& value = meta_stack[r];
    if (value.isNone()) {
      stack->push_back(value);
      continue;
    }
    const int alias = AliasedArgument(schema, ret);
    std::vector<at::Tensor> results;
    ForEachTensor(value, [&](const at::Tensor& t) { results.push_back(t); });
    std::vector<at::Tensor> outs;
    for (std::size_t k = 0; k < results.size(); ++k) {
      const at::Tensor& t = results[k];
      if (!t.defined()) {
        outs.push_back(t);
      } else if (alias >= 0) {
        outs.push_back(MapAliasResult(t, args[alias], meta_args[alias]));
      } else {
        at::Tensor out = NewNpuLike(t, device);
        const int element = value.isTensorList() ? static_cast<int>(k) : -1;
        fresh.push_back(FreshOutput{r, element, CpuAlias(out)});
        outs.push_back(out);
      }
    }
    PushReturn(stack, std::move(outs), value.isTensorList());
  }
  if (fresh.empty() && !any_write) return;  // views only: nothing to compute

  std::vector<c10::IValue> cpu_args;
  std::vector<WriteBack> writes;
  for (std::size_t i = 0; i < nargs; ++i) {
    cpu_args.push_back(MapValue(args[i], Mode::kCpu, Written(schema.arguments()[i]), &writes));
  }
  Enqueue(CurrentRec(device), [op, cpu_args, fresh, writes]() {
    try {
      torch::jit::Stack s(cpu_args.begin(), cpu_args.end());
      op.callBoxed(&s);
      for (const WriteBack& w : writes) w.Apply();
      for (const FreshOutput& f : fresh) {
        const c10::IValue& v = s[f.ret];
        const at::Tensor result = f.element < 0 ? v.toTensor() : v.toTensorList().get(f.element);
        at::Tensor target = f.target;
        target.copy_(result);
      }
    } catch (const std::exception& e) {
      throw std::runtime_error(OpName(op) + ": " + e.what());
    }
  });
}

// torch routes convolutions of devices other than CPU/CUDA to these "overrideable" operators,
// whose default kernels raise: run aten::convolution(_backward) instead.
void ConvolutionOverrideable(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  static const c10::OperatorHandle op =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
  Fallback(op, stack);  // the same arguments
}

void ConvolutionBackwardOverrideable(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  static const c10::OperatorHandle op =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution_backward", "");
  // (grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups,
  //  output_mask): convolution_backward takes bias_sizes after weight.
  const at::Tensor weight = (*stack)[stack->size() - 8].toTensor();
  const bool transposed = (*stack)[stack->size() - 4].toBool();
  const std::int64_t groups = (*stack)[stack->size() - 2].toInt();
  const std::int64_t channels = transposed ? weight.size(1) * groups : weight.size(0);
  stack->insert(stack->end() - 7, c10::IValue(std::vector<std::int64_t>{channels}));
  Fallback(op, stack);
}

// ---- Registrations ------------------------------------------------------------------------------

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", EmptyMemoryFormat);
  m.impl("empty_strided", EmptyStrided);
  m.impl("as_strided", AsStrided);
  m.impl("view", View);
  m.impl("_reshape_alias", ReshapeAlias);
  m.impl("resize_", Resize);
  m.impl("_copy_from", CopyFrom);
  m.impl("_copy_from_and_resize", CopyFromAndResize);
  m.impl("_local_scalar_dense", LocalScalarDense);
  m.impl("set_.source_Storage_storage_offset", SetStorageOffset);
  m.impl("set_.source_Storage", SetStorage);
  m.impl("set_.source_Tensor", SetTensor);
  m.impl("set_", SetEmpty);
  m.impl("record_stream", RecordStream);
  m.impl("convolution_overrideable",
         torch::CppFunction::makeFromBoxedFunction<&ConvolutionOverrideable>());
  m.impl("convolution_backward_overrideable",
         torch::CppFunction::makeFromBoxedFunction<&ConvolutionBackwardOverrideable>());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&Fallback>());
}

struct RegisterHooks {
  RegisterHooks() { at::RegisterPrivateUse1HooksInterface(new NpuHooks()); }
};
RegisterHooks g_register_hooks;

// ---- Python bindings (torch_npu._C) -------------------------------------------------------------

std::tuple<std::int64_t, int, int> StreamTuple(const StreamRec* s) {
  return {s->id, s->device, static_cast<int>(kNpu)};
}

}  // namespace
}  // namespace fake_npu

// A gate for tests: holds a stream at a point until the host opens it (bounded: 60 s), so a
// test of the order across streams does not depend on how long a kernel takes.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;

  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu);
      open = true;
    }
    cv.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(60), [this] { return open; });
  }
};

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace fake_npu;
  namespace py = pybind11;
  const auto no_gil = py::call_guard<py::gil_scoped_release>();
  m.def("_init", &LoadAcl, "Loads the fake ACL runtime; returns the device count", no_gil);
  m.def("_shutdown", [] { g_shutdown.store(true); });
  m.def("_device_count", [] { return DeviceCount(); });
  m.def("_get_device", [] { return CurrentDevice(); });
  m.def("_set_device", [](int device) { SetDevice(device); });
  m.def("_exchange_device", [](int device) {
    const int previous = CurrentDevice();
    if (device >= 0) SetDevice(device);
    return previous;
  });
  m.def("_current_stream", [](int device) { return StreamTuple(CurrentRec(IndexOr(device))); });
  m.def("_default_stream", [](int device) { return StreamTuple(Rec(IndexOr(device), 0)); });
  m.def("_set_stream", [](std::int64_t id, int device) {
    const int d = IndexOr(device);
    tls_stream[d] = Rec(d, id)->id;
  });
  // torch.npu.Stream.npu_stream: flushes the host task queue, then the aclrtStream.
  m.def("_stream_handle", [](std::int64_t id, int device) {
    StreamRec* s = Rec(IndexOr(device), id);
    Flush(s);
    return reinterpret_cast<std::uintptr_t>(s->acl);
  }, no_gil);
  // Fake-only helpers (torch_npu.fake): the aclrtStream without a flush, the host queue's length,
  // the fake ACL stream's pending operations (hps_fake_pending; -2 when the fake lacks it).
  m.def("_stream_handle_no_flush", [](std::int64_t id, int device) {
    return reinterpret_cast<std::uintptr_t>(Rec(IndexOr(device), id)->acl);
  });
  m.def("_host_queue_length", [](std::int64_t id, int device) {
    StreamRec* s = Rec(IndexOr(device), id);
    std::lock_guard<std::mutex> lock(s->mu);
    return s->queue.size();
  });
  m.def("_acl_pending", [](std::int64_t id, int device) {
    StreamRec* s = Rec(IndexOr(device), id);
    return A().Pending != nullptr ? A().Pending(s->acl) : -2;
  });
  m.def("_device_of_pointer", [](std::uintptr_t ptr) {
    return static_cast<int>(
        at::globalContext().getDeviceFromPtr(reinterpret_cast<void*>(ptr), kNpu).index());
  });
  m.def("_synchronize", [](int device) { SyncDevice(IndexOr(device)); }, no_gil);
  py::class_<Gate, std::shared_ptr<Gate>>(m, "_Gate").def("open", &Gate::Open);
  m.def("_hold", [](std::int64_t id, int device) {
    StreamRec* s = Rec(IndexOr(device), id);
    auto gate = std::make_shared<Gate>();
    Enqueue(s, [gate] { gate->Wait(); });
    Flush(s);
    return gate;
  });
}
