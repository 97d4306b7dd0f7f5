#include "backends/cann/vendor_calls.h"

#include <cctype>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "base/mutex.h"

namespace hyper_parallel::shmem::cann {
namespace {

std::string Lowercase(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

std::string Name(VendorCall call) { return std::string(VendorCallName(call)); }

std::uint64_t RoundUpToPage(std::uint64_t bytes) {
  return (bytes + kAclshmemPageSize - 1) / kAclshmemPageSize * kAclshmemPageSize;
}

}  // namespace

Status DeviceModelOf(std::string_view soc, std::string* model) {
  const std::string lower = Lowercase(soc);
  if (lower.find("ascend950") != std::string::npos || lower.find("dav-3510") != std::string::npos) {
    *model = "950";
    return Status::Ok();
  }
  if (lower.find("ascend910") != std::string::npos || lower.find("dav-220") != std::string::npos) {
    *model = "910";
    return Status::Ok();
  }
  std::string quoted;
  quoted.reserve(soc.size() + 2);
  quoted.append(1, '"').append(soc).append(1, '"');
  return Status::Contract(ErrorCode::kUnsupportedCapability, "the NPU SoC",
                          "an Ascend910 or Ascend950 family device (dav-220x, dav-3510)", quoted);
}

std::string_view AclshmemErrorName(int code) {
  switch (code) {
    case ACLSHMEM_SUCCESS: return "ACLSHMEM_SUCCESS";
    case ACLSHMEM_INVALID_PARAM: return "ACLSHMEM_INVALID_PARAM";
    case ACLSHMEM_INVALID_VALUE: return "ACLSHMEM_INVALID_VALUE";
    case ACLSHMEM_SMEM_ERROR: return "ACLSHMEM_SMEM_ERROR";
    case ACLSHMEM_INNER_ERROR: return "ACLSHMEM_INNER_ERROR";
    case ACLSHMEM_NOT_INITED: return "ACLSHMEM_NOT_INITED";
    case ACLSHMEM_BOOTSTRAP_ERROR: return "ACLSHMEM_BOOTSTRAP_ERROR";
    case ACLSHMEM_TIMEOUT_ERROR: return "ACLSHMEM_TIMEOUT_ERROR";
    case ACLSHMEM_MALLOC_FAILED: return "ACLSHMEM_MALLOC_FAILED";
    case ACLSHMEM_DL_FUNC_FAILED: return "ACLSHMEM_DL_FUNC_FAILED";
    case ACLSHMEM_INNER_TIMEOUT: return "ACLSHMEM_INNER_TIMEOUT";
    case ACLSHMEM_UNDER_API_UNLOAD: return "ACLSHMEM_UNDER_API_UNLOAD";
    case ACLSHMEM_NOT_SUPPORTED: return "ACLSHMEM_NOT_SUPPORTED";
    default: return "unknown";
  }
}

Status MapShmemResult(int code, VendorCall call) {
  if (code == ACLSHMEM_SUCCESS) return Status::Ok();
  const std::string vendor_code =
      std::to_string(code) + " (" + std::string(AclshmemErrorName(code)) + ")";
  if (code == ACLSHMEM_TIMEOUT_ERROR || code == ACLSHMEM_INNER_TIMEOUT) {
    return Status::Assertion(ErrorCode::kTimeout, "vendor call timed out",
                             {{"call", Name(call)}, {"vendor_code", vendor_code}});
  }
  return Status::Assertion(ErrorCode::kBackendError, "vendor call failed",
                           {{"call", Name(call)}, {"vendor_code", vendor_code}});
}

Status MapAclResult(aclError code, VendorCall call) {
  if (code == 0) return Status::Ok();
  return Status::Assertion(ErrorCode::kBackendError, "ACL runtime call failed",
                           {{"call", Name(call)}, {"acl_code", std::to_string(code)}});
}

std::uint32_t TimeoutSecondsFrom(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return 1;
  const auto seconds = (timeout.count() + 999) / 1000;
  if (seconds > std::numeric_limits<std::uint32_t>::max()) {
    return std::numeric_limits<std::uint32_t>::max();
  }
  return static_cast<std::uint32_t>(seconds);
}

std::string_view VendorStateName(VendorState state) {
  switch (state) {
    case VendorState::kLoaded: return "loaded";
    case VendorState::kInitialized: return "initialized";
    case VendorState::kFinalized: return "finalized";
    case VendorState::kFailed: return "failed";
  }
  return "unknown";
}

CannVendor::CannVendor(std::shared_ptr<const VendorLibrary> library)
    : library_(std::move(library)), vendor_(library_->symbols()) {}

CannVendor::~CannVendor() {
  if (init_buffers_ != nullptr) {
    // Initialised, or a failed init/finalize: the vendor may still point at the init buffers
    // and run code from the library, so both stay for the life of the process.
    struct Retained {
      Mutex mutex;
      std::vector<std::shared_ptr<const void>> kept GUARDED_BY(mutex);
    };
    static Retained* retained = new Retained();  // never destroyed
    MutexLock lock(&retained->mutex);
    retained->kept.push_back(std::shared_ptr<const void>(std::move(init_buffers_)));
    retained->kept.push_back(library_);
  }
}

Status CannVendor::Enter(VendorCall call, bool needs_init) const {
  const VendorState current = state();
  const bool usable = current == VendorState::kInitialized ||
                      (!needs_init && current == VendorState::kLoaded);
  if (!usable) {
    if (current == VendorState::kFailed) {
      return Status::Assertion(ErrorCode::kInvalidState,
                               "vendor adapter is unusable after a failed init or finalize",
                               {{"call", Name(call)},
                                {"state", "failed"},
                                {"first_failure", terminal_failure_.message()}});
    }
    if (current == VendorState::kFinalized) {
      return Status::Assertion(ErrorCode::kInvalidState,
                               "vendor adapter was finalized; a new lifecycle needs a new adapter",
                               {{"call", Name(call)}, {"state", "finalized"}});
    }
    return Status::Assertion(ErrorCode::kInvalidState, "vendor library is not initialized",
                             {{"call", Name(call)},
                              {"state", std::string(VendorStateName(current))}});
  }
  return CheckCallable(call, CurrentCallSite(), features());
}

Status CannVendor::CheckStream(VendorCall call, aclrtStream stream) const {
  if (stream != nullptr) return Status::Ok();
  return Status::Contract(ErrorCode::kInvalidArgument, "the stream of " + Name(call),
                          "a non-null aclrtStream", "null");
}

Status CannVendor::Fail(Status status) {
  if (terminal_failure_.ok()) terminal_failure_ = status;
  state_.store(VendorState::kFailed, std::memory_order_release);
  return status;
}

// ---- Device ----------------------------------------------------------------------------------

Status CannVendor::SetDevice(int device) {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kAclrtSetDevice, false));
  return MapAclResult(vendor_.aclrtSetDevice(device), VendorCall::kAclrtSetDevice);
}

Status CannVendor::CurrentDevice(int* device) const {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kAclrtGetDevice, false));
  std::int32_t id = -1;
  HPS_RETURN_IF_ERROR(MapAclResult(vendor_.aclrtGetDevice(&id), VendorCall::kAclrtGetDevice));
  *device = id;
  return Status::Ok();
}

Status CannVendor::SocName(std::string* soc) const {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kAclrtGetSocName, false));
  const char* name = vendor_.aclrtGetSocName();
  if (name == nullptr) {
    return Status::Assertion(ErrorCode::kBackendError, "ACL runtime call returned no name",
                             {{"call", Name(VendorCall::kAclrtGetSocName)}});
  }
  *soc = name;
  return Status::Ok();
}

Status CannVendor::QueryIdentity(DeviceIdentity* identity) const {
  DeviceIdentity found;
  HPS_RETURN_IF_ERROR(CurrentDevice(&found.device));
  HPS_RETURN_IF_ERROR(SocName(&found.soc));
  HPS_RETURN_IF_ERROR(DeviceModelOf(found.soc, &found.model));
  *identity = std::move(found);
  return Status::Ok();
}

Status CannVendor::CheckDrift() const {
  if (state() != VendorState::kInitialized) {
    return Enter(VendorCall::kAclrtGetDevice, true);
  }
  int device = -1;
  HPS_RETURN_IF_ERROR(CurrentDevice(&device));
  if (device == identity_.device) return Status::Ok();
  return Status::Assertion(ErrorCode::kDeviceMismatch,
                           "current NPU differs from the one frozen at init",
                           {{"frozen", "npu:" + std::to_string(identity_.device)},
                            {"current", "npu:" + std::to_string(device)}});
}

// ---- Lifecycle -------------------------------------------------------------------------------

Status CannVendor::GetUniqueId(UniqueId* unique_id) {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kGetUniqueId, false));
  if (state() != VendorState::kLoaded) {
    return Status::Assertion(ErrorCode::kInvalidState, "unique id requested after init",
                             {{"call", Name(VendorCall::kGetUniqueId)}});
  }
  aclshmemx_uniqueid_t uid;
  std::memset(&uid, 0, sizeof uid);
  HPS_RETURN_IF_ERROR(
      MapShmemResult(vendor_.aclshmemx_get_uniqueid(&uid), VendorCall::kGetUniqueId));
  std::memcpy(unique_id->data(), &uid, sizeof uid);
  return Status::Ok();
}

Status CannVendor::Init(const InitParams& params) {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kInitAttr, false));
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kSetConfStoreTls, false));
  if (state() != VendorState::kLoaded) {
    return Status::Assertion(ErrorCode::kInvalidState, "vendor library is already initialized",
                             {{"call", Name(VendorCall::kInitAttr)}});
  }
  if (params.n_pes < 1 || params.n_pes > kAclshmemMaxPes) {
    return Status::Contract(ErrorCode::kInvalidArgument, "n_pes", "in [1, 16384]",
                            std::to_string(params.n_pes));
  }
  if (params.my_pe < 0 || params.my_pe >= params.n_pes) {
    return Status::Contract(ErrorCode::kInvalidArgument, "my_pe",
                            "in [0, " + std::to_string(params.n_pes) + ")",
                            std::to_string(params.my_pe));
  }
  const std::uint64_t heap_bytes = RoundUpToPage(params.heap_bytes);
  if (params.heap_bytes == 0 || heap_bytes > kAclshmemMaxLocalSize) {
    return Status::Contract(ErrorCode::kInvalidConfig, "the heap size per PE",
                            "positive and at most 40 GiB (the vendor's limit)",
                            std::to_string(params.heap_bytes));
  }
  if (params.timeout_seconds == 0) {
    return Status::Contract(ErrorCode::kInvalidConfig, "the vendor timeout",
                            "at least 1 second", "0");
  }
  auto buffers = std::make_unique<InitBuffers>();
  std::memset(buffers.get(), 0, sizeof(InitBuffers));
  std::memcpy(&buffers->unique_id, params.unique_id.data(), sizeof(aclshmemx_uniqueid_t));
  if (buffers->unique_id.version != kUniqueIdVersion) {
    return Status::Contract(ErrorCode::kInvalidArgument, "the unique id's version",
                            std::to_string(kUniqueIdVersion) + " (from aclshmemx_get_uniqueid)",
                            std::to_string(buffers->unique_id.version));
  }

  // The vendor reads the device at init: freeze it first, and refuse an unknown SoC before
  // any collective starts.
  DeviceIdentity identity;
  HPS_RETURN_IF_ERROR(QueryIdentity(&identity));

  const Status tls = MapShmemResult(vendor_.aclshmemx_set_conf_store_tls(false, nullptr, 0),
                                    VendorCall::kSetConfStoreTls);
  if (!tls.ok()) return Fail(tls);

  aclshmemx_init_attr_t& attr = buffers->attr;
  attr.my_pe = params.my_pe;
  attr.n_pes = params.n_pes;
  attr.local_mem_size = heap_bytes;
  attr.option_attr.version = kOptionalAttrVersion;
  attr.option_attr.data_op_engine_type = ACLSHMEM_DATA_OP_MTE;
  attr.option_attr.shm_init_timeout = params.timeout_seconds;
  attr.option_attr.shm_create_timeout = params.timeout_seconds;
  attr.option_attr.control_operation_timeout = params.timeout_seconds;
  attr.option_attr.sockFd = -1;
  attr.comm_args = &buffers->unique_id;
  attr.instance_id = 0;
  init_buffers_ = std::move(buffers);

  const Status status = MapShmemResult(
      vendor_.aclshmemx_init_attr(ACLSHMEMX_INIT_WITH_UNIQUEID, &init_buffers_->attr),
      VendorCall::kInitAttr);
  if (!status.ok()) return Fail(status);
  identity_ = std::move(identity);
  state_.store(VendorState::kInitialized, std::memory_order_release);
  return Status::Ok();
}

const aclshmemx_init_attr_t* CannVendor::init_attr() const {
  return init_buffers_ != nullptr ? &init_buffers_->attr : nullptr;
}

Status CannVendor::Finalize() {
  const bool extended = vendor_.aclshmemx_finalize != nullptr &&
                        IsCallable(VendorCall::kFinalizeX, CallSite::kHostThread, features());
  const VendorCall call = extended ? VendorCall::kFinalizeX : VendorCall::kFinalize;
  HPS_RETURN_IF_ERROR(Enter(call, true));
  const int code = extended ? vendor_.aclshmemx_finalize(0) : vendor_.aclshmem_finalize(0);
  const Status status = MapShmemResult(code, call);
  // On failure the vendor may still point at the init buffers: they stay until destruction.
  if (!status.ok()) return Fail(status);
  init_buffers_.reset();
  state_.store(VendorState::kFinalized, std::memory_order_release);
  return Status::Ok();
}

// ---- Symmetric heap --------------------------------------------------------------------------

Status CannVendor::Malloc(std::size_t bytes, void** ptr) {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kMalloc, true));
  if (bytes == 0) {
    return Status::Contract(ErrorCode::kInvalidArgument, "the bytes of aclshmem_malloc",
                            "positive", "0");
  }
  void* result = vendor_.aclshmem_malloc(bytes);
  if (result == nullptr) {
    return Status::Assertion(ErrorCode::kBackendError,
                             "vendor allocation returned null (heap exhausted, sizes differ "
                             "between PEs, or the control plane failed)",
                             {{"call", Name(VendorCall::kMalloc)},
                              {"bytes", std::to_string(bytes)}});
  }
  *ptr = result;
  return Status::Ok();
}

Status CannVendor::Align(std::size_t alignment, std::size_t bytes, void** ptr) {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kAlign, true));
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return Status::Contract(ErrorCode::kInvalidArgument, "the alignment of aclshmem_align",
                            "a power of two", std::to_string(alignment));
  }
  if (bytes == 0) {
    return Status::Contract(ErrorCode::kInvalidArgument, "the bytes of aclshmem_align",
                            "positive", "0");
  }
  void* result = vendor_.aclshmem_align(alignment, bytes);
  if (result == nullptr) {
    return Status::Assertion(ErrorCode::kBackendError,
                             "vendor allocation returned null (heap exhausted, sizes differ "
                             "between PEs, or the control plane failed)",
                             {{"call", Name(VendorCall::kAlign)},
                              {"alignment", std::to_string(alignment)},
                              {"bytes", std::to_string(bytes)}});
  }
  *ptr = result;
  return Status::Ok();
}

Status CannVendor::Free(void* ptr) {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kFree, true));
  if (ptr == nullptr) {
    return Status::Contract(ErrorCode::kInvalidArgument, "the pointer of aclshmem_free",
                            "a symmetric allocation", "null");
  }
  vendor_.aclshmem_free(ptr);
  return Status::Ok();
}

Status CannVendor::Ptr(void* ptr, int pe, void** peer_ptr) const {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kPtr, true));
  void* result = vendor_.aclshmem_ptr(ptr, pe);
  if (result == nullptr) {
    return Status::Assertion(ErrorCode::kBackendError,
                             "vendor address translation returned null (pe out of range, "
                             "pointer outside the heap, or no mapping of the peer)",
                             {{"call", Name(VendorCall::kPtr)},
                              {"ptr", Hex(ptr)},
                              {"pe", std::to_string(pe)}});
  }
  *peer_ptr = result;
  return Status::Ok();
}

Status CannVendor::MyPe(int* pe) const {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kMyPe, true));
  const int result = vendor_.aclshmem_my_pe();
  if (result < 0) {
    return Status::Assertion(ErrorCode::kBackendError, "vendor call returned no PE",
                             {{"call", Name(VendorCall::kMyPe)},
                              {"result", std::to_string(result)}});
  }
  *pe = result;
  return Status::Ok();
}

Status CannVendor::NPes(int* n_pes) const {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kNPes, true));
  const int result = vendor_.aclshmem_n_pes();
  if (result < 1) {
    return Status::Assertion(ErrorCode::kBackendError, "vendor call returned no PE count",
                             {{"call", Name(VendorCall::kNPes)},
                              {"result", std::to_string(result)}});
  }
  *n_pes = result;
  return Status::Ok();
}

// ---- On-stream data path ---------------------------------------------------------------------

Status CannVendor::PutOnStream(void* dst, const void* src, std::size_t bytes, int pe,
                               aclrtStream stream) const {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kPutmemOnStream, true));
  HPS_RETURN_IF_ERROR(CheckStream(VendorCall::kPutmemOnStream, stream));
  vendor_.aclshmemx_putmem_on_stream(dst, const_cast<void*>(src), bytes, pe, stream);
  return Status::Ok();
}

Status CannVendor::GetOnStream(void* dst, const void* src, std::size_t bytes, int pe,
                               aclrtStream stream) const {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kGetmemOnStream, true));
  HPS_RETURN_IF_ERROR(CheckStream(VendorCall::kGetmemOnStream, stream));
  vendor_.aclshmemx_getmem_on_stream(dst, const_cast<void*>(src), bytes, pe, stream);
  return Status::Ok();
}

Status CannVendor::SignalOpOnStream(std::int32_t* sig_addr, std::int32_t value,
                                    AclshmemSignalOp op, int pe, aclrtStream stream) const {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kSignalOpOnStream, true));
  HPS_RETURN_IF_ERROR(CheckStream(VendorCall::kSignalOpOnStream, stream));
  if (op != ACLSHMEM_SIGNAL_SET && op != ACLSHMEM_SIGNAL_ADD) {
    return Status::Contract(ErrorCode::kInvalidArgument, "the signal op", "SET (0) or ADD (1)",
                            std::to_string(static_cast<int>(op)));
  }
  vendor_.aclshmemx_signal_op_on_stream(sig_addr, value, op, pe, stream);
  return Status::Ok();
}

Status CannVendor::SignalWaitUntilOnStream(std::int32_t* sig_addr, AclshmemCmp cmp,
                                           std::int32_t value, aclrtStream stream) const {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kSignalWaitUntilOnStream, true));
  HPS_RETURN_IF_ERROR(CheckStream(VendorCall::kSignalWaitUntilOnStream, stream));
  if (cmp < ACLSHMEM_CMP_EQ || cmp > ACLSHMEM_CMP_LE) {
    return Status::Contract(ErrorCode::kInvalidArgument, "the comparison", "in [0, 5] (EQ..LE)",
                            std::to_string(static_cast<int>(cmp)));
  }
  vendor_.aclshmemx_signal_wait_until_on_stream(sig_addr, cmp, value, stream);
  return Status::Ok();
}

Status CannVendor::QuietOnStream(aclrtStream stream) const {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kQuietOnStream, true));
  HPS_RETURN_IF_ERROR(CheckStream(VendorCall::kQuietOnStream, stream));
  if (vendor_.aclshmemx_quiet_on_stream == nullptr) {
    return Status::Assertion(ErrorCode::kUnsupportedCapability,
                             "vendor library does not export the call",
                             {{"call", Name(VendorCall::kQuietOnStream)},
                              {"library", library_->shmem_library()}});
  }
  vendor_.aclshmemx_quiet_on_stream(stream);
  return Status::Ok();
}

Status CannVendor::BarrierAllOnStream(aclrtStream stream) const {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kBarrierAllOnStream, true));
  HPS_RETURN_IF_ERROR(CheckStream(VendorCall::kBarrierAllOnStream, stream));
  vendor_.aclshmemx_barrier_all_on_stream(stream);
  return Status::Ok();
}

// ---- Streams ---------------------------------------------------------------------------------

Status CannVendor::SynchronizeStream(aclrtStream stream) const {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kAclrtSynchronizeStream, false));
  return MapAclResult(vendor_.aclrtSynchronizeStream(stream), VendorCall::kAclrtSynchronizeStream);
}

Status CannVendor::CreateStream(aclrtStream* stream) const {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kAclrtCreateStream, false));
  return MapAclResult(vendor_.aclrtCreateStream(stream), VendorCall::kAclrtCreateStream);
}

Status CannVendor::DestroyStream(aclrtStream stream) const {
  HPS_RETURN_IF_ERROR(Enter(VendorCall::kAclrtDestroyStream, false));
  return MapAclResult(vendor_.aclrtDestroyStream(stream), VendorCall::kAclrtDestroyStream);
}

}  // namespace hyper_parallel::shmem::cann
