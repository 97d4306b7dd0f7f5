#include "backends/cann/call_sites.h"

#include <string>

namespace hyper_parallel::shmem::cann {
std::string_view FeatureSetName(FeatureSet features) {
  switch (features) {
    case FeatureSet::kShmemGen:
      return "SHMEM-GEN (shmem_* symbols, first import)";
    case FeatureSet::kAclGen:
      return "aclshmem ACL-GEN (no on-stream put)";
    case FeatureSet::kV1_0:
      return "aclshmem v1.0-v1.3 (on-stream ops, 112-byte init attributes)";
    case FeatureSet::kV1_5:
      return "aclshmem v1.5+ (on-stream ops and quiet, 120-byte init attributes)";
    case FeatureSet::kCount:
      break;
  }
  return "unknown";
}

Status CheckCallable(VendorCall call, CallSite site, FeatureSet features) {
  if (IsCallable(call, site, features)) return Status::Ok();
  const CallRule& rule = kCallRules[static_cast<int>(call)];
  std::string why;
  if (!IsSupported(features)) {
    why = "the adapter drives aclshmem v1.0 and later only";
  } else if (rule.allowed[static_cast<int>(features)] == 0) {
    why = "the call does not exist in this feature set";
  } else if (site == CallSite::kDeviceKernel) {
    why = rule.has_device_twin ? "kernels call the vendor's device twin, not the host symbol"
                               : "host-only vendor call";
  } else {
    why = "not allowed from this context";
  }
  return Status::Assertion(ErrorCode::kUnsupportedCapability,
                           "vendor call is not callable here",
                           {{"call", std::string(rule.vendor_name)},
                            {"context", std::string(CallSiteName(site))},
                            {"feature_set", std::string(FeatureSetName(features))},
                            {"reason", why}});
}

}  // namespace hyper_parallel::shmem::cann
