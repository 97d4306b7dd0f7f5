#include "backends/cann/vendor_calls.h"

#include <dlfcn.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "testing/fake_cann/fake_library.h"

namespace hyper_parallel::shmem::cann {
namespace {

using fake::CountLines;
using fake::FakeCann;
using fake::Line;
using fake::LineIndex;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string PointerText(const void* pointer) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%p", pointer);
  return buffer;
}

constexpr std::uint64_t kMiB = 1ull << 20;

// One fake variant, its library, and an adapter over it.
class CannVendorTest : public ::testing::Test {
 protected:
  explicit CannVendorTest(const char* variant = fake::kV15) : fake_(variant) {
    const Status status = fake_.Load(&library_);
    EXPECT_TRUE(status.ok()) << status.ToString();
    if (library_ != nullptr) vendor_ = std::make_unique<CannVendor>(library_);
  }

  // Device, unique id, init of a one-PE job.
  Status InitOnePe(std::uint32_t timeout_seconds = 7, std::uint64_t heap_bytes = kMiB,
                   int device = 0) {
    HPS_RETURN_IF_ERROR(vendor_->SetDevice(device));
    InitParams params;
    params.heap_bytes = heap_bytes;
    params.timeout_seconds = timeout_seconds;
    HPS_RETURN_IF_ERROR(vendor_->GetUniqueId(&params.unique_id));
    return vendor_->Init(params);
  }

  FakeCann fake_;
  std::shared_ptr<const VendorLibrary> library_;
  std::unique_ptr<CannVendor> vendor_;
};

class CannVendorV10Test : public CannVendorTest {
 protected:
  CannVendorV10Test() : CannVendorTest(fake::kV10) {}
};

class CannVendorV15Rc1Test : public CannVendorTest {
 protected:
  CannVendorV15Rc1Test() : CannVendorTest(fake::kV15Rc1) {}
};

TEST(CannVendorMapping, TimeoutCodesAreTimeout) {
  for (int code : {ACLSHMEM_TIMEOUT_ERROR, ACLSHMEM_INNER_TIMEOUT}) {
    const Status status = MapShmemResult(code, VendorCall::kInitAttr);
    EXPECT_EQ(status.code(), ErrorCode::kTimeout) << code;
    EXPECT_TRUE(Contains(status.message(), "call=aclshmemx_init_attr")) << status.message();
    EXPECT_TRUE(Contains(status.message(), "vendor_code=" + std::to_string(code)));
  }
  EXPECT_TRUE(Contains(MapShmemResult(-10, VendorCall::kInitAttr).message(),
                       "vendor_code=-10 (ACLSHMEM_INNER_TIMEOUT)"));
}

TEST(CannVendorMapping, OtherCodesAreBackendErrorsWithCodeAndCall) {
  EXPECT_TRUE(MapShmemResult(0, VendorCall::kInitAttr).ok());
  const Status smem = MapShmemResult(-3, VendorCall::kInitAttr);
  EXPECT_EQ(smem.code(), ErrorCode::kBackendError);
  EXPECT_EQ(smem.message(),
            "vendor call failed: call=aclshmemx_init_attr, vendor_code=-3 (ACLSHMEM_SMEM_ERROR)");
  for (int code : {-1, -2, -4, -5, -6, -8, -9, -11, -100, -42, 7}) {
    const Status status = MapShmemResult(code, VendorCall::kFinalizeX);
    EXPECT_EQ(status.code(), ErrorCode::kBackendError) << code;
    EXPECT_TRUE(Contains(status.message(), "call=aclshmemx_finalize")) << status.message();
  }
  EXPECT_TRUE(Contains(MapShmemResult(-42, VendorCall::kMalloc).message(),
                       "vendor_code=-42 (unknown)"));
  EXPECT_EQ(AclshmemErrorName(-100), "ACLSHMEM_NOT_SUPPORTED");
  EXPECT_EQ(AclshmemErrorName(-8), "ACLSHMEM_MALLOC_FAILED");
}

TEST(CannVendorMapping, AclErrorsAreBackendErrors) {
  EXPECT_TRUE(MapAclResult(0, VendorCall::kAclrtGetDevice).ok());
  const Status status = MapAclResult(507899, VendorCall::kAclrtSynchronizeStream);
  EXPECT_EQ(status.code(), ErrorCode::kBackendError);
  EXPECT_EQ(status.message(),
            "ACL runtime call failed: call=aclrtSynchronizeStream, acl_code=507899");
}

TEST(CannVendorMapping, TimeoutSecondsRoundUp) {
  using std::chrono::milliseconds;
  EXPECT_EQ(TimeoutSecondsFrom(milliseconds(0)), 1u);
  EXPECT_EQ(TimeoutSecondsFrom(milliseconds(1)), 1u);
  EXPECT_EQ(TimeoutSecondsFrom(milliseconds(1000)), 1u);
  EXPECT_EQ(TimeoutSecondsFrom(milliseconds(1001)), 2u);
  EXPECT_EQ(TimeoutSecondsFrom(milliseconds(120000)), 120u);
}

TEST(CannVendorDevice, SocNamesMapToModels) {
  struct Case {
    const char* soc;
    const char* model;
  };
  for (const Case& c : {Case{"Ascend910B3", "910"}, Case{"ascend910_9391", "910"},
                        Case{"Ascend910_9382", "910"}, Case{"dav-2201", "910"},
                        Case{"Ascend950PR_9599", "950"}, Case{"ascend950dt", "950"},
                        Case{"dav-3510", "950"}}) {
    std::string model;
    const Status status = DeviceModelOf(c.soc, &model);
    ASSERT_TRUE(status.ok()) << c.soc << ": " << status.ToString();
    EXPECT_EQ(model, c.model) << c.soc;
  }
  for (const char* soc : {"Ascend310P3", "", "Ascend", "dav-1001"}) {
    std::string model;
    const Status status = DeviceModelOf(soc, &model);
    EXPECT_EQ(status.code(), ErrorCode::kUnsupportedCapability) << soc;
    EXPECT_TRUE(Contains(status.message(), std::string("\"") + soc + "\"")) << status.message();
  }
}

TEST_F(CannVendorTest, InitFillsEveryAttributeAndTurnsTlsOffFirst) {
  ASSERT_TRUE(InitOnePe(/*timeout_seconds=*/7, /*heap_bytes=*/3 * kMiB).ok());
  EXPECT_EQ(vendor_->state(), VendorState::kInitialized);
  const std::string log = fake_.Calls();
  const int tls = LineIndex(log, "aclshmemx_set_conf_store_tls");
  const int init = LineIndex(log, "aclshmemx_init_attr");
  ASSERT_GE(tls, 0) << log;
  ASSERT_GE(init, 0) << log;
  EXPECT_LT(tls, init) << log;
  EXPECT_LT(LineIndex(log, "aclrtGetDevice"), init) << log;
  EXPECT_EQ(Line(log, "aclshmemx_set_conf_store_tls"),
            "aclshmemx_set_conf_store_tls enable=0 tls_info=null tls_info_len=0");

  const aclshmemx_init_attr_t* attr = vendor_->init_attr();
  ASSERT_NE(attr, nullptr);
  // Heap rounded up to the vendor's 2 MiB page; every field explicit; UNIQUEID bootstrap.
  const std::string expected =
      "aclshmemx_init_attr flags=8 attr=" + PointerText(attr) +
      " my_pe=0 n_pes=1 ip_port=\"\" local_mem_size=4194304 version=65560 engine=1 "
      "shm_init_timeout=7 shm_create_timeout=7 control_timeout=7 sockFd=-1 comm_args=" +
      PointerText(attr->comm_args) + " instance_id=0";
  EXPECT_EQ(Line(log, "aclshmemx_init_attr"), expected);
  for (char c : attr->ip_port) EXPECT_EQ(c, '\0');
  const auto* uid = static_cast<const aclshmemx_uniqueid_t*>(attr->comm_args);
  EXPECT_EQ(uid->version, kUniqueIdVersion);
  EXPECT_NE(fake_.UidSegment(uid), nullptr);
  ASSERT_TRUE(vendor_->Finalize().ok());
}

TEST_F(CannVendorTest, AttributesAndUniqueIdStayAliveUntilFinalize) {
  ASSERT_TRUE(vendor_->SetDevice(0).ok());
  {
    auto params = std::make_unique<InitParams>();
    params->heap_bytes = 2 * kMiB;
    params->timeout_seconds = 5;
    ASSERT_TRUE(vendor_->GetUniqueId(&params->unique_id).ok());
    ASSERT_TRUE(vendor_->Init(*params).ok());
    // The caller's copy is gone: the adapter must own what the vendor points at.
    std::memset(static_cast<void*>(params.get()), 0xAB, sizeof(InitParams));
  }
  std::vector<char> churn(4096, 'x');  // reuse freed heap memory
  void* ptr = nullptr;
  ASSERT_TRUE(vendor_->Malloc(256, &ptr).ok());
  EXPECT_EQ(Line(fake_.Calls(), "attr_reread"),
            "attr_reread attr_intact=1 uid_intact=1 my_pe=0 n_pes=1 local_mem_size=2097152");
  ASSERT_TRUE(vendor_->Free(ptr).ok());
  ASSERT_TRUE(vendor_->Finalize().ok());
  EXPECT_EQ(vendor_->init_attr(), nullptr);
}

TEST_F(CannVendorTest, HeapAllocatesTranslatesAndFrees) {
  ASSERT_TRUE(InitOnePe().ok());
  int pe = -1;
  int n_pes = -1;
  ASSERT_TRUE(vendor_->MyPe(&pe).ok());
  ASSERT_TRUE(vendor_->NPes(&n_pes).ok());
  EXPECT_EQ(pe, 0);
  EXPECT_EQ(n_pes, 1);

  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  ASSERT_TRUE(vendor_->Malloc(100, &a).ok());
  ASSERT_TRUE(vendor_->Malloc(10, &b).ok());
  ASSERT_TRUE(vendor_->Align(4096, 8, &c).ok());
  EXPECT_EQ(static_cast<std::byte*>(b) - static_cast<std::byte*>(a), 128);
  EXPECT_EQ(static_cast<std::byte*>(c) - static_cast<std::byte*>(a), 4096);
  const std::string log = fake_.Calls();
  EXPECT_EQ(CountLines(log, "aclshmem_malloc alignment=64 size=100"), 1) << log;
  EXPECT_EQ(CountLines(log, "aclshmem_align alignment=4096 size=8"), 1) << log;

  void* same = nullptr;
  ASSERT_TRUE(vendor_->Ptr(b, 0, &same).ok());
  EXPECT_EQ(same, b);
  void* none = nullptr;
  const Status out_of_range = vendor_->Ptr(b, 1, &none);
  EXPECT_EQ(out_of_range.code(), ErrorCode::kBackendError);
  EXPECT_TRUE(Contains(out_of_range.message(), "call=aclshmem_ptr")) << out_of_range.message();
  EXPECT_TRUE(Contains(out_of_range.message(), "pe=1")) << out_of_range.message();

  ASSERT_TRUE(vendor_->Free(a).ok());
  void* reused = nullptr;
  ASSERT_TRUE(vendor_->Malloc(64, &reused).ok());
  EXPECT_EQ(reused, a);  // first fit

  EXPECT_EQ(vendor_->Malloc(0, &none).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(vendor_->Align(3, 8, &none).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(vendor_->Free(nullptr).code(), ErrorCode::kInvalidArgument);
  void* too_big = nullptr;
  const Status exhausted = vendor_->Malloc(64 * kMiB, &too_big);
  EXPECT_EQ(exhausted.code(), ErrorCode::kBackendError);
  EXPECT_TRUE(Contains(exhausted.message(), "call=aclshmem_malloc")) << exhausted.message();
  ASSERT_TRUE(vendor_->Finalize().ok());
}

TEST_F(CannVendorTest, OnStreamCallsForwardTheStreamUnchanged) {
  ASSERT_TRUE(InitOnePe().ok());
  aclrtStream stream = nullptr;
  ASSERT_TRUE(vendor_->CreateStream(&stream).ok());
  ASSERT_NE(stream, nullptr);
  void* data = nullptr;
  void* signal = nullptr;
  ASSERT_TRUE(vendor_->Malloc(64, &data).ok());
  ASSERT_TRUE(vendor_->Malloc(8, &signal).ok());
  auto* word = static_cast<std::int32_t*>(signal);
  *word = 0;

  const char message[] = "hello, npu";
  char back[sizeof message] = {};
  ASSERT_TRUE(vendor_->PutOnStream(data, message, sizeof message, 0, stream).ok());
  ASSERT_TRUE(vendor_->SignalOpOnStream(word, 5, ACLSHMEM_SIGNAL_ADD, 0, stream).ok());
  ASSERT_TRUE(vendor_->SignalOpOnStream(word, 2, ACLSHMEM_SIGNAL_ADD, 0, stream).ok());
  ASSERT_TRUE(vendor_->SignalWaitUntilOnStream(word, ACLSHMEM_CMP_GE, 7, stream).ok());
  ASSERT_TRUE(vendor_->GetOnStream(back, data, sizeof back, 0, stream).ok());
  ASSERT_TRUE(vendor_->QuietOnStream(stream).ok());
  ASSERT_TRUE(vendor_->BarrierAllOnStream(stream).ok());
  ASSERT_TRUE(vendor_->SignalOpOnStream(word, 3, ACLSHMEM_SIGNAL_SET, 0, stream).ok());
  ASSERT_TRUE(vendor_->SynchronizeStream(stream).ok());
  EXPECT_STREQ(back, message);
  EXPECT_EQ(*word, 3);

  const std::string log = fake_.Calls();
  const std::string s = PointerText(stream);
  EXPECT_EQ(Line(log, "aclshmemx_putmem_on_stream"),
            "aclshmemx_putmem_on_stream dst=" + PointerText(data) + " src=" +
                PointerText(message) + " bytes=" + std::to_string(sizeof message) +
                " pe=0 stream=" + s);
  EXPECT_EQ(Line(log, "aclshmemx_signal_op_on_stream"),
            "aclshmemx_signal_op_on_stream sig_addr=" + PointerText(word) +
                " signal=5 sig_op=1 pe=0 stream=" + s);
  EXPECT_EQ(Line(log, "aclshmemx_signal_wait_until_on_stream"),
            "aclshmemx_signal_wait_until_on_stream sig_addr=" + PointerText(word) +
                " cmp=3 cmp_val=7 stream=" + s);
  EXPECT_EQ(Line(log, "aclshmemx_getmem_on_stream"),
            "aclshmemx_getmem_on_stream dst=" + PointerText(back) + " src=" + PointerText(data) +
                " bytes=" + std::to_string(sizeof back) + " pe=0 stream=" + s);
  EXPECT_EQ(Line(log, "aclshmemx_quiet_on_stream"), "aclshmemx_quiet_on_stream stream=" + s);
  EXPECT_EQ(Line(log, "aclshmemx_barrier_all_on_stream"),
            "aclshmemx_barrier_all_on_stream stream=" + s);
  EXPECT_EQ(Line(log, "aclrtSynchronizeStream"), "aclrtSynchronizeStream stream=" + s);
  ASSERT_TRUE(vendor_->DestroyStream(stream).ok());
  ASSERT_TRUE(vendor_->Finalize().ok());
}

TEST_F(CannVendorTest, NullStreamsAndBadEnumsAreRefusedBeforeTheVendor) {
  ASSERT_TRUE(InitOnePe().ok());
  void* data = nullptr;
  ASSERT_TRUE(vendor_->Malloc(64, &data).ok());
  auto* word = static_cast<std::int32_t*>(data);
  fake_.Reset();  // drop the log, keep nothing else relevant
  ASSERT_TRUE(InitOnePe().code() == ErrorCode::kInvalidState);  // still initialised
  const char byte = 1;
  const std::vector<Status> refused = {
      vendor_->PutOnStream(data, &byte, 1, 0, nullptr),
      vendor_->GetOnStream(data, data, 1, 0, nullptr),
      vendor_->SignalOpOnStream(word, 1, ACLSHMEM_SIGNAL_ADD, 0, nullptr),
      vendor_->SignalWaitUntilOnStream(word, ACLSHMEM_CMP_EQ, 1, nullptr),
      vendor_->QuietOnStream(nullptr),
      vendor_->BarrierAllOnStream(nullptr),
  };
  for (const Status& status : refused) {
    EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << status.ToString();
    EXPECT_TRUE(Contains(status.message(), "non-null aclrtStream")) << status.message();
  }
  aclrtStream stream = reinterpret_cast<aclrtStream>(0x1000);
  EXPECT_EQ(vendor_->SignalOpOnStream(word, 1, static_cast<AclshmemSignalOp>(2), 0, stream).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(vendor_->SignalWaitUntilOnStream(word, static_cast<AclshmemCmp>(6), 1, stream).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(CountLines(fake_.Calls(), "aclshmemx_"), 0) << fake_.Calls();
}

TEST_F(CannVendorTest, ContextsAreEnforcedBeforeTheVendor) {
  ASSERT_TRUE(InitOnePe().ok());
  aclrtStream stream = nullptr;
  ASSERT_TRUE(vendor_->CreateStream(&stream).ok());
  void* data = nullptr;
  ASSERT_TRUE(vendor_->Malloc(64, &data).ok());
  const char byte = 7;
  {
    CallSiteScope op(CallSite::kCustomOp);
    void* other = nullptr;
    const Status malloc_status = vendor_->Malloc(64, &other);
    EXPECT_EQ(malloc_status.code(), ErrorCode::kUnsupportedCapability);
    EXPECT_TRUE(Contains(malloc_status.message(), "call=aclshmem_malloc"));
    EXPECT_TRUE(Contains(malloc_status.message(), "context=custom_op"));
    EXPECT_EQ(vendor_->SynchronizeStream(stream).code(), ErrorCode::kUnsupportedCapability);
    EXPECT_EQ(vendor_->Finalize().code(), ErrorCode::kUnsupportedCapability);
    EXPECT_TRUE(vendor_->PutOnStream(data, &byte, 1, 0, stream).ok());  // enqueue is fine
    int device = -1;
    EXPECT_TRUE(vendor_->CurrentDevice(&device).ok());
  }
  {
    CallSiteScope kernel(CallSite::kDeviceKernel);
    const Status put = vendor_->PutOnStream(data, &byte, 1, 0, stream);
    EXPECT_EQ(put.code(), ErrorCode::kUnsupportedCapability);
    EXPECT_TRUE(Contains(put.message(), "device twin")) << put.message();
    int pe = -1;
    EXPECT_EQ(vendor_->MyPe(&pe).code(), ErrorCode::kUnsupportedCapability);
  }
  {
    CallSiteScope callback(CallSite::kStreamCallback);
    int pe = -1;
    EXPECT_TRUE(vendor_->MyPe(&pe).ok());
    EXPECT_EQ(vendor_->PutOnStream(data, &byte, 1, 0, stream).code(),
              ErrorCode::kUnsupportedCapability);
  }
  const std::string log = fake_.Calls();
  EXPECT_EQ(CountLines(log, "aclshmem_malloc"), 1) << log;
  EXPECT_EQ(CountLines(log, "aclshmemx_putmem_on_stream"), 1) << log;
  EXPECT_EQ(CountLines(log, "aclrtSynchronizeStream"), 0) << log;
  EXPECT_EQ(CountLines(log, "aclshmemx_finalize"), 0) << log;
  EXPECT_EQ(*static_cast<char*>(data), 7);
  ASSERT_TRUE(vendor_->Finalize().ok());
}

TEST_F(CannVendorTest, DeviceIdentityIsFrozenAtInitAndDriftIsDetected) {
  fake_.SetSoc("Ascend950PR_9599");
  ASSERT_TRUE(InitOnePe(7, kMiB, /*device=*/3).ok());
  EXPECT_EQ(vendor_->identity().device, 3);
  EXPECT_EQ(vendor_->identity().soc, "Ascend950PR_9599");
  EXPECT_EQ(vendor_->identity().model, "950");
  EXPECT_TRUE(vendor_->CheckDrift().ok());
  fake_.SetDevice(4);
  const Status drift = vendor_->CheckDrift();
  EXPECT_EQ(drift.code(), ErrorCode::kDeviceMismatch);
  EXPECT_EQ(drift.message(),
            "current NPU differs from the one frozen at init: frozen=npu:3, current=npu:4");
  fake_.SetDevice(3);
  EXPECT_TRUE(vendor_->CheckDrift().ok());
  ASSERT_TRUE(vendor_->Finalize().ok());
}

TEST_F(CannVendorTest, UnsupportedSocIsRefusedBeforeAnyCollective) {
  fake_.SetSoc("Ascend310P3");
  const Status status = InitOnePe();
  EXPECT_EQ(status.code(), ErrorCode::kUnsupportedCapability);
  EXPECT_TRUE(Contains(status.message(), "\"Ascend310P3\"")) << status.message();
  EXPECT_EQ(vendor_->state(), VendorState::kLoaded);
  EXPECT_EQ(CountLines(fake_.Calls(), "aclshmemx_set_conf_store_tls"), 0);
  EXPECT_EQ(CountLines(fake_.Calls(), "aclshmemx_init_attr"), 0);
  fake_.SetSoc(nullptr);
  std::string soc;
  EXPECT_EQ(vendor_->SocName(&soc).code(), ErrorCode::kBackendError);
  fake_.SetSoc("Ascend910B3");
  ASSERT_TRUE(InitOnePe().ok()) << "a refused SoC leaves the adapter usable";
  EXPECT_EQ(vendor_->identity().model, "910");
  ASSERT_TRUE(vendor_->Finalize().ok());
}

TEST_F(CannVendorTest, InitWithoutADeviceFailsBeforeTheVendor) {
  InitParams params;
  params.heap_bytes = kMiB;
  params.timeout_seconds = 5;
  ASSERT_TRUE(vendor_->GetUniqueId(&params.unique_id).ok());
  const Status status = vendor_->Init(params);
  EXPECT_EQ(status.code(), ErrorCode::kBackendError);
  EXPECT_TRUE(Contains(status.message(), "call=aclrtGetDevice")) << status.message();
  EXPECT_TRUE(Contains(status.message(), "acl_code=107002")) << status.message();
  EXPECT_EQ(CountLines(fake_.Calls(), "aclshmemx_init_attr"), 0);
}

TEST_F(CannVendorTest, InitArgumentsAreCheckedBeforeTheVendor) {
  ASSERT_TRUE(vendor_->SetDevice(0).ok());
  InitParams good;
  good.heap_bytes = kMiB;
  good.timeout_seconds = 5;
  ASSERT_TRUE(vendor_->GetUniqueId(&good.unique_id).ok());
  struct Case {
    std::function<void(InitParams&)> change;
    ErrorCode code;
    const char* text;
  };
  const std::vector<Case> cases = {
      {[](InitParams& p) { p.n_pes = 0; }, ErrorCode::kInvalidArgument, "n_pes must be"},
      {[](InitParams& p) { p.n_pes = 16385; }, ErrorCode::kInvalidArgument, "n_pes must be"},
      {[](InitParams& p) { p.my_pe = 1; }, ErrorCode::kInvalidArgument, "my_pe must be"},
      {[](InitParams& p) { p.my_pe = -1; }, ErrorCode::kInvalidArgument, "my_pe must be"},
      {[](InitParams& p) { p.heap_bytes = 0; }, ErrorCode::kInvalidConfig, "heap size"},
      {[](InitParams& p) { p.heap_bytes = (40ull << 30) + 1; }, ErrorCode::kInvalidConfig,
       "heap size"},
      {[](InitParams& p) { p.timeout_seconds = 0; }, ErrorCode::kInvalidConfig, "timeout"},
      {[](InitParams& p) { p.unique_id[0] = std::byte{0}; }, ErrorCode::kInvalidArgument,
       "unique id's version"},
  };
  for (const Case& c : cases) {
    InitParams params = good;
    c.change(params);
    const Status status = vendor_->Init(params);
    EXPECT_EQ(status.code(), c.code) << status.ToString();
    EXPECT_TRUE(Contains(status.message(), c.text)) << status.message();
    EXPECT_EQ(vendor_->state(), VendorState::kLoaded);
  }
  EXPECT_EQ(CountLines(fake_.Calls(), "aclshmemx_init_attr"), 0);
  ASSERT_TRUE(vendor_->Init(good).ok());
  ASSERT_TRUE(vendor_->Finalize().ok());
}

// The fake validates the attributes the way the ABI says the real library does.
TEST_F(CannVendorTest, FakeRejectsAttributesTheVendorRejects) {
  ASSERT_TRUE(vendor_->SetDevice(0).ok());
  const VendorSymbols& v = library_->symbols();
  aclshmemx_uniqueid_t uid{};
  ASSERT_EQ(v.aclshmemx_get_uniqueid(&uid), 0);
  aclshmemx_init_attr_t good{};
  good.n_pes = 1;
  good.local_mem_size = 2 * kMiB;
  good.option_attr = {kOptionalAttrVersion, ACLSHMEM_DATA_OP_MTE, 5, 5, 5, -1};
  good.comm_args = &uid;
  std::vector<std::function<void(aclshmemx_init_attr_t&)>> breakers = {
      [](aclshmemx_init_attr_t& a) { a.n_pes = 0; },
      [](aclshmemx_init_attr_t& a) { a.n_pes = 16385; },
      [](aclshmemx_init_attr_t& a) { a.my_pe = 1; },
      [](aclshmemx_init_attr_t& a) { a.local_mem_size = 0; },
      [](aclshmemx_init_attr_t& a) { a.option_attr.shm_init_timeout = 0; },
      [](aclshmemx_init_attr_t& a) { a.option_attr.control_operation_timeout = 0; },
      [](aclshmemx_init_attr_t& a) { a.option_attr.data_op_engine_type = 0; },
      [](aclshmemx_init_attr_t& a) { a.option_attr.data_op_engine_type = 0x10; },
      [](aclshmemx_init_attr_t& a) { a.comm_args = nullptr; },
      [](aclshmemx_init_attr_t& a) { a.instance_id = 1; },
  };
  for (auto& breaker : breakers) {
    aclshmemx_init_attr_t attr = good;
    breaker(attr);
    EXPECT_EQ(v.aclshmemx_init_attr(ACLSHMEMX_INIT_WITH_UNIQUEID, &attr), ACLSHMEM_INVALID_PARAM);
  }
  aclshmemx_init_attr_t attr = good;
  EXPECT_EQ(v.aclshmemx_init_attr(ACLSHMEMX_INIT_WITH_DEFAULT, &attr), ACLSHMEM_INVALID_PARAM);
  EXPECT_EQ(v.aclshmemx_init_attr(ACLSHMEMX_INIT_WITH_UNIQUEID, &attr), ACLSHMEM_SUCCESS);
  EXPECT_EQ(v.aclshmemx_finalize(0), ACLSHMEM_SUCCESS);
}

// An injected failure at each vendor call the adapter makes, mapped and named.
TEST_F(CannVendorTest, InjectedFailuresAtEveryCallAreMapped) {
  struct Case {
    const char* fake_call;
    int code;
    ErrorCode expected;
    std::string text;
    std::function<Status(CannVendor&)> act;
  };
  auto sync = [](CannVendor& v, const std::function<Status(CannVendor&, aclrtStream)>& op) {
    aclrtStream stream = nullptr;
    HPS_RETURN_IF_ERROR(v.CreateStream(&stream));
    HPS_RETURN_IF_ERROR(op(v, stream));
    Status status = v.SynchronizeStream(stream);
    (void)v.DestroyStream(stream);
    return status;
  };
  auto word = [](CannVendor& v) {
    void* p = nullptr;
    (void)v.Malloc(8, &p);
    return static_cast<std::int32_t*>(p);
  };
  const std::vector<Case> cases = {
      {"aclrtSetDevice", 100, ErrorCode::kBackendError, "call=aclrtSetDevice, acl_code=100",
       [](CannVendor& v) { return v.SetDevice(1); }},
      {"aclrtGetDevice", 101, ErrorCode::kBackendError, "call=aclrtGetDevice, acl_code=101",
       [](CannVendor& v) { int d; return v.CurrentDevice(&d); }},
      {"aclrtGetSocName", 1, ErrorCode::kBackendError, "call=aclrtGetSocName",
       [](CannVendor& v) { std::string s; return v.SocName(&s); }},
      {"aclrtCreateStream", 102, ErrorCode::kBackendError, "call=aclrtCreateStream, acl_code=102",
       [](CannVendor& v) { aclrtStream s; return v.CreateStream(&s); }},
      {"aclrtDestroyStream", 103, ErrorCode::kBackendError,
       "call=aclrtDestroyStream, acl_code=103",
       [](CannVendor& v) {
         aclrtStream s = nullptr;
         HPS_RETURN_IF_ERROR(v.CreateStream(&s));
         return v.DestroyStream(s);
       }},
      {"aclrtSynchronizeStream", 104, ErrorCode::kBackendError,
       "call=aclrtSynchronizeStream, acl_code=104",
       [&](CannVendor& v) { return sync(v, [](CannVendor&, aclrtStream) { return Status(); }); }},
      {"aclshmem_malloc", -8, ErrorCode::kBackendError, "call=aclshmem_malloc",
       [](CannVendor& v) { void* p; return v.Malloc(16, &p); }},
      {"aclshmem_align", -8, ErrorCode::kBackendError, "call=aclshmem_align",
       [](CannVendor& v) { void* p; return v.Align(128, 16, &p); }},
      {"aclshmem_ptr", -1, ErrorCode::kBackendError, "call=aclshmem_ptr",
       [&](CannVendor& v) { void* p; return v.Ptr(word(v), 0, &p); }},
      {"aclshmem_my_pe", -1, ErrorCode::kBackendError, "call=aclshmem_my_pe, result=-1",
       [](CannVendor& v) { int pe; return v.MyPe(&pe); }},
      {"aclshmem_n_pes", -5, ErrorCode::kBackendError, "call=aclshmem_n_pes, result=-5",
       [](CannVendor& v) { int n; return v.NPes(&n); }},
      {"aclshmemx_putmem_on_stream", 201, ErrorCode::kBackendError, "acl_code=201",
       [&](CannVendor& v) {
         return sync(v, [&](CannVendor& w, aclrtStream s) {
           const char b = 0;
           return w.PutOnStream(word(w), &b, 1, 0, s);
         });
       }},
      {"aclshmemx_getmem_on_stream", 202, ErrorCode::kBackendError, "acl_code=202",
       [&](CannVendor& v) {
         return sync(v, [&](CannVendor& w, aclrtStream s) {
           char b = 0;
           return w.GetOnStream(&b, word(w), 1, 0, s);
         });
       }},
      {"aclshmemx_signal_op_on_stream", 203, ErrorCode::kBackendError, "acl_code=203",
       [&](CannVendor& v) {
         return sync(v, [&](CannVendor& w, aclrtStream s) {
           return w.SignalOpOnStream(word(w), 1, ACLSHMEM_SIGNAL_SET, 0, s);
         });
       }},
      {"aclshmemx_signal_wait_until_on_stream", 204, ErrorCode::kBackendError, "acl_code=204",
       [&](CannVendor& v) {
         return sync(v, [&](CannVendor& w, aclrtStream s) {
           return w.SignalWaitUntilOnStream(word(w), ACLSHMEM_CMP_EQ, 0, s);
         });
       }},
      {"aclshmemx_quiet_on_stream", 205, ErrorCode::kBackendError, "acl_code=205",
       [&](CannVendor& v) {
         return sync(v, [](CannVendor& w, aclrtStream s) { return w.QuietOnStream(s); });
       }},
      {"aclshmemx_barrier_all_on_stream", 206, ErrorCode::kBackendError, "acl_code=206",
       [&](CannVendor& v) {
         return sync(v, [](CannVendor& w, aclrtStream s) { return w.BarrierAllOnStream(s); });
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fake_call);
    fake_.Reset();
    auto vendor = std::make_unique<CannVendor>(library_);
    ASSERT_TRUE(vendor->SetDevice(0).ok());
    InitParams params;
    params.heap_bytes = kMiB;
    params.timeout_seconds = 5;
    ASSERT_TRUE(vendor->GetUniqueId(&params.unique_id).ok());
    ASSERT_TRUE(vendor->Init(params).ok());
    fake_.FailAt(c.fake_call, 1, c.code);
    const Status status = c.act(*vendor);
    EXPECT_EQ(status.code(), c.expected) << status.ToString();
    EXPECT_TRUE(Contains(status.message(), c.text)) << status.message();
    // The failure came from the vendor call itself.
    const std::string log = fake_.Calls();
    const std::size_t injected = log.find(" injected=" + std::to_string(c.code));
    ASSERT_NE(injected, std::string::npos) << log;
    const std::size_t line = log.rfind('\n', injected);
    EXPECT_TRUE(log.substr(line == std::string::npos ? 0 : line + 1)
                    .starts_with(std::string(c.fake_call) + " "))
        << log;
    fake_.SetDevice(0);
    EXPECT_TRUE(vendor->Finalize().ok()) << "a data-path failure is not terminal";
  }
}

TEST_F(CannVendorTest, InjectedFailuresInInitAreTerminal) {
  struct Case {
    const char* fake_call;
    int code;
    ErrorCode expected;
    const char* text;
  };
  for (const Case& c :
       {Case{"aclshmemx_set_conf_store_tls", -7, ErrorCode::kTimeout,
             "call=aclshmemx_set_conf_store_tls, vendor_code=-7 (ACLSHMEM_TIMEOUT_ERROR)"},
        Case{"aclshmemx_init_attr", -10, ErrorCode::kTimeout,
             "call=aclshmemx_init_attr, vendor_code=-10 (ACLSHMEM_INNER_TIMEOUT)"},
        Case{"aclshmemx_init_attr", -6, ErrorCode::kBackendError,
             "call=aclshmemx_init_attr, vendor_code=-6 (ACLSHMEM_BOOTSTRAP_ERROR)"},
        Case{"aclshmemx_get_uniqueid", -3, ErrorCode::kBackendError,
             "call=aclshmemx_get_uniqueid, vendor_code=-3 (ACLSHMEM_SMEM_ERROR)"}}) {
    SCOPED_TRACE(std::string(c.fake_call) + " " + std::to_string(c.code));
    fake_.Reset();
    auto vendor = std::make_unique<CannVendor>(library_);
    ASSERT_TRUE(vendor->SetDevice(0).ok());
    fake_.FailAt(c.fake_call, 1, c.code);
    InitParams params;
    params.heap_bytes = kMiB;
    params.timeout_seconds = 5;
    Status status = vendor->GetUniqueId(&params.unique_id);
    if (status.ok()) status = vendor->Init(params);
    EXPECT_EQ(status.code(), c.expected) << status.ToString();
    EXPECT_TRUE(Contains(status.message(), c.text)) << status.message();
    if (std::string(c.fake_call) == "aclshmemx_get_uniqueid") {
      EXPECT_EQ(vendor->state(), VendorState::kLoaded) << "get_uniqueid failing is not terminal";
      continue;
    }
    EXPECT_EQ(vendor->state(), VendorState::kFailed);
    void* ptr = nullptr;
    const Status after = vendor->Malloc(8, &ptr);
    EXPECT_EQ(after.code(), ErrorCode::kInvalidState);
    EXPECT_TRUE(Contains(after.message(), "first_failure=vendor call")) << after.message();
    EXPECT_EQ(vendor->Init(params).code(), ErrorCode::kInvalidState);
  }
}

TEST_F(CannVendorTest, FailedFinalizeIsTerminal) {
  ASSERT_TRUE(InitOnePe().ok());
  fake_.FailAt("aclshmemx_finalize", 1, ACLSHMEM_SMEM_ERROR);
  const Status status = vendor_->Finalize();
  EXPECT_EQ(status.code(), ErrorCode::kBackendError);
  EXPECT_EQ(status.message(),
            "vendor call failed: call=aclshmemx_finalize, vendor_code=-3 (ACLSHMEM_SMEM_ERROR)");
  EXPECT_EQ(vendor_->state(), VendorState::kFailed);
  EXPECT_EQ(vendor_->terminal_failure().message(), status.message());
  const std::string before = fake_.Calls();
  void* ptr = nullptr;
  const Status malloc_status = vendor_->Malloc(8, &ptr);
  EXPECT_EQ(malloc_status.code(), ErrorCode::kInvalidState);
  EXPECT_EQ(malloc_status.message(),
            "vendor adapter is unusable after a failed init or finalize: call=aclshmem_malloc, "
            "state=failed, first_failure=" + status.message());
  EXPECT_EQ(vendor_->Finalize().code(), ErrorCode::kInvalidState);
  EXPECT_EQ(vendor_->PutOnStream(ptr, ptr, 1, 0, reinterpret_cast<aclrtStream>(0x10)).code(),
            ErrorCode::kInvalidState);
  int device = -1;
  EXPECT_EQ(vendor_->CurrentDevice(&device).code(), ErrorCode::kInvalidState);
  EXPECT_EQ(fake_.Calls(), before) << "no vendor call after a terminal failure";
}

TEST_F(CannVendorTest, FinalizedAdapterIsUnusable) {
  ASSERT_TRUE(InitOnePe().ok());
  ASSERT_TRUE(vendor_->Finalize().ok());
  EXPECT_EQ(vendor_->state(), VendorState::kFinalized);
  void* ptr = nullptr;
  const Status status = vendor_->Malloc(8, &ptr);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidState);
  EXPECT_TRUE(Contains(status.message(), "state=finalized")) << status.message();
  EXPECT_EQ(vendor_->Finalize().code(), ErrorCode::kInvalidState);
  InitParams params;
  EXPECT_EQ(vendor_->Init(params).code(), ErrorCode::kInvalidState);
}

TEST_F(CannVendorTest, CallsBeforeInitAreInvalidState) {
  void* ptr = nullptr;
  const Status status = vendor_->Malloc(8, &ptr);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidState);
  EXPECT_EQ(status.message(),
            "vendor library is not initialized: call=aclshmem_malloc, state=loaded");
  EXPECT_EQ(vendor_->Finalize().code(), ErrorCode::kInvalidState);
  EXPECT_EQ(vendor_->CheckDrift().code(), ErrorCode::kInvalidState);
  EXPECT_EQ(CountLines(fake_.Calls(), "aclshmem"), 0);
  ASSERT_TRUE(InitOnePe().ok());
  UniqueId late{};
  EXPECT_EQ(vendor_->GetUniqueId(&late).code(), ErrorCode::kInvalidState);
  ASSERT_TRUE(vendor_->Finalize().ok());
}

TEST_F(CannVendorTest, SignalWaitTimesOutOnTheStreamInsteadOfHanging) {
  ASSERT_TRUE(InitOnePe(/*timeout_seconds=*/1).ok());
  aclrtStream stream = nullptr;
  ASSERT_TRUE(vendor_->CreateStream(&stream).ok());
  void* signal = nullptr;
  ASSERT_TRUE(vendor_->Malloc(8, &signal).ok());
  *static_cast<std::int32_t*>(signal) = 0;
  ASSERT_TRUE(
      vendor_->SignalWaitUntilOnStream(static_cast<std::int32_t*>(signal), ACLSHMEM_CMP_EQ, 1,
                                       stream)
          .ok());
  const Status status = vendor_->SynchronizeStream(stream);
  EXPECT_EQ(status.code(), ErrorCode::kBackendError);
  EXPECT_TRUE(Contains(status.message(), "acl_code=" + std::to_string(fake::kFakeAclStreamTimeout)))
      << status.message();
  EXPECT_EQ(CountLines(fake_.Calls(), "timeout aclshmemx_signal_wait_until_on_stream"), 1);
  EXPECT_TRUE(vendor_->SynchronizeStream(stream).ok()) << "the error is reported once";
  ASSERT_TRUE(vendor_->DestroyStream(stream).ok());
  ASSERT_TRUE(vendor_->Finalize().ok());
}

TEST_F(CannVendorTest, ReinitCyclesOnOneLibrary) {
  for (int cycle = 0; cycle < 3; ++cycle) {
    SCOPED_TRACE(cycle);
    fake_.Reset();
    auto vendor = std::make_unique<CannVendor>(library_);
    ASSERT_TRUE(vendor->SetDevice(0).ok());
    InitParams params;
    params.heap_bytes = kMiB;
    params.timeout_seconds = 5;
    ASSERT_TRUE(vendor->GetUniqueId(&params.unique_id).ok());
    ASSERT_TRUE(vendor->Init(params).ok());
    void* ptr = nullptr;
    ASSERT_TRUE(vendor->Malloc(32, &ptr).ok());
    EXPECT_EQ(CountLines(fake_.Calls(), "result aclshmem_malloc offset=0"), 1) << fake_.Calls();
    ASSERT_TRUE(vendor->Free(ptr).ok());
    ASSERT_TRUE(vendor->Finalize().ok());
    EXPECT_EQ(CountLines(fake_.Calls(), "aclshmemx_finalize instance_id=0"), 1);
  }
}

TEST(CannVendorReload, InitFinalizeUnloadReloadCycles) {
  for (int cycle = 0; cycle < 3; ++cycle) {
    SCOPED_TRACE(cycle);
    {
      FakeCann fake(fake::kV15Rc1);
      std::shared_ptr<const VendorLibrary> library;
      ASSERT_TRUE(fake.Load(&library).ok());
      auto vendor = std::make_unique<CannVendor>(library);
      ASSERT_TRUE(vendor->SetDevice(0).ok());
      InitParams params;
      params.heap_bytes = kMiB;
      params.timeout_seconds = 5;
      ASSERT_TRUE(vendor->GetUniqueId(&params.unique_id).ok());
      ASSERT_TRUE(vendor->Init(params).ok());
      void* ptr = nullptr;
      ASSERT_TRUE(vendor->Malloc(32, &ptr).ok());
      ASSERT_TRUE(vendor->Finalize().ok());
      // The fake's log starts empty in each load: a fresh copy of the library.
      EXPECT_EQ(LineIndex(fake.Calls(), "aclrtSetDevice"), 0) << fake.Calls();
    }
    void* still = dlopen(fake::kV15Rc1, RTLD_NOW | RTLD_NOLOAD);
    EXPECT_EQ(still, nullptr) << "the library stayed loaded";
    if (still != nullptr) dlclose(still);
  }
}

TEST_F(CannVendorV10Test, QuietIsRefusedAndFinalizeIsThePlainForm) {
  EXPECT_EQ(vendor_->features(), FeatureSet::kV1_0);
  ASSERT_TRUE(InitOnePe().ok());
  const Status quiet = vendor_->QuietOnStream(reinterpret_cast<aclrtStream>(0x10));
  EXPECT_EQ(quiet.code(), ErrorCode::kUnsupportedCapability);
  EXPECT_TRUE(Contains(quiet.message(), "call=aclshmemx_quiet_on_stream")) << quiet.message();
  EXPECT_TRUE(Contains(quiet.message(), "aclshmem v1.0-v1.3")) << quiet.message();
  ASSERT_TRUE(vendor_->Finalize().ok());
  const std::string log = fake_.Calls();
  EXPECT_EQ(CountLines(log, "aclshmem_finalize"), 1) << log;
  EXPECT_EQ(CountLines(log, "aclshmemx_quiet_on_stream"), 0) << log;
  // The v1.0 fake reads the 112-byte layout: no instance_id in its record.
  EXPECT_FALSE(Contains(Line(log, "aclshmemx_init_attr"), "instance_id")) << log;
}

TEST_F(CannVendorV15Rc1Test, FinalizePassesAnExplicitZeroInstance) {
  EXPECT_EQ(vendor_->features(), FeatureSet::kV1_5);
  ASSERT_TRUE(InitOnePe().ok());
  ASSERT_TRUE(vendor_->Finalize().ok());
  EXPECT_EQ(CountLines(fake_.Calls(), "aclshmem_finalize instance_id=0"), 1) << fake_.Calls();
}

}  // namespace
}  // namespace hyper_parallel::shmem::cann
