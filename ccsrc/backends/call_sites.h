// CallSite: where a backend call is made, in one vocabulary for every backend.
//
//   kHostThread      a user thread outside any stream: init, shutdown, allocation, and the
//                    default stream of the host backend, which runs operations on the caller;
//   kStreamExecutor  the FIFO executor thread of an asynchronous host stream (host backend);
//   kCustomOp        the body of a torch custom op, or of a kernel a device backend runs in
//                    stream order (a kernel body may be replayed while a graph is captured):
//                    it may only enqueue on its stream and make local queries;
//   kStreamCallback  a host function run in stream order (cudaLaunchHostFunc,
//                    aclrtLaunchCallback): it may wait on nothing, since the stream waits on it;
//   kDeviceKernel    code running on the device itself.
//
// Each backend has one table, `backends/<name>/call_sites.h`, of its calls and the sites each
// may be made from. The host backend's is checked by the compiler (its guarded primitives are
// templates on their site); the device backends' by a lookup against the calling thread's
// site, which a CallSiteScope sets (the device-backend skeleton runs kernel bodies in
// kCustomOp), refusing with UNSUPPORTED_CAPABILITY before the vendor is reached.
//
// Thread-safety: the names are constants; the current site is per thread.
#pragma once

#include <cstdint>
#include <string_view>

namespace hyper_parallel::shmem {

enum class CallSite : std::uint8_t {
  kHostThread = 1u << 0,
  kStreamExecutor = 1u << 1,
  kCustomOp = 1u << 2,
  kStreamCallback = 1u << 3,
  kDeviceKernel = 1u << 4,
};

/// A set of call sites, as a table row holds it.
using CallSites = std::uint8_t;

constexpr CallSites Sites() { return 0; }
template <typename... Rest>
constexpr CallSites Sites(CallSite first, Rest... rest) {
  return static_cast<CallSites>(static_cast<CallSites>(first) | Sites(rest...));
}

constexpr bool Allows(CallSites sites, CallSite site) {
  return (sites & static_cast<CallSites>(site)) != 0;
}

/// "host_thread", "stream_executor", "custom_op", "stream_callback", "device_kernel".
std::string_view CallSiteName(CallSite site);

/// The calling thread's site (kHostThread unless a CallSiteScope says otherwise).
CallSite CurrentCallSite();

/// Sets the calling thread's site until the scope ends (scopes nest).
class CallSiteScope {
 public:
  explicit CallSiteScope(CallSite site);
  ~CallSiteScope();
  CallSiteScope(const CallSiteScope&) = delete;
  CallSiteScope& operator=(const CallSiteScope&) = delete;

 private:
  CallSite previous_;
};

}  // namespace hyper_parallel::shmem
