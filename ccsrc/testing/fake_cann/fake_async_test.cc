// The fake's asynchronous streams, ACL memory/event/callback calls and per-thread devices,
// driven through its raw C symbols (a one-PE job): what a fake NPU device for a framework
// relies on, and the hazards a real device shows (late reads of host buffers, unordered
// streams, use after free, a bad pointer faulting the stream).
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cann/vendor_abi.h"
#include "testing/fake_cann/fake_library.h"

namespace hyper_parallel::shmem::cann {
namespace {

using fake::CountLines;
using fake::FakeCann;

constexpr std::size_t kBytes = 64;

// The fake's symbols this file calls.
struct Api {
  AclrtSetDeviceFn set_device = nullptr;
  AclrtGetDeviceFn get_device = nullptr;
  AclrtGetDeviceCountFn get_device_count = nullptr;
  AclrtCreateStreamFn create_stream = nullptr;
  AclrtDestroyStreamFn destroy_stream = nullptr;
  AclrtSynchronizeStreamFn synchronize = nullptr;
  AclrtSynchronizeDeviceFn synchronize_device = nullptr;
  AclrtMallocFn malloc = nullptr;
  AclrtFreeFn free = nullptr;
  AclrtMemcpyFn memcpy = nullptr;
  AclrtMemcpyAsyncFn memcpy_async = nullptr;
  AclrtMemsetAsyncFn memset_async = nullptr;
  AclrtCreateEventFn create_event = nullptr;
  AclrtDestroyEventFn destroy_event = nullptr;
  AclrtRecordEventFn record_event = nullptr;
  AclrtStreamWaitEventFn stream_wait_event = nullptr;
  AclrtSynchronizeEventFn synchronize_event = nullptr;
  AclrtQueryEventStatusFn query_event = nullptr;
  AclrtPointerGetAttributesFn pointer_attributes = nullptr;
  AclrtLaunchCallbackFn launch_callback = nullptr;
  AclshmemxGetUniqueIdFn get_uniqueid = nullptr;
  AclshmemxInitAttrFn init_attr = nullptr;
  AclshmemxFinalizeFn finalize = nullptr;
  AclshmemMallocFn shmem_malloc = nullptr;
  AclshmemAlignFn shmem_align = nullptr;
  AclshmemxPutmemOnStreamFn put = nullptr;
  AclshmemxGetmemOnStreamFn get = nullptr;
  AclshmemxSignalOpOnStreamFn signal_op = nullptr;
  AclshmemxSignalWaitUntilOnStreamFn wait_until = nullptr;
  AclshmemxQuietOnStreamFn quiet = nullptr;
  HpsFakeSetAsyncStreamsFn set_async = nullptr;
  HpsFakeAsyncStreamsFn async_streams = nullptr;
  HpsFakePendingFn pending = nullptr;
  HpsFakeStreamDeviceFn stream_device = nullptr;
  HpsFakeWorkersFn workers = nullptr;
};

class FakeAsyncTest : public ::testing::Test {
 protected:
  FakeAsyncTest() : fake_(fake::kV15) {
#define HPS_LOOKUP(field, name) api_.field = Lookup<decltype(api_.field)>(name)
    HPS_LOOKUP(set_device, "aclrtSetDevice");
    HPS_LOOKUP(get_device, "aclrtGetDevice");
    HPS_LOOKUP(get_device_count, "aclrtGetDeviceCount");
    HPS_LOOKUP(create_stream, "aclrtCreateStream");
    HPS_LOOKUP(destroy_stream, "aclrtDestroyStream");
    HPS_LOOKUP(synchronize, "aclrtSynchronizeStream");
    HPS_LOOKUP(synchronize_device, "aclrtSynchronizeDevice");
    HPS_LOOKUP(malloc, "aclrtMalloc");
    HPS_LOOKUP(free, "aclrtFree");
    HPS_LOOKUP(memcpy, "aclrtMemcpy");
    HPS_LOOKUP(memcpy_async, "aclrtMemcpyAsync");
    HPS_LOOKUP(memset_async, "aclrtMemsetAsync");
    HPS_LOOKUP(create_event, "aclrtCreateEvent");
    HPS_LOOKUP(destroy_event, "aclrtDestroyEvent");
    HPS_LOOKUP(record_event, "aclrtRecordEvent");
    HPS_LOOKUP(stream_wait_event, "aclrtStreamWaitEvent");
    HPS_LOOKUP(synchronize_event, "aclrtSynchronizeEvent");
    HPS_LOOKUP(query_event, "aclrtQueryEventStatus");
    HPS_LOOKUP(pointer_attributes, "aclrtPointerGetAttributes");
    HPS_LOOKUP(launch_callback, "aclrtLaunchCallback");
    HPS_LOOKUP(get_uniqueid, "aclshmemx_get_uniqueid");
    HPS_LOOKUP(init_attr, "aclshmemx_init_attr");
    HPS_LOOKUP(finalize, "aclshmemx_finalize");
    HPS_LOOKUP(shmem_malloc, "aclshmem_malloc");
    HPS_LOOKUP(shmem_align, "aclshmem_align");
    HPS_LOOKUP(put, "aclshmemx_putmem_on_stream");
    HPS_LOOKUP(get, "aclshmemx_getmem_on_stream");
    HPS_LOOKUP(signal_op, "aclshmemx_signal_op_on_stream");
    HPS_LOOKUP(wait_until, "aclshmemx_signal_wait_until_on_stream");
    HPS_LOOKUP(quiet, "aclshmemx_quiet_on_stream");
    HPS_LOOKUP(set_async, "hps_fake_set_async_streams");
    HPS_LOOKUP(async_streams, "hps_fake_async_streams");
    HPS_LOOKUP(pending, "hps_fake_pending");
    HPS_LOOKUP(stream_device, "hps_fake_stream_device");
    HPS_LOOKUP(workers, "hps_fake_workers");
#undef HPS_LOOKUP
  }

  ~FakeAsyncTest() override {
    if (initialized_) {
      EXPECT_EQ(api_.finalize(0), ACLSHMEM_SUCCESS);
    }
  }

  template <typename Fn>
  Fn Lookup(const char* name) {
    void* address = fake_.Symbol(name);
    EXPECT_NE(address, nullptr) << "the fake lacks " << name;
    return reinterpret_cast<Fn>(address);
  }

  // Device 0, a one-PE job (the attributes stay alive: the fake re-reads them), a data buffer
  // and a zeroed signal word on its heap, and asynchronous streams from now on.
  void InitJob(std::uint32_t timeout_seconds = 10) {
    ASSERT_EQ(api_.set_device(0), 0);
    ASSERT_EQ(api_.get_uniqueid(&uid_), 0);
    attr_.my_pe = 0;
    attr_.n_pes = 1;
    attr_.local_mem_size = 2u << 20;
    attr_.option_attr = {kOptionalAttrVersion, ACLSHMEM_DATA_OP_MTE, timeout_seconds,
                         timeout_seconds, timeout_seconds, -1};
    attr_.comm_args = &uid_;
    ASSERT_EQ(api_.init_attr(ACLSHMEMX_INIT_WITH_UNIQUEID, &attr_), ACLSHMEM_SUCCESS);
    initialized_ = true;
    data_ = static_cast<unsigned char*>(api_.shmem_malloc(4096));
    ASSERT_NE(data_, nullptr);
    word_ = static_cast<std::int32_t*>(api_.shmem_align(64, 64));
    ASSERT_NE(word_, nullptr);
    std::memset(data_, 0, 4096);
    std::memset(word_, 0, 64);
    api_.set_async(1);
  }

  aclrtStream NewStream() {
    aclrtStream stream = nullptr;
    EXPECT_EQ(api_.create_stream(&stream), 0);
    return stream;
  }

  // Sets the signal word from another thread, as a peer's signal would.
  void SignalFromAnotherThread() {
    std::thread([word = word_] {
      std::atomic_ref<std::int32_t>(*word).store(1, std::memory_order_release);
    }).join();
  }

  FakeCann fake_;
  Api api_;
  aclshmemx_uniqueid_t uid_{};
  aclshmemx_init_attr_t attr_{};
  bool initialized_ = false;
  unsigned char* data_ = nullptr;
  std::int32_t* word_ = nullptr;
};

bool AllBytes(const void* data, std::size_t bytes, unsigned char value) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    if (p[i] != value) return false;
  }
  return true;
}

TEST_F(FakeAsyncTest, SynchronousStreamsStayTheDefault) {
  if (std::getenv("HPS_FAKE_ACL_ASYNC_STREAMS") != nullptr) GTEST_SKIP() << "env forces a mode";
  EXPECT_EQ(api_.async_streams(), 0);
  InitJob();
  api_.set_async(0);  // InitJob turned it on
  aclrtStream stream = NewStream();
  std::vector<unsigned char> source(kBytes, 'S');
  api_.put(data_, source.data(), kBytes, 0, stream);
  EXPECT_TRUE(AllBytes(data_, kBytes, 'S')) << "ran at enqueue";
  EXPECT_EQ(api_.pending(stream), 0);
  EXPECT_EQ(api_.workers(), 0);
  EXPECT_EQ(api_.synchronize(stream), 0);
  EXPECT_EQ(api_.destroy_stream(stream), 0);
}

TEST_F(FakeAsyncTest, OperationsRunInOrderOnTheWorkerNotAtEnqueue) {
  InitJob();
  aclrtStream stream = NewStream();
  EXPECT_EQ(api_.workers(), 1);
  std::vector<unsigned char> source(kBytes, 'A');
  api_.wait_until(word_, ACLSHMEM_CMP_EQ, 1, stream);
  api_.put(data_, source.data(), kBytes, 0, stream);
  api_.signal_op(word_ + 1, 5, ACLSHMEM_SIGNAL_ADD, 0, stream);
  api_.quiet(stream);
  // Recorded at enqueue, not run: the put waits behind the signal wait.
  EXPECT_EQ(CountLines(fake_.Calls(), "aclshmemx_putmem_on_stream"), 1);
  EXPECT_EQ(api_.pending(stream), 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(api_.pending(stream), 4);
  EXPECT_TRUE(AllBytes(data_, kBytes, 0));
  SignalFromAnotherThread();
  EXPECT_EQ(api_.synchronize(stream), 0);
  EXPECT_EQ(api_.pending(stream), 0);
  EXPECT_TRUE(AllBytes(data_, kBytes, 'A'));
  EXPECT_EQ(word_[1], 5);
  EXPECT_EQ(api_.destroy_stream(stream), 0);
  EXPECT_EQ(api_.workers(), 0);
}

TEST_F(FakeAsyncTest, AHostBufferChangedBeforeTheStreamRanIsWhatLands) {
  InitJob();
  aclrtStream stream = NewStream();
  std::vector<unsigned char> source(kBytes, 'A');
  api_.wait_until(word_, ACLSHMEM_CMP_EQ, 1, stream);
  api_.put(data_, source.data(), kBytes, 0, stream);
  std::memset(source.data(), 'B', kBytes);  // after enqueue: a device would read this too
  SignalFromAnotherThread();
  EXPECT_EQ(api_.synchronize(stream), 0);
  EXPECT_TRUE(AllBytes(data_, kBytes, 'B'));
  EXPECT_EQ(api_.destroy_stream(stream), 0);
}

TEST_F(FakeAsyncTest, AnotherStreamIsNotOrderedAfterTheFirst) {
  InitJob();
  aclrtStream first = NewStream();
  aclrtStream second = NewStream();
  std::vector<unsigned char> source(kBytes, 'A');
  std::vector<unsigned char> out(kBytes, 0xEE);
  api_.wait_until(word_, ACLSHMEM_CMP_EQ, 1, first);
  api_.put(data_, source.data(), kBytes, 0, first);
  // The wrong stream: the read does not wait for the first stream's put.
  api_.get(out.data(), data_, kBytes, 0, second);
  EXPECT_EQ(api_.synchronize(second), 0);
  EXPECT_TRUE(AllBytes(out.data(), kBytes, 0)) << "read the heap before the put";
  EXPECT_EQ(api_.pending(first), 2);
  SignalFromAnotherThread();
  EXPECT_EQ(api_.synchronize(first), 0);
  EXPECT_TRUE(AllBytes(data_, kBytes, 'A'));
  EXPECT_EQ(api_.destroy_stream(first), 0);
  EXPECT_EQ(api_.destroy_stream(second), 0);
}

TEST_F(FakeAsyncTest, AnEventOrdersTwoStreams) {
  InitJob();
  aclrtStream first = NewStream();
  aclrtStream second = NewStream();
  aclrtEvent event = nullptr;
  ASSERT_EQ(api_.create_event(&event), 0);
  std::vector<unsigned char> source(kBytes, 'A');
  std::vector<unsigned char> out(kBytes, 0xEE);
  api_.wait_until(word_, ACLSHMEM_CMP_EQ, 1, first);
  api_.put(data_, source.data(), kBytes, 0, first);
  ASSERT_EQ(api_.record_event(event, first), 0);
  ASSERT_EQ(api_.stream_wait_event(second, event), 0);
  ASSERT_EQ(api_.memcpy_async(out.data(), kBytes, data_, kBytes, ACL_MEMCPY_DEVICE_TO_HOST,
                              second),
            0);
  int status = -1;
  ASSERT_EQ(api_.query_event(event, &status), 0);
  EXPECT_EQ(status, ACL_EVENT_RECORDED_STATUS_NOT_READY);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(api_.pending(second), 2) << "the copy waits for the event";
  SignalFromAnotherThread();
  EXPECT_EQ(api_.synchronize(second), 0);
  EXPECT_TRUE(AllBytes(out.data(), kBytes, 'A'));
  ASSERT_EQ(api_.query_event(event, &status), 0);
  EXPECT_EQ(status, ACL_EVENT_RECORDED_STATUS_COMPLETE);
  EXPECT_EQ(api_.synchronize_event(event), 0);
  EXPECT_EQ(api_.destroy_event(event), 0);
  EXPECT_EQ(api_.destroy_event(event), fake::kFakeAclBadAddress);
  EXPECT_EQ(api_.synchronize_device(), 0);
  EXPECT_EQ(api_.destroy_stream(first), 0);
  EXPECT_EQ(api_.destroy_stream(second), 0);
}

struct CallbackLog {
  std::mutex mutex;
  std::vector<int> order;
  unsigned char seen = 0;
  const unsigned char* heap = nullptr;
  std::thread::id thread;
};

void FirstCallback(void* user) {
  auto* log = static_cast<CallbackLog*>(user);
  std::lock_guard<std::mutex> lock(log->mutex);
  log->order.push_back(1);
  log->seen = log->heap[0];  // the put before it on the stream has landed
  log->thread = std::this_thread::get_id();
}

void SecondCallback(void* user) {
  auto* log = static_cast<CallbackLog*>(user);
  std::lock_guard<std::mutex> lock(log->mutex);
  log->order.push_back(2);
}

TEST_F(FakeAsyncTest, CallbacksRunInStreamOrderOnTheWorker) {
  InitJob();
  aclrtStream stream = NewStream();
  CallbackLog log;
  log.heap = data_;
  std::vector<unsigned char> source(kBytes, 'A');
  api_.wait_until(word_, ACLSHMEM_CMP_EQ, 1, stream);
  api_.put(data_, source.data(), kBytes, 0, stream);
  ASSERT_EQ(api_.launch_callback(FirstCallback, &log, ACL_CALLBACK_BLOCK, stream), 0);
  ASSERT_EQ(api_.launch_callback(SecondCallback, &log, ACL_CALLBACK_NO_BLOCK, stream), 0);
  EXPECT_EQ(api_.launch_callback(nullptr, &log, ACL_CALLBACK_BLOCK, stream),
            fake::kFakeAclInvalidParam);
  {
    std::lock_guard<std::mutex> lock(log.mutex);
    EXPECT_TRUE(log.order.empty());
  }
  SignalFromAnotherThread();
  EXPECT_EQ(api_.synchronize(stream), 0);
  std::lock_guard<std::mutex> lock(log.mutex);
  EXPECT_EQ(log.order, (std::vector<int>{1, 2}));
  EXPECT_EQ(log.seen, 'A');
  EXPECT_NE(log.thread, std::this_thread::get_id());
  EXPECT_EQ(api_.destroy_stream(stream), 0);
}

TEST_F(FakeAsyncTest, ABadDevicePointerFaultsTheStreamAndLaterWorkIsSkipped) {
  InitJob();
  aclrtStream stream = NewStream();
  void* device = nullptr;
  ASSERT_EQ(api_.malloc(&device, 256, ACL_MEM_MALLOC_HUGE_FIRST), 0);
  std::vector<unsigned char> zeros(256, 0);
  ASSERT_EQ(api_.memcpy(device, 256, zeros.data(), 256, ACL_MEMCPY_HOST_TO_DEVICE), 0);
  std::vector<unsigned char> host(256, 0);
  std::vector<unsigned char> source(256, 'H');
  // Host memory where the kind says device: accepted at the call, faults the stream.
  EXPECT_EQ(api_.memcpy_async(host.data(), 256, source.data(), 256, ACL_MEMCPY_HOST_TO_DEVICE,
                              stream),
            0);
  EXPECT_EQ(api_.memset_async(device, 256, 7, 256, stream), 0);
  EXPECT_EQ(api_.synchronize(stream), fake::kFakeAclStreamError);
  EXPECT_TRUE(AllBytes(host.data(), 256, 0));
  EXPECT_TRUE(AllBytes(device, 256, 0)) << "skipped after the fault";
  EXPECT_EQ(CountLines(fake_.Calls(), "skipped aclrtMemsetAsync"), 1) << fake_.Calls();
  // The failure was reported: the stream runs again.
  EXPECT_EQ(api_.memset_async(device, 256, 7, 256, stream), 0);
  EXPECT_EQ(api_.synchronize(stream), 0);
  EXPECT_TRUE(AllBytes(device, 256, 7));
  // Argument errors return at once; the synchronous copy checks its device side too.
  EXPECT_EQ(api_.memcpy_async(device, 16, source.data(), 256, ACL_MEMCPY_HOST_TO_DEVICE, stream),
            fake::kFakeAclInvalidParam);
  EXPECT_EQ(api_.memcpy_async(device, 256, source.data(), 256, 9, stream),
            fake::kFakeAclInvalidParam);
  EXPECT_EQ(api_.memcpy(host.data(), 256, source.data(), 256, ACL_MEMCPY_HOST_TO_DEVICE),
            fake::kFakeAclBadAddress);
  EXPECT_EQ(api_.memcpy(host.data(), 256, device, 256, ACL_MEMCPY_DEVICE_TO_HOST), 0);
  EXPECT_TRUE(AllBytes(host.data(), 256, 7));
  // An on-stream put with a non-heap destination faults the same way.
  api_.put(source.data(), source.data(), 16, 0, stream);
  EXPECT_EQ(api_.synchronize(stream), fake::kFakeAclStreamError);
  EXPECT_EQ(api_.free(device), 0);
  EXPECT_EQ(api_.destroy_stream(stream), 0);
}

TEST_F(FakeAsyncTest, FreePoisonsTheBlockAndRejectsUnknownPointers) {
  ASSERT_EQ(api_.set_device(0), 0);
  void* device = nullptr;
  ASSERT_EQ(api_.malloc(&device, 128, ACL_MEM_MALLOC_NORMAL_ONLY), 0);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(device) % 512, 0u);
  std::vector<unsigned char> ones(128, 0x11);
  ASSERT_EQ(api_.memcpy(device, 128, ones.data(), 128, ACL_MEMCPY_HOST_TO_DEVICE), 0);
  EXPECT_TRUE(AllBytes(device, 128, 0x11));
  EXPECT_EQ(api_.free(device), 0);
  EXPECT_TRUE(AllBytes(device, 128, fake::kFakeAclPoison)) << "a use after free reads poison";
  EXPECT_EQ(api_.free(device), fake::kFakeAclBadAddress) << "double free";
  int local = 0;
  EXPECT_EQ(api_.free(&local), fake::kFakeAclBadAddress);
  EXPECT_EQ(api_.memcpy(device, 128, ones.data(), 128, ACL_MEMCPY_HOST_TO_DEVICE),
            fake::kFakeAclBadAddress)
      << "freed memory is no longer device memory";
  void* unused = nullptr;
  EXPECT_EQ(api_.malloc(&unused, 0, 0), fake::kFakeAclInvalidParam);
}

TEST_F(FakeAsyncTest, PointerAttributesTellDeviceFromHost) {
  InitJob();  // the job's heap is device 0's memory
  ASSERT_EQ(api_.set_device(2), 0);
  void* device = nullptr;
  ASSERT_EQ(api_.malloc(&device, 4u << 20, ACL_MEM_MALLOC_HUGE_FIRST), 0);
  aclrtPtrAttributes attributes{};
  ASSERT_EQ(api_.pointer_attributes(static_cast<char*>(device) + 10, &attributes), 0);
  EXPECT_EQ(attributes.location.type, static_cast<std::uint32_t>(ACL_MEM_LOCATION_TYPE_DEVICE));
  EXPECT_EQ(attributes.location.id, 2u);
  EXPECT_EQ(attributes.pageSize, 2u << 20);
  ASSERT_EQ(api_.pointer_attributes(data_ + 100, &attributes), 0);
  EXPECT_EQ(attributes.location.type, static_cast<std::uint32_t>(ACL_MEM_LOCATION_TYPE_DEVICE));
  EXPECT_EQ(attributes.location.id, 0u);
  int local = 0;
  ASSERT_EQ(api_.pointer_attributes(&local, &attributes), 0);
  EXPECT_EQ(attributes.location.type, static_cast<std::uint32_t>(ACL_MEM_LOCATION_TYPE_HOST));
  ASSERT_EQ(api_.pointer_attributes(static_cast<char*>(device) + (4u << 20), &attributes), 0);
  EXPECT_EQ(attributes.location.type, static_cast<std::uint32_t>(ACL_MEM_LOCATION_TYPE_HOST))
      << "one past the end";
  EXPECT_EQ(api_.pointer_attributes(&local, nullptr), fake::kFakeAclInvalidParam);
  EXPECT_EQ(api_.free(device), 0);
  ASSERT_EQ(api_.pointer_attributes(device, &attributes), 0);
  EXPECT_EQ(attributes.location.type, static_cast<std::uint32_t>(ACL_MEM_LOCATION_TYPE_HOST));
}

TEST_F(FakeAsyncTest, EachThreadHasItsCurrentDevice) {
  std::int32_t device = -1;
  EXPECT_EQ(api_.get_device(&device), fake::kFakeAclNoDevice);
  std::uint32_t count = 0;
  ASSERT_EQ(api_.get_device_count(&count), 0);
  const char* env = std::getenv("HPS_FAKE_NPU_DEVICES");
  EXPECT_EQ(count, env != nullptr && std::atoi(env) > 0 ? static_cast<std::uint32_t>(std::atoi(env))
                                                       : 8u);
  EXPECT_EQ(api_.set_device(static_cast<std::int32_t>(count)), fake::kFakeAclInvalidDevice);
  EXPECT_EQ(api_.set_device(-1), fake::kFakeAclInvalidDevice);
  ASSERT_EQ(api_.set_device(1), 0);
  std::int32_t seen_default = -1;
  std::int32_t seen_own = -1;
  std::thread([&] {
    api_.get_device(&seen_default);  // never set here: the process's first device
    api_.set_device(3);
    api_.get_device(&seen_own);
  }).join();
  EXPECT_EQ(seen_default, 1);
  EXPECT_EQ(seen_own, 3);
  ASSERT_EQ(api_.get_device(&device), 0);
  EXPECT_EQ(device, 1) << "another thread's switch does not move this one";
  fake_.SetDevice(5);  // drift on this thread only
  ASSERT_EQ(api_.get_device(&device), 0);
  EXPECT_EQ(device, 5);
  std::thread([&] { api_.get_device(&seen_default); }).join();
  EXPECT_EQ(seen_default, 1);
  // A stream remembers the device it was created on.
  aclrtStream stream = NewStream();
  EXPECT_EQ(api_.stream_device(stream), 5);
  EXPECT_EQ(api_.destroy_stream(stream), 0);
  // A reset forgets every thread's device.
  fake_.Reset();
  EXPECT_EQ(api_.get_device(&device), fake::kFakeAclNoDevice);
}

TEST_F(FakeAsyncTest, NewCallsAreLoggedAndCanBeFailed) {
  ASSERT_EQ(api_.set_device(0), 0);
  api_.set_async(1);
  aclrtStream stream = NewStream();
  fake_.FailAt("aclrtMalloc", 1, 207001);
  void* device = nullptr;
  EXPECT_EQ(api_.malloc(&device, 64, 0), 207001);
  ASSERT_EQ(api_.malloc(&device, 64, 0), 0);
  fake_.FailAt("aclrtMemsetAsync", 1, 4242);
  EXPECT_EQ(api_.memset_async(device, 64, 1, 64, stream), 4242);
  fake_.FailAt("aclrtLaunchCallback", 1, 4343);
  EXPECT_EQ(api_.launch_callback(SecondCallback, nullptr, 0, stream), 4343);
  fake_.FailAt("aclrtSynchronizeDevice", 1, 4444);
  EXPECT_EQ(api_.synchronize_device(), 4444);
  // An on-stream shmem call without a job fails its stream, in order.
  api_.quiet(stream);
  EXPECT_EQ(api_.synchronize(stream), fake::kFakeAclStreamError);
  const std::string log = fake_.Calls();
  EXPECT_EQ(CountLines(log, "aclrtMalloc size=64 policy=0"), 2) << log;
  EXPECT_EQ(CountLines(log, "aclrtMemsetAsync devPtr="), 1) << log;
  EXPECT_EQ(CountLines(log, "aclrtLaunchCallback fn="), 1) << log;
  EXPECT_EQ(CountLines(log, "result aclrtMalloc ptr="), 1) << log;
  EXPECT_EQ(api_.free(device), 0);
  EXPECT_EQ(api_.destroy_stream(stream), 0);
}

TEST_F(FakeAsyncTest, TheNullStreamIsAsynchronousToo) {
  InitJob();
  std::vector<unsigned char> source(kBytes, 'N');
  api_.wait_until(word_, ACLSHMEM_CMP_EQ, 1, nullptr);
  ASSERT_EQ(api_.memcpy_async(data_, kBytes, source.data(), kBytes, ACL_MEMCPY_HOST_TO_DEVICE,
                              nullptr),
            0);
  EXPECT_EQ(api_.pending(nullptr), 2);
  SignalFromAnotherThread();
  EXPECT_EQ(api_.synchronize(nullptr), 0);
  EXPECT_TRUE(AllBytes(data_, kBytes, 'N'));
  EXPECT_EQ(api_.destroy_stream(nullptr), fake::kFakeAclBadStream);
}

TEST_F(FakeAsyncTest, DestroyDrainsAndResetStopsStuckWorkers) {
  InitJob(/*timeout_seconds=*/30);
  aclrtStream stream = NewStream();
  std::atomic<bool> ran{false};
  auto slow = [](void* user) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    static_cast<std::atomic<bool>*>(user)->store(true);
  };
  ASSERT_EQ(api_.launch_callback(slow, &ran, ACL_CALLBACK_BLOCK, stream), 0);
  EXPECT_EQ(api_.destroy_stream(stream), 0);
  EXPECT_TRUE(ran.load()) << "destroy drains the queue first";
  EXPECT_EQ(api_.workers(), 0);
  // Two streams stuck in waits that would last 30 s: a reset ends them at once.
  aclrtStream a = NewStream();
  aclrtStream b = NewStream();
  api_.wait_until(word_, ACLSHMEM_CMP_EQ, 1, a);
  aclrtEvent event = nullptr;
  ASSERT_EQ(api_.create_event(&event), 0);
  ASSERT_EQ(api_.record_event(event, a), 0);
  ASSERT_EQ(api_.stream_wait_event(b, event), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(api_.workers(), 2);
  EXPECT_EQ(api_.pending(b), 1);
  const auto start = std::chrono::steady_clock::now();
  fake_.Reset();  // also tears down the job
  initialized_ = false;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(api_.workers(), 0);
  EXPECT_EQ(api_.pending(a), -1) << "reset forgets the streams";
}

TEST_F(FakeAsyncTest, ATimedOutWaitSurfacesAndFinalizeUnmapsSafely) {
  InitJob(/*timeout_seconds=*/1);
  aclrtStream stream = NewStream();
  std::vector<unsigned char> source(kBytes, 'A');
  api_.wait_until(word_, ACLSHMEM_CMP_EQ, 1, stream);  // nobody signals
  api_.put(data_, source.data(), kBytes, 0, stream);
  EXPECT_EQ(api_.synchronize(stream), fake::kFakeAclStreamTimeout);
  EXPECT_TRUE(AllBytes(data_, kBytes, 0)) << "the put after the failed wait is skipped";
  // Work still queued at finalize: it drains (bounded), then the heap goes away safely.
  api_.wait_until(word_, ACLSHMEM_CMP_EQ, 1, stream);
  api_.put(data_, source.data(), kBytes, 0, stream);
  EXPECT_EQ(api_.finalize(0), ACLSHMEM_SUCCESS);
  initialized_ = false;
  EXPECT_EQ(api_.synchronize(stream), fake::kFakeAclStreamTimeout);
  const std::string log = fake_.Calls();
  EXPECT_EQ(CountLines(log, "timeout aclshmemx_signal_wait_until_on_stream"), 2) << log;
  EXPECT_EQ(CountLines(log, "skipped aclshmemx_putmem_on_stream"), 2) << log;
  EXPECT_EQ(api_.destroy_stream(stream), 0);
}

TEST(FakeAsyncEnvironment, TurnsAsynchronousStreamsOnAndTheLibraryStillUnloads) {
  if (void* loaded = dlopen(fake::kV10, RTLD_NOW | RTLD_NOLOAD)) {
    dlclose(loaded);
    GTEST_SKIP() << "v1.0 is loaded already: it read its environment before";
  }
  const char* before = std::getenv("HPS_FAKE_ACL_ASYNC_STREAMS");
  const std::string saved = before != nullptr ? before : "";
  setenv("HPS_FAKE_ACL_ASYNC_STREAMS", "1", 1);
  {
    FakeCann fake(fake::kV10);  // first use: the environment is read
    if (before != nullptr) {
      setenv("HPS_FAKE_ACL_ASYNC_STREAMS", saved.c_str(), 1);
    } else {
      unsetenv("HPS_FAKE_ACL_ASYNC_STREAMS");
    }
    auto async_streams =
        reinterpret_cast<HpsFakeAsyncStreamsFn>(fake.Symbol("hps_fake_async_streams"));
    auto workers = reinterpret_cast<HpsFakeWorkersFn>(fake.Symbol("hps_fake_workers"));
    auto create = reinterpret_cast<AclrtCreateStreamFn>(fake.Symbol("aclrtCreateStream"));
    ASSERT_TRUE(async_streams != nullptr && workers != nullptr && create != nullptr);
    EXPECT_EQ(async_streams(), 1);
    fake.Reset();
    EXPECT_EQ(async_streams(), 1) << "a reset restores the environment's mode";
    aclrtStream stream = nullptr;
    ASSERT_EQ(create(&stream), 0);
    EXPECT_EQ(workers(), 1);
    // Left undestroyed: closing resets (joins the worker), then unloads.
  }
  EXPECT_EQ(dlopen(fake::kV10, RTLD_NOW | RTLD_NOLOAD), nullptr) << "the fake stayed loaded";
}

}  // namespace
}  // namespace hyper_parallel::shmem::cann
