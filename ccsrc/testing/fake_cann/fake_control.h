// The control API of the fake CANN vendor library (tests only).
//
// The fake (fake_aclshmem.cc) is a shared object exporting the aclshmem and ACL runtime C
// symbols the CANN adapter resolves, with the same ABI, plus the `hps_fake_*` functions below.
// Tests dlopen the same file the adapter loads (one copy per process) and drive it through
// these functions, looked up with dlsym; the typedefs name their types.
//
// The fake is process-global like the real library: every call takes one mutex, except the
// bounded waits (barriers, signal waits), which wait outside it.
#pragma once

#include <cstdint>

extern "C" {

/// Every recorded call since the last reset, one per line: "<name> key=value ...".
/// The pointer stays valid until the next control call.
using HpsFakeCallsFn = const char* (*)();
/// Clears the log, the injected failures and the stream errors, restores the default SoC
/// ("Ascend910B3") and "no device set", and tears down any job (unmaps its heaps).
using HpsFakeResetFn = void (*)();
/// Makes the `nth` (1-based) next call of `name` fail with `code`: an int-returning call
/// returns it; a pointer-returning call returns null; a void on-stream call marks its stream,
/// and the next aclrtSynchronizeStream of that stream returns `code`.
using HpsFakeFailAtFn = void (*)(const char* name, int nth, int code);
/// The SoC name aclrtGetSocName returns (null: it returns null).
using HpsFakeSetSocFn = void (*)(const char* name);
/// The device aclrtGetDevice reports from now on, as if other code had switched it.
using HpsFakeSetDeviceFn = void (*)(int device);
/// "v1.5", "v1.5rc1", "v1.0", "acl-gen", "shmem-gen" or "v1.5-no-malloc".
using HpsFakeGenerationFn = const char* (*)();
/// The POSIX shared-memory name (leading '/') a unique id's job maps, or null if not one of
/// the fake's unique ids.
using HpsFakeUidSegmentFn = const char* (*)(const void* uid);

}  // extern "C"

namespace hyper_parallel::shmem::cann::fake {

/// aclError the fake gives a stream whose queued work failed (bad address, bad argument).
inline constexpr int kFakeAclStreamError = 507899;
/// aclError the fake gives a stream whose queued signal wait or barrier timed out.
inline constexpr int kFakeAclStreamTimeout = 507898;
/// aclError of aclrtGetDevice before any aclrtSetDevice.
inline constexpr int kFakeAclNoDevice = 107002;
/// aclError of aclrtDestroyStream/aclrtSynchronizeStream on an unknown stream.
inline constexpr int kFakeAclBadStream = 107003;

}  // namespace hyper_parallel::shmem::cann::fake
