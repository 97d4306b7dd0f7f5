// The CANN SHMEM (aclshmem) and ACL runtime C ABI, declared by hand.
//
// Only what the adapter uses: the init structs, the enum values it passes, the error codes it
// maps, and one function-pointer type per vendor function it resolves with dlsym. No vendor
// header is needed to build; every size and offset below is pinned by a static_assert, and
// real_headers_check.cc compares them with the real headers when a CANN install is present.
// The facts come from the public CANN SHMEM sources (HEAD and the v1.0.0..v1.5.1 tags) and hold
// on LP64 (x86-64, AArch64).
//
// Plain declarations: no state, nothing to synchronise.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hyper_parallel::shmem::cann {

/// aclshmem_error_code_t (an int). -8 and below do not exist in every generation.
enum AclshmemError : int {
  ACLSHMEM_SUCCESS = 0,
  ACLSHMEM_INVALID_PARAM = -1,
  ACLSHMEM_INVALID_VALUE = -2,
  ACLSHMEM_SMEM_ERROR = -3,
  ACLSHMEM_INNER_ERROR = -4,
  ACLSHMEM_NOT_INITED = -5,
  ACLSHMEM_BOOTSTRAP_ERROR = -6,
  ACLSHMEM_TIMEOUT_ERROR = -7,
  ACLSHMEM_MALLOC_FAILED = -8,
  ACLSHMEM_DL_FUNC_FAILED = -9,
  ACLSHMEM_INNER_TIMEOUT = -10,
  ACLSHMEM_UNDER_API_UNLOAD = -11,
  ACLSHMEM_NOT_SUPPORTED = -100,
};

/// aclshmem_signal_op_type_t.
enum AclshmemSignalOp : int { ACLSHMEM_SIGNAL_SET = 0, ACLSHMEM_SIGNAL_ADD = 1 };

/// aclshmem_cmp_op_type_t; the host wait functions reject values outside 0..5.
enum AclshmemCmp : int {
  ACLSHMEM_CMP_EQ = 0,
  ACLSHMEM_CMP_NE = 1,
  ACLSHMEM_CMP_GT = 2,
  ACLSHMEM_CMP_GE = 3,
  ACLSHMEM_CMP_LT = 4,
  ACLSHMEM_CMP_LE = 5,
};

/// aclshmemx_bootstrap_t, ACL-GEN and later (SHMEM-GEN used UNIQUEID=1, DEFAULT=4).
enum AclshmemBootstrap : unsigned int {
  ACLSHMEMX_INIT_WITH_DEFAULT = 1u,
  ACLSHMEMX_INIT_WITH_MPI = 2u,
  ACLSHMEMX_INIT_WITH_UNIQUEID = 8u,
};

/// data_op_engine_type_t: a bit mask; init wants > 0 with no bit above 0xF.
enum AclshmemDataOpEngine : int {
  ACLSHMEM_DATA_OP_MTE = 0x1,
  ACLSHMEM_DATA_OP_SDMA = 0x2,
  ACLSHMEM_DATA_OP_ROCE = 0x4,
  ACLSHMEM_DATA_OP_UDMA = 0x8,  // v1.5.0 and later
};

/// aclshmem_mem_type_t.
enum AclshmemMemType : int { ACLSHMEM_HOST_SIDE = 0, ACLSHMEM_DEVICE_SIDE = 1 };

/// aclshmemx_init_status_t.
enum AclshmemInitStatus : int {
  ACLSHMEM_STATUS_NOT_INITIALIZED = 0,
  ACLSHMEM_STATUS_SHM_CREATED = 1,
  ACLSHMEM_STATUS_IS_INITIALIZED = 2,
};

/// aclshmem_team_t is an int; WORLD is 0.
using aclshmem_team_t = int;
inline constexpr aclshmem_team_t kAclshmemTeamWorld = 0;

inline constexpr int kAclshmemMaxPes = 16384;
inline constexpr std::uint64_t kAclshmemMaxLocalSize = 40ull << 30;  ///< 40 GiB
inline constexpr std::uint64_t kAclshmemPageSize = 2ull << 20;       ///< 2 MiB
inline constexpr int kAclshmemUniqueIdInnerLen = 124;
inline constexpr int kAclshmemIpPortLen = 64;
inline constexpr std::uint32_t kAclshmemDefaultTimeoutSeconds = 120;

/// aclshmem_init_optional_attr_t: 24 bytes, 4-byte aligned.
struct aclshmem_init_optional_attr_t {
  int version;                          ///< (1 << 16) + sizeof; never checked by the library
  int data_op_engine_type;              ///< AclshmemDataOpEngine
  std::uint32_t shm_init_timeout;       ///< seconds; 0 is rejected
  std::uint32_t shm_create_timeout;     ///< seconds
  std::uint32_t control_operation_timeout;  ///< seconds; 0 is rejected
  std::int32_t sockFd;                  ///< <= 0: the library opens its own listen socket
};

/// The version value the header's default initialiser uses: 65560.
inline constexpr int kOptionalAttrVersion =
    (1 << 16) + static_cast<int>(sizeof(aclshmem_init_optional_attr_t));

/// aclshmemx_init_attr_t as v1.5.0 and later lay it out (120 bytes). ACL-GEN..v1.3.5 use the
/// first 112 bytes (no instance_id); an older library ignores the zeroed tail, so the adapter
/// always passes this layout.
struct aclshmemx_init_attr_t {
  int my_pe;
  int n_pes;
  char ip_port[kAclshmemIpPortLen];  ///< DEFAULT bootstrap only; empty for UNIQUEID
  std::uint64_t local_mem_size;      ///< bytes of symmetric heap per PE
  aclshmem_init_optional_attr_t option_attr;
  void* comm_args;                   ///< UNIQUEID: the caller's aclshmemx_uniqueid_t (kept!)
  std::uint64_t instance_id;         ///< v1.5.0+; keep 0 (nonzero is multi-instance mode)
};

/// Size of the init attr before v1.5.0 (no instance_id).
inline constexpr std::size_t kInitAttrSizeBeforeV15 = 112;

/// aclshmemx_uniqueid_t: 136 bytes, produced by the root's get_uniqueid, copied to every PE.
struct aclshmemx_uniqueid_t {
  std::int32_t version;  ///< kUniqueIdVersion
  int my_pe;
  int n_pes;
  char internal[kAclshmemUniqueIdInnerLen];
};

/// ACLSHMEM_UNIQUEID_VERSION.
inline constexpr std::int32_t kUniqueIdVersion =
    65536 + static_cast<std::int32_t>(sizeof(aclshmemx_uniqueid_t));

static_assert(sizeof(aclshmem_init_optional_attr_t) == 24);
static_assert(alignof(aclshmem_init_optional_attr_t) == 4);
static_assert(offsetof(aclshmem_init_optional_attr_t, version) == 0);
static_assert(offsetof(aclshmem_init_optional_attr_t, data_op_engine_type) == 4);
static_assert(offsetof(aclshmem_init_optional_attr_t, shm_init_timeout) == 8);
static_assert(offsetof(aclshmem_init_optional_attr_t, shm_create_timeout) == 12);
static_assert(offsetof(aclshmem_init_optional_attr_t, control_operation_timeout) == 16);
static_assert(offsetof(aclshmem_init_optional_attr_t, sockFd) == 20);
static_assert(kOptionalAttrVersion == 65560);

static_assert(sizeof(aclshmemx_init_attr_t) == 120);
static_assert(offsetof(aclshmemx_init_attr_t, my_pe) == 0);
static_assert(offsetof(aclshmemx_init_attr_t, n_pes) == 4);
static_assert(offsetof(aclshmemx_init_attr_t, ip_port) == 8);
static_assert(offsetof(aclshmemx_init_attr_t, local_mem_size) == 72);
static_assert(offsetof(aclshmemx_init_attr_t, option_attr) == 80);
static_assert(offsetof(aclshmemx_init_attr_t, comm_args) == 104);
static_assert(offsetof(aclshmemx_init_attr_t, instance_id) == 112);
static_assert(offsetof(aclshmemx_init_attr_t, instance_id) == kInitAttrSizeBeforeV15);

static_assert(sizeof(aclshmemx_uniqueid_t) == 136);
static_assert(offsetof(aclshmemx_uniqueid_t, version) == 0);
static_assert(offsetof(aclshmemx_uniqueid_t, my_pe) == 4);
static_assert(offsetof(aclshmemx_uniqueid_t, n_pes) == 8);
static_assert(offsetof(aclshmemx_uniqueid_t, internal) == 12);
static_assert(kUniqueIdVersion == 65672);

static_assert(sizeof(AclshmemBootstrap) == 4 && sizeof(AclshmemDataOpEngine) == 4 &&
              sizeof(AclshmemMemType) == 4, "enum-typed vendor parameters are 4-byte ints");

/// aclrtStream is void*; aclError is int (0 = success).
using aclrtStream = void*;
using aclError = int;

// One type per resolved vendor function, in the vendor's parameter order. Enum-typed
// parameters are passed as their 4-byte integer; a C++ reference is a pointer.
using AclshmemxSetConfStoreTlsFn = std::int32_t (*)(bool enable, const char* tls_info,
                                                    std::uint32_t tls_info_len);
using AclshmemxGetUniqueIdFn = int (*)(aclshmemx_uniqueid_t* uid);
using AclshmemxInitAttrFn = int (*)(unsigned int bootstrap_flags, aclshmemx_init_attr_t* attr);
using AclshmemxInitStatusFn = int (*)();
/// aclshmem_finalize is `int(void)` in every release but v1.5.0.rc1, where it is
/// `int(uint64_t instance_id = 0)`; called with an explicit 0, which is safe for both forms
/// on LP64 (the extra integer register is ignored by the void form).
using AclshmemFinalizeFn = int (*)(std::uint64_t instance_id);
using AclshmemxFinalizeFn = int (*)(std::uint64_t instance_id);  ///< v1.5.0 and later
using AclshmemMyPeFn = int (*)();
using AclshmemNPesFn = int (*)();
using AclshmemMallocFn = void* (*)(std::size_t size);
using AclshmemAlignFn = void* (*)(std::size_t alignment, std::size_t size);
using AclshmemFreeFn = void (*)(void* ptr);
using AclshmemPtrFn = void* (*)(void* ptr, int pe);
using AclshmemxPutmemOnStreamFn = void (*)(void* dst, void* src, std::size_t bytes,
                                           std::int32_t pe, aclrtStream stream);
using AclshmemxGetmemOnStreamFn = void (*)(void* dst, void* src, std::size_t bytes,
                                           std::int32_t pe, aclrtStream stream);
using AclshmemxSignalOpOnStreamFn = void (*)(std::int32_t* sig_addr, std::int32_t signal,
                                             int sig_op, int pe, aclrtStream stream);
using AclshmemxSignalWaitUntilOnStreamFn = void (*)(std::int32_t* sig_addr, int cmp,
                                                    std::int32_t cmp_val, aclrtStream stream);
using AclshmemxQuietOnStreamFn = void (*)(aclrtStream stream);  ///< v1.5.0 and later
using AclshmemxBarrierAllOnStreamFn = void (*)(aclrtStream stream);

using AclrtGetDeviceFn = aclError (*)(std::int32_t* device_id);
using AclrtSetDeviceFn = aclError (*)(std::int32_t device_id);
using AclrtGetSocNameFn = const char* (*)();
using AclrtSynchronizeStreamFn = aclError (*)(aclrtStream stream);
using AclrtCreateStreamFn = aclError (*)(aclrtStream* stream);
using AclrtDestroyStreamFn = aclError (*)(aclrtStream stream);

}  // namespace hyper_parallel::shmem::cann

// ---- ACL runtime: memory, events, callbacks (what a framework's fake NPU device needs) ------
//
// From Huawei's public ACL runtime header (acl/acl_rt.h) and its documentation. The enums are C
// enums, passed as 4-byte ints. Only the values below are pinned; newer CANN releases add
// members (e.g. ACL_MEMCPY_DEFAULT, ACL_MEM_LOCATION_TYPE_UNREGISTERED = 2 for memory not
// allocated through ACL, policy flag bits such as ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000).

namespace hyper_parallel::shmem::cann {

/// aclrtEvent is an opaque pointer.
using aclrtEvent = void*;

/// aclrtMemMallocPolicy (low values; newer releases OR in memory-type bits).
enum AclrtMemMallocPolicy : int {
  ACL_MEM_MALLOC_HUGE_FIRST = 0,
  ACL_MEM_MALLOC_HUGE_ONLY = 1,
  ACL_MEM_MALLOC_NORMAL_ONLY = 2,
  ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3,
  ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4,
  ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5,
};

/// aclrtMemcpyKind.
enum AclrtMemcpyKind : int {
  ACL_MEMCPY_HOST_TO_HOST = 0,
  ACL_MEMCPY_HOST_TO_DEVICE = 1,
  ACL_MEMCPY_DEVICE_TO_HOST = 2,
  ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
};

/// aclrtEventRecordedStatus (aclrtQueryEventStatus).
enum AclrtEventRecordedStatus : int {
  ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
  ACL_EVENT_RECORDED_STATUS_COMPLETE = 1,
};

/// aclrtCallbackBlockType (aclrtLaunchCallback).
enum AclrtCallbackBlockType : int { ACL_CALLBACK_NO_BLOCK = 0, ACL_CALLBACK_BLOCK = 1 };

/// aclrtMemLocationType (aclrtPtrAttributes::location.type).
enum AclrtMemLocationType : int {
  ACL_MEM_LOCATION_TYPE_HOST = 0,
  ACL_MEM_LOCATION_TYPE_DEVICE = 1,
};

/// aclrtMemLocation: 8 bytes.
struct aclrtMemLocation {
  std::uint32_t id;           ///< device id for DEVICE
  std::uint32_t type;         ///< AclrtMemLocationType (a C enum: 4 bytes)
};

/// aclrtPtrAttributes (aclrtPointerGetAttributes): 28 bytes, 4-byte aligned.
struct aclrtPtrAttributes {
  aclrtMemLocation location;
  std::uint32_t pageSize;     ///< bytes
  std::uint32_t rsv[4];
};

static_assert(sizeof(aclrtMemLocation) == 8);
static_assert(offsetof(aclrtMemLocation, type) == 4);
static_assert(sizeof(aclrtPtrAttributes) == 28);
static_assert(alignof(aclrtPtrAttributes) == 4);
static_assert(offsetof(aclrtPtrAttributes, pageSize) == 8);
static_assert(offsetof(aclrtPtrAttributes, rsv) == 12);
static_assert(sizeof(AclrtMemcpyKind) == 4 && sizeof(AclrtMemMallocPolicy) == 4 &&
              sizeof(AclrtEventRecordedStatus) == 4 && sizeof(AclrtCallbackBlockType) == 4);

/// aclrtCallback.
using aclrtCallback = void (*)(void* user_data);

using AclrtMallocFn = aclError (*)(void** dev_ptr, std::size_t size, int policy);
using AclrtFreeFn = aclError (*)(void* dev_ptr);
using AclrtMemcpyFn = aclError (*)(void* dst, std::size_t dest_max, const void* src,
                                   std::size_t count, int kind);
using AclrtMemcpyAsyncFn = aclError (*)(void* dst, std::size_t dest_max, const void* src,
                                        std::size_t count, int kind, aclrtStream stream);
using AclrtMemsetAsyncFn = aclError (*)(void* dev_ptr, std::size_t max_count, std::int32_t value,
                                        std::size_t count, aclrtStream stream);
using AclrtCreateEventFn = aclError (*)(aclrtEvent* event);
using AclrtDestroyEventFn = aclError (*)(aclrtEvent event);
using AclrtRecordEventFn = aclError (*)(aclrtEvent event, aclrtStream stream);
using AclrtStreamWaitEventFn = aclError (*)(aclrtStream stream, aclrtEvent event);
using AclrtSynchronizeEventFn = aclError (*)(aclrtEvent event);
using AclrtQueryEventStatusFn = aclError (*)(aclrtEvent event, int* status);
using AclrtSynchronizeDeviceFn = aclError (*)();
using AclrtGetDeviceCountFn = aclError (*)(std::uint32_t* count);
using AclrtPointerGetAttributesFn = aclError (*)(const void* ptr, aclrtPtrAttributes* attributes);
/// Real ACL runs the callback only on a thread subscribed with aclrtSubscribeReport.
using AclrtLaunchCallbackFn = aclError (*)(aclrtCallback fn, void* user_data, int block_type,
                                           aclrtStream stream);

}  // namespace hyper_parallel::shmem::cann
