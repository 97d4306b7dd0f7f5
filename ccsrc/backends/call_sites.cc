#include "backends/call_sites.h"

namespace hyper_parallel::shmem {
namespace {

thread_local CallSite current_site = CallSite::kHostThread;

}  // namespace

std::string_view CallSiteName(CallSite site) {
  switch (site) {
    case CallSite::kHostThread: return "host_thread";
    case CallSite::kStreamExecutor: return "stream_executor";
    case CallSite::kCustomOp: return "custom_op";
    case CallSite::kStreamCallback: return "stream_callback";
    case CallSite::kDeviceKernel: return "device_kernel";
  }
  return "unknown";
}

CallSite CurrentCallSite() { return current_site; }

CallSiteScope::CallSiteScope(CallSite site) : previous_(current_site) { current_site = site; }

CallSiteScope::~CallSiteScope() { current_site = previous_; }

}  // namespace hyper_parallel::shmem
