// Where each vendor call of the CANN adapter may be made, per vendor feature set: the CANN
// backend's table in the shared call-site vocabulary (backends/call_sites.h).
//
// The sites it speaks of:
//   kHostThread      a user host thread outside any stream callback or custom op: init,
//                    finalize, collective allocation, stream synchronisation, enqueuing;
//   kCustomOp        host code of a torch custom op's compute, or a kernel body the backend
//                    runs in stream order: it may only enqueue on the current stream and make
//                    local queries;
//   kStreamCallback  a host function running in stream order (aclrtLaunchCallback): local,
//                    non-ACL queries only, since an ACL call there may wait on its own stream;
//   kDeviceKernel    code running on the NPU. The vendor's device twins (put/get/signal/wait/
//                    quiet/barrier/ptr/my_pe/n_pes) are device functions compiled into kernels,
//                    not the host symbols this adapter resolves, so it makes no call from here.
//
// Rules, from the vendor's documentation and implementation (docs/backends.md, "Where vendor
// calls may be made"):
//   - init, get_uniqueid, finalize and the TLS setting are host-thread only (control plane);
//   - malloc/align/free are collective and host-blocking (a TCP barrier): host thread only;
//   - *_on_stream calls return at once and launch a kernel on the given stream: a host thread
//     or a custom op may make them (the torch-bind pattern: compute() only enqueues);
//   - my_pe, n_pes and aclshmem_ptr are local lookups: anywhere on the host;
//   - quiet_on_stream and aclshmemx_finalize exist from v1.5.0 on only. Before v1.5 quiet is
//     refused rather than emulated with aclrtSynchronizeStream, which blocks the host and so
//     would not be the same operation (it is illegal inside a custom op);
//   - aclrtSynchronizeStream blocks: host thread only; aclrtSetDevice and stream creation are
//     host-thread only; aclrtGetDevice and aclrtGetSocName are queries a custom op may make;
//   - generations the adapter refuses (SHMEM-GEN, ACL-GEN) allow nothing.
//
// The table is constexpr and immutable: lookups may be made from any thread. The calling
// thread's site is a thread-local set with CallSiteScope; it defaults to kHostThread.
#pragma once

#include <cstdint>
#include <string_view>

#include "backends/call_sites.h"
#include "base/status.h"

namespace hyper_parallel::shmem::cann {

/// Vendor generations, told apart by symbol presence (see vendor_library.h).
enum class FeatureSet : std::uint8_t {
  kShmemGen,  ///< first import, `shmem_*` symbols: refused
  kAclGen,    ///< aclshmem symbols, no on-stream put: refused
  kV1_0,      ///< v1.0-v1.3: on-stream ops, 112-byte init attributes
  kV1_5,      ///< v1.5+: adds quiet on stream, aclshmemx_finalize, 120-byte attributes
  kCount,
};

/// The feature set as messages name it, e.g. "aclshmem v1.5+ (...)".
std::string_view FeatureSetName(FeatureSet features);

/// True for the generations this adapter drives (v1.0 and later).
constexpr bool IsSupported(FeatureSet features) {
  return features == FeatureSet::kV1_0 || features == FeatureSet::kV1_5;
}

/// The sites the table speaks of, for iteration.
inline constexpr CallSite kCannSites[] = {CallSite::kHostThread, CallSite::kCustomOp,
                                          CallSite::kStreamCallback, CallSite::kDeviceKernel};

/// Every vendor function the adapter calls.
enum class VendorCall : std::uint8_t {
  kSetConfStoreTls,
  kGetUniqueId,
  kInitAttr,
  kFinalize,   ///< aclshmem_finalize, called with an explicit instance 0
  kFinalizeX,  ///< aclshmemx_finalize(0), preferred when present
  kMyPe,
  kNPes,
  kMalloc,
  kAlign,
  kFree,
  kPtr,
  kPutmemOnStream,
  kGetmemOnStream,
  kSignalOpOnStream,
  kSignalWaitUntilOnStream,
  kQuietOnStream,
  kBarrierAllOnStream,
  kAclrtGetDevice,
  kAclrtSetDevice,
  kAclrtGetSocName,
  kAclrtSynchronizeStream,
  kAclrtCreateStream,
  kAclrtDestroyStream,
  kCount,
};

/// One row: the vendor symbol, whether a device-kernel twin exists, and the sites allowed
/// in each feature set (indexed by FeatureSet).
struct CallRule {
  VendorCall call;
  std::string_view vendor_name;
  bool has_device_twin;
  CallSites allowed[static_cast<int>(FeatureSet::kCount)];
};

namespace site_rows {
inline constexpr CallSites kHost = Sites(CallSite::kHostThread);
inline constexpr CallSites kEnqueue = Sites(CallSite::kHostThread, CallSite::kCustomOp);
inline constexpr CallSites kLocal =
    Sites(CallSite::kHostThread, CallSite::kCustomOp, CallSite::kStreamCallback);
inline constexpr CallSites kNone = 0;
}  // namespace site_rows

/// The table, indexed by VendorCall. Columns: SHMEM-GEN, ACL-GEN, v1.0, v1.5.
inline constexpr CallRule kCallRules[static_cast<int>(VendorCall::kCount)] = {
#define HPS_CANN_RULE(call, name, twin, v10, v15) \
  {VendorCall::call, name, twin, {site_rows::kNone, site_rows::kNone, v10, v15}}
    HPS_CANN_RULE(kSetConfStoreTls, "aclshmemx_set_conf_store_tls", false,
                  site_rows::kHost, site_rows::kHost),
    HPS_CANN_RULE(kGetUniqueId, "aclshmemx_get_uniqueid", false, site_rows::kHost,
                  site_rows::kHost),
    HPS_CANN_RULE(kInitAttr, "aclshmemx_init_attr", false, site_rows::kHost,
                  site_rows::kHost),
    HPS_CANN_RULE(kFinalize, "aclshmem_finalize", false, site_rows::kHost,
                  site_rows::kHost),
    HPS_CANN_RULE(kFinalizeX, "aclshmemx_finalize", false, site_rows::kNone,
                  site_rows::kHost),
    HPS_CANN_RULE(kMyPe, "aclshmem_my_pe", true, site_rows::kLocal,
                  site_rows::kLocal),
    HPS_CANN_RULE(kNPes, "aclshmem_n_pes", true, site_rows::kLocal,
                  site_rows::kLocal),
    HPS_CANN_RULE(kMalloc, "aclshmem_malloc", false, site_rows::kHost,
                  site_rows::kHost),
    HPS_CANN_RULE(kAlign, "aclshmem_align", false, site_rows::kHost,
                  site_rows::kHost),
    HPS_CANN_RULE(kFree, "aclshmem_free", false, site_rows::kHost,
                  site_rows::kHost),
    HPS_CANN_RULE(kPtr, "aclshmem_ptr", true, site_rows::kLocal,
                  site_rows::kLocal),
    HPS_CANN_RULE(kPutmemOnStream, "aclshmemx_putmem_on_stream", true,
                  site_rows::kEnqueue, site_rows::kEnqueue),
    HPS_CANN_RULE(kGetmemOnStream, "aclshmemx_getmem_on_stream", true,
                  site_rows::kEnqueue, site_rows::kEnqueue),
    HPS_CANN_RULE(kSignalOpOnStream, "aclshmemx_signal_op_on_stream", true,
                  site_rows::kEnqueue, site_rows::kEnqueue),
    HPS_CANN_RULE(kSignalWaitUntilOnStream, "aclshmemx_signal_wait_until_on_stream", true,
                  site_rows::kEnqueue, site_rows::kEnqueue),
    HPS_CANN_RULE(kQuietOnStream, "aclshmemx_quiet_on_stream", true, site_rows::kNone,
                  site_rows::kEnqueue),
    HPS_CANN_RULE(kBarrierAllOnStream, "aclshmemx_barrier_all_on_stream", true,
                  site_rows::kEnqueue, site_rows::kEnqueue),
    HPS_CANN_RULE(kAclrtGetDevice, "aclrtGetDevice", false, site_rows::kEnqueue,
                  site_rows::kEnqueue),
    HPS_CANN_RULE(kAclrtSetDevice, "aclrtSetDevice", false, site_rows::kHost,
                  site_rows::kHost),
    HPS_CANN_RULE(kAclrtGetSocName, "aclrtGetSocName", false, site_rows::kEnqueue,
                  site_rows::kEnqueue),
    HPS_CANN_RULE(kAclrtSynchronizeStream, "aclrtSynchronizeStream", false,
                  site_rows::kHost, site_rows::kHost),
    HPS_CANN_RULE(kAclrtCreateStream, "aclrtCreateStream", false, site_rows::kHost,
                  site_rows::kHost),
    HPS_CANN_RULE(kAclrtDestroyStream, "aclrtDestroyStream", false, site_rows::kHost,
                  site_rows::kHost),
#undef HPS_CANN_RULE
};

constexpr bool TableIsIndexedByCall() {
  for (int i = 0; i < static_cast<int>(VendorCall::kCount); ++i) {
    if (static_cast<int>(kCallRules[i].call) != i) return false;
  }
  return true;
}
static_assert(TableIsIndexedByCall(), "kCallRules rows must follow the VendorCall order");

/// True when `call` may be made from `site` on a library of `features`.
constexpr bool IsCallable(VendorCall call, CallSite site, FeatureSet features) {
  return Allows(kCallRules[static_cast<int>(call)].allowed[static_cast<int>(features)], site);
}

/// The vendor's symbol name of `call`, e.g. "aclshmemx_init_attr".
constexpr std::string_view VendorCallName(VendorCall call) {
  return kCallRules[static_cast<int>(call)].vendor_name;
}

/// OK when `call` may be made from `site` on `features`; otherwise UNSUPPORTED_CAPABILITY
/// naming the vendor call, the site (as `context`) and the feature set.
Status CheckCallable(VendorCall call, CallSite site, FeatureSet features);

}  // namespace hyper_parallel::shmem::cann
