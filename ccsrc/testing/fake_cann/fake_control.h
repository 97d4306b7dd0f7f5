// The control API of the fake CANN vendor library (tests only).
//
// The fake (fake_aclshmem.cc) is a shared object exporting the aclshmem and ACL runtime C
// symbols the CANN adapter resolves, with the same ABI, plus the `hps_fake_*` functions below.
// Tests dlopen the same file the adapter loads (one copy per process) and drive it through
// these functions, looked up with dlsym; the typedefs name their types.
//
// The fake is process-global like the real library: every call takes one mutex, except the
// bounded waits (barriers, signal waits, stream and event synchronisation), which wait outside
// it. Streams are synchronous by default (each operation runs at enqueue); with
// hps_fake_set_async_streams(1) or HPS_FAKE_ACL_ASYNC_STREAMS=1, streams created afterwards run
// their operations in order on a worker thread each, like a device (fake_aclshmem.cc).
//
// Environment, read when the library is first used after loading:
//   HPS_FAKE_ACL_ASYNC_STREAMS=1  asynchronous streams by default (and after every reset);
//   HPS_FAKE_NPU_DEVICES=<n>      the device count (aclrtGetDeviceCount, aclrtSetDevice's
//                                 bound); default 8.
#pragma once

#include <cstdint>

extern "C" {

/// The recorded calls since the last reset (the latest 32768 to 65536 of them), one per line:
/// "<name> key=value ...".
/// The pointer stays valid until the next control call.
using HpsFakeCallsFn = const char* (*)();
/// Clears the log, the injected failures and the stream errors, restores the default SoC
/// ("Ascend910B3") and "no device set" (on every thread), stops and joins every stream worker
/// (queued operations are dropped, waits end early), destroys every stream and event, releases
/// all aclrtMalloc memory, restores the stream mode from HPS_FAKE_ACL_ASYNC_STREAMS, and tears
/// down any job (unmaps its heaps). Never call it from a stream callback.
using HpsFakeResetFn = void (*)();
/// Makes the `nth` (1-based) next call of `name` fail with `code`: an int-returning call
/// returns it; a pointer-returning call returns null; a void on-stream call marks its stream
/// (on an asynchronous stream, when the worker reaches it), and the next aclrtSynchronizeStream
/// of that stream returns `code`.
using HpsFakeFailAtFn = void (*)(const char* name, int nth, int code);
/// The SoC name aclrtGetSocName returns (null: it returns null).
using HpsFakeSetSocFn = void (*)(const char* name);
/// The calling thread's current device from now on, as if other code had switched it
/// (aclrtGetDevice on this thread reports it); also the process default when none was set.
using HpsFakeSetDeviceFn = void (*)(int device);
/// "v1.5", "v1.5rc1", "v1.0", "acl-gen", "shmem-gen" or "v1.5-no-malloc".
using HpsFakeGenerationFn = const char* (*)();
/// The POSIX shared-memory name (leading '/') a unique id's job maps, or null if not one of
/// the fake's unique ids.
using HpsFakeUidSegmentFn = const char* (*)(const void* uid);
/// Nonzero: every stream created afterwards gets a worker thread that runs its operations in
/// order, after enqueue (a host buffer changed or freed before the stream ran an operation
/// gives the wrong result, as on a device). Zero: streams created afterwards run each operation
/// at enqueue. Existing streams keep their mode. hps_fake_reset restores the environment's.
using HpsFakeSetAsyncStreamsFn = void (*)(int on);
/// 1 when streams created now get a worker, else 0.
using HpsFakeAsyncStreamsFn = int (*)();
/// Operations queued on `stream` and not yet finished (the running one counts); 0 for a
/// synchronous stream; -1 for a stream the fake does not know.
using HpsFakePendingFn = int (*)(void* stream);
/// The device `stream` was created on (the creating thread's current device), or -1.
using HpsFakeStreamDeviceFn = int (*)(void* stream);
/// Stream worker threads alive (created and not yet joined).
using HpsFakeWorkersFn = int (*)();

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
/// aclError of a null or out-of-range argument (ACL_ERROR_INVALID_PARAM).
inline constexpr int kFakeAclInvalidParam = 100000;
/// aclError of aclrtFree of a pointer that is no aclrtMalloc block, aclrtMemcpy whose device
/// side is not fake device memory, an unknown event (ACL_ERROR_RT_PARAM_INVALID).
inline constexpr int kFakeAclBadAddress = 107000;
/// aclError of aclrtSetDevice outside 0..count-1 (ACL_ERROR_RT_INVALID_DEVICEID).
inline constexpr int kFakeAclInvalidDevice = 107001;
/// The byte aclrtFree fills a block with: a use after free reads 0xA5 bytes.
inline constexpr unsigned char kFakeAclPoison = 0xA5;

}  // namespace hyper_parallel::shmem::cann::fake
