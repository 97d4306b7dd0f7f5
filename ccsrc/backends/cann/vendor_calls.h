// CannVendor: the thin adapter the CANN backend calls instead of the vendor library.
//
// Each method makes one vendor call (or a fixed short sequence, for Init), after checking the
// adapter's state and the where-callable table (call_sites.h) for the calling thread's
// site, and maps the result to a Status:
//   aclshmem timeout codes (-7 ACLSHMEM_TIMEOUT_ERROR, -10 ACLSHMEM_INNER_TIMEOUT)  TIMEOUT
//   any other nonzero aclshmem code  BACKEND_ERROR "vendor_code=-3 (ACLSHMEM_SMEM_ERROR)"
//   a nonzero aclError               BACKEND_ERROR "acl_code=<n>"
//   a null pointer from malloc/align/ptr  BACKEND_ERROR naming the call
// always naming the vendor call ("call=aclshmemx_init_attr"). The vendor's on-stream calls
// return void: their failures surface at the next SynchronizeStream of that stream.
//
// Lifecycle: loaded -> Init -> initialised -> Finalize -> finalised. Init owns the 120-byte init
// attributes and the 136-byte unique id until Finalize, because the vendor keeps pointers to
// both and reads them again at the first allocation. A failed Init or Finalize leaves the
// adapter failed: terminal, every later call answers INVALID_STATE with the first failure; a
// finalised adapter is unusable too. A new lifecycle takes a new CannVendor (over the same
// VendorLibrary, or a freshly loaded one).
//
// Streams: every on-stream call wants a non-null aclrtStream. The vendor gives null two
// meanings (its internal stream for RMA, the ACL default stream for barriers), which would
// break the order between them, so null is refused with INVALID_ARGUMENT.
//
// Thread-safety: Init, Finalize, GetUniqueId, SetDevice, Malloc, Align and Free are made by one
// thread while no other call is in flight. Every other method may be called from several
// threads at once; they pass the calls through as made, so the caller keeps the vendor's own
// per-stream ordering rules.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "backends/cann/call_sites.h"
#include "backends/cann/vendor_abi.h"
#include "backends/cann/vendor_library.h"
#include "base/status.h"

namespace hyper_parallel::shmem::cann {

/// The 136 bytes of an aclshmemx_uniqueid_t, as the root hands them to every PE.
using UniqueId = std::array<std::byte, sizeof(aclshmemx_uniqueid_t)>;

/// The device a vendor lifecycle runs on, frozen at Init.
struct DeviceIdentity {
  int device = -1;    ///< aclrtGetDevice
  std::string soc;    ///< aclrtGetSocName, e.g. "Ascend910B3"
  std::string model;  ///< "910" or "950"
};

/// The device model of a SoC name: "950" for Ascend950/dav-3510 names, "910" for
/// Ascend910/dav-220x names (case-insensitive on the "ascend" prefix); anything else is
/// UNSUPPORTED_CAPABILITY naming the SoC.
Status DeviceModelOf(std::string_view soc, std::string* model);

/// "ACLSHMEM_SMEM_ERROR" for -3; "unknown" for codes the ABI does not name.
std::string_view AclshmemErrorName(int code);

/// Maps an aclshmem return code of `call`: 0 OK, -7/-10 TIMEOUT, else BACKEND_ERROR.
Status MapShmemResult(int code, VendorCall call);

/// Maps an aclError of `call`: 0 OK, else BACKEND_ERROR with the code.
Status MapAclResult(aclError code, VendorCall call);

/// Whole seconds for the vendor's timeouts from a duration: rounded up, at least 1.
std::uint32_t TimeoutSecondsFrom(std::chrono::milliseconds timeout);

/// What Init needs.
struct InitParams {
  int my_pe = 0;
  int n_pes = 1;
  std::uint64_t heap_bytes = 0;       ///< per PE; rounded up to the vendor's 2 MiB page
  UniqueId unique_id{};               ///< the root's GetUniqueId, the same on every PE
  std::uint32_t timeout_seconds = 0;  ///< shm_init, shm_create and control timeouts; > 0
};

enum class VendorState : std::uint8_t { kLoaded, kInitialized, kFinalized, kFailed };

/// "loaded", "initialized", "finalized", "failed".
std::string_view VendorStateName(VendorState state);

class CannVendor {
 public:
  /// An adapter over a loaded library, in state loaded.
  explicit CannVendor(std::shared_ptr<const VendorLibrary> library);
  /// Does not finalise (that is collective): call Finalize first. An adapter destroyed while
  /// initialised, or after a failed Init or Finalize, keeps its init buffers and the library
  /// alive for the rest of the process on purpose (the vendor may still point at them).
  ~CannVendor();
  CannVendor(const CannVendor&) = delete;
  CannVendor& operator=(const CannVendor&) = delete;

  /// The library's generation.
  FeatureSet features() const { return library_->features(); }
  /// The library this adapter calls.
  const VendorLibrary& library() const { return *library_; }
  /// Where the lifecycle stands.
  VendorState state() const { return state_.load(std::memory_order_acquire); }
  /// The failure that made the adapter failed (OK otherwise).
  const Status& terminal_failure() const { return terminal_failure_; }

  // ---- Device (ACL runtime) -------------------------------------------------------------
  /// aclrtSetDevice(device).
  Status SetDevice(int device);
  /// aclrtGetDevice.
  Status CurrentDevice(int* device) const;
  /// aclrtGetSocName (a null name is BACKEND_ERROR).
  Status SocName(std::string* soc) const;
  /// Device, SoC and model of the calling thread now.
  Status QueryIdentity(DeviceIdentity* identity) const;
  /// The identity frozen at Init (empty before).
  const DeviceIdentity& identity() const { return identity_; }
  /// DEVICE_MISMATCH when the calling thread's device differs from the frozen one.
  Status CheckDrift() const;

  // ---- Lifecycle ----------------------------------------------------------------------------
  /// Root PE only, before Init: the unique id every PE passes to Init.
  Status GetUniqueId(UniqueId* unique_id);
  /// Collective. Freezes the device identity (rejecting an unsupported SoC), turns the config
  /// store's TLS off, then initialises with UNIQUEID bootstrap and explicitly filled attributes
  /// (MTE engine, all three timeouts, sockFd -1, instance 0). Any vendor failure is terminal.
  Status Init(const InitParams& params);
  /// The attributes passed to the vendor (valid while initialised).
  const aclshmemx_init_attr_t* init_attr() const;
  /// Collective: aclshmemx_finalize(0) when present, else aclshmem_finalize(0). Releases the
  /// init buffers on success; on failure the adapter is failed (terminal).
  Status Finalize();

  // ---- Symmetric heap (collective, host thread) -------------------------------------------
  /// aclshmem_malloc(bytes): the same call, in the same order, on every PE.
  Status Malloc(std::size_t bytes, void** ptr);
  /// aclshmem_align(alignment, bytes); alignment a power of two.
  Status Align(std::size_t alignment, std::size_t bytes, void** ptr);
  /// aclshmem_free(ptr).
  Status Free(void* ptr);
  /// aclshmem_ptr: the address of symmetric `ptr` on PE `pe` (BACKEND_ERROR when unreachable).
  Status Ptr(void* ptr, int pe, void** peer_ptr) const;
  /// aclshmem_my_pe.
  Status MyPe(int* pe) const;
  /// aclshmem_n_pes.
  Status NPes(int* n_pes) const;

  // ---- On-stream data path (enqueue and return) -------------------------------------------
  /// aclshmemx_putmem_on_stream: `bytes` from local `src` to symmetric `dst` on PE `pe`.
  Status PutOnStream(void* dst, const void* src, std::size_t bytes, int pe,
                     aclrtStream stream) const;
  /// aclshmemx_getmem_on_stream: `bytes` from symmetric `src` on PE `pe` to local `dst`.
  Status GetOnStream(void* dst, const void* src, std::size_t bytes, int pe,
                     aclrtStream stream) const;
  /// aclshmemx_signal_op_on_stream: set or add `value` to the 32-bit signal word `sig_addr`
  /// (symmetric) on PE `pe`.
  Status SignalOpOnStream(std::int32_t* sig_addr, std::int32_t value, AclshmemSignalOp op,
                          int pe, aclrtStream stream) const;
  /// aclshmemx_signal_wait_until_on_stream: the stream waits until the local word satisfies
  /// `cmp` against `value`.
  Status SignalWaitUntilOnStream(std::int32_t* sig_addr, AclshmemCmp cmp, std::int32_t value,
                                 aclrtStream stream) const;
  /// aclshmemx_quiet_on_stream (v1.5+; refused before, by the table).
  Status QuietOnStream(aclrtStream stream) const;
  /// aclshmemx_barrier_all_on_stream (collective on the stream).
  Status BarrierAllOnStream(aclrtStream stream) const;

  // ---- Streams (ACL runtime) --------------------------------------------------------------
  /// aclrtSynchronizeStream: blocks; reports failures of work queued on `stream`.
  Status SynchronizeStream(aclrtStream stream) const;
  /// aclrtCreateStream.
  Status CreateStream(aclrtStream* stream) const;
  /// aclrtDestroyStream.
  Status DestroyStream(aclrtStream stream) const;

 private:
  struct InitBuffers {
    aclshmemx_init_attr_t attr;
    aclshmemx_uniqueid_t unique_id;
  };

  // State and where-callable checks for `call`; `needs_init` for calls valid only while
  // initialised (otherwise loaded or initialised).
  Status Enter(VendorCall call, bool needs_init) const;
  Status CheckStream(VendorCall call, aclrtStream stream) const;
  Status Fail(Status status);

  std::shared_ptr<const VendorLibrary> library_;
  const VendorSymbols& vendor_;
  std::atomic<VendorState> state_{VendorState::kLoaded};
  Status terminal_failure_;
  DeviceIdentity identity_;
  std::unique_ptr<InitBuffers> init_buffers_;
};

}  // namespace hyper_parallel::shmem::cann
