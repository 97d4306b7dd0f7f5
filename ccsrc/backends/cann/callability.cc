#include "backends/cann/callability.h"

#include <string>

namespace hyper_parallel::shmem::cann {
namespace {

thread_local CallContext current_context = CallContext::kHostThread;

}  // namespace

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

std::string_view CallContextName(CallContext context) {
  switch (context) {
    case CallContext::kHostThread: return "host_thread";
    case CallContext::kCustomOp: return "custom_op";
    case CallContext::kStreamCallback: return "stream_callback";
    case CallContext::kDeviceKernel: return "device_kernel";
  }
  return "unknown";
}

Status CheckCallable(VendorCall call, CallContext context, FeatureSet features) {
  if (IsCallable(call, context, features)) return Status::Ok();
  const CallRule& rule = kCallRules[static_cast<int>(call)];
  std::string why;
  if (!IsSupported(features)) {
    why = "the adapter drives aclshmem v1.0 and later only";
  } else if (rule.allowed[static_cast<int>(features)] == 0) {
    why = "the call does not exist in this feature set";
  } else if (context == CallContext::kDeviceKernel) {
    why = rule.has_device_twin ? "kernels call the vendor's device twin, not the host symbol"
                               : "host-only vendor call";
  } else {
    why = "not allowed from this context";
  }
  return Status::Assertion(ErrorCode::kUnsupportedCapability,
                           "vendor call is not callable here",
                           {{"call", std::string(rule.vendor_name)},
                            {"context", std::string(CallContextName(context))},
                            {"feature_set", std::string(FeatureSetName(features))},
                            {"reason", why}});
}

CallContext CurrentCallContext() { return current_context; }

CallContextScope::CallContextScope(CallContext context) : previous_(current_context) {
  current_context = context;
}

CallContextScope::~CallContextScope() { current_context = previous_; }

}  // namespace hyper_parallel::shmem::cann
