// VendorLibrary: the CANN SHMEM library and the ACL runtime, loaded at run time.
//
// Loads the ACL runtime (libascendcl.so), then the main aclshmem library (libshmem.so, else the
// ACL-GEN name libaclshmem.so), both with dlopen(RTLD_NOW | RTLD_LOCAL), resolves every vendor
// function the adapter uses into one table of function pointers, and tells the vendor
// generation (FeatureSet) by symbol presence, never by version macros (they read 1.1.1 in every
// release). Generations before v1.0 are refused with UNSUPPORTED_CAPABILITY.
//
// Environment overrides (tests, unusual installs):
//   HYPER_PARALLEL_SHMEM_CANN_LIBRARY  path of the main library (libshmem.so)
//   HYPER_PARALLEL_SHMEM_ACL_LIBRARY   path of the ACL runtime (libascendcl.so)
// When the main library is given by path and a libshmem_utils.so sits next to it, that one is
// loaded first, since the vendor build sets no RPATH.
//
// A loaded library is immutable: its const methods may be called from any thread. Destruction
// dlcloses both libraries; loading, unloading and loading again is supported (the caller must
// have finalised the vendor library before the last owner lets go).
#pragma once

#include <memory>
#include <string>

#include "backends/cann/call_sites.h"
#include "backends/cann/vendor_abi.h"
#include "base/status.h"

namespace hyper_parallel::shmem::cann {

/// Environment variable naming the main library's path.
inline constexpr const char* kCannLibraryEnv = "HYPER_PARALLEL_SHMEM_CANN_LIBRARY";
/// Environment variable naming the ACL runtime's path.
inline constexpr const char* kAclLibraryEnv = "HYPER_PARALLEL_SHMEM_ACL_LIBRARY";

/// Every vendor function the adapter calls. Required entries are never null once loaded;
/// optional ones (marked) are null when the generation lacks them.
struct VendorSymbols {
  AclshmemxSetConfStoreTlsFn aclshmemx_set_conf_store_tls = nullptr;
  AclshmemxGetUniqueIdFn aclshmemx_get_uniqueid = nullptr;
  AclshmemxInitAttrFn aclshmemx_init_attr = nullptr;
  AclshmemxInitStatusFn aclshmemx_init_status = nullptr;  ///< optional
  AclshmemFinalizeFn aclshmem_finalize = nullptr;
  AclshmemxFinalizeFn aclshmemx_finalize = nullptr;  ///< optional: v1.5.0 and later
  AclshmemMyPeFn aclshmem_my_pe = nullptr;
  AclshmemNPesFn aclshmem_n_pes = nullptr;
  AclshmemMallocFn aclshmem_malloc = nullptr;
  AclshmemAlignFn aclshmem_align = nullptr;
  AclshmemFreeFn aclshmem_free = nullptr;
  AclshmemPtrFn aclshmem_ptr = nullptr;
  AclshmemxPutmemOnStreamFn aclshmemx_putmem_on_stream = nullptr;
  AclshmemxGetmemOnStreamFn aclshmemx_getmem_on_stream = nullptr;
  AclshmemxSignalOpOnStreamFn aclshmemx_signal_op_on_stream = nullptr;
  AclshmemxSignalWaitUntilOnStreamFn aclshmemx_signal_wait_until_on_stream = nullptr;
  AclshmemxQuietOnStreamFn aclshmemx_quiet_on_stream = nullptr;  ///< optional: v1.5.0+
  AclshmemxBarrierAllOnStreamFn aclshmemx_barrier_all_on_stream = nullptr;

  AclrtGetDeviceFn aclrtGetDevice = nullptr;
  AclrtSetDeviceFn aclrtSetDevice = nullptr;
  AclrtGetSocNameFn aclrtGetSocName = nullptr;
  AclrtSynchronizeStreamFn aclrtSynchronizeStream = nullptr;
  AclrtCreateStreamFn aclrtCreateStream = nullptr;
  AclrtDestroyStreamFn aclrtDestroyStream = nullptr;
};

/// Which generation-telling symbols a library exports.
struct SymbolPresence {
  bool shmem_init_attr = false;             ///< SHMEM-GEN spelling
  bool aclshmemx_init_attr = false;         ///< ACL-GEN and later
  bool aclshmemx_putmem_on_stream = false;  ///< v1.0.0 and later
  bool aclshmemx_quiet_on_stream = false;   ///< v1.5.0 and later (also v1.5.0.rc1)
  bool aclshmemx_finalize = false;          ///< v1.5.0 and later
};

/// The feature set a library with these symbols belongs to. A library with neither init_attr
/// spelling is not an aclshmem library; this returns kShmemGen only when shmem_init_attr is
/// present, and kAclGen otherwise (the loader reports the missing symbol first).
FeatureSet DetectFeatureSet(const SymbolPresence& presence);

/// Where to load from. Empty fields take the environment override, then the default names.
struct LoadOptions {
  std::string shmem_library;  ///< path or name of the main library
  std::string acl_library;    ///< path or name of the ACL runtime
};

class VendorLibrary {
 public:
  /// Loads both libraries and resolves the table. UNSUPPORTED_CAPABILITY when a library cannot
  /// be opened or its generation is older than v1.0; BACKEND_ERROR naming the symbol and the
  /// library when a required symbol is missing.
  static Status Load(const LoadOptions& options, std::shared_ptr<const VendorLibrary>* out);

  ~VendorLibrary();
  VendorLibrary(const VendorLibrary&) = delete;
  VendorLibrary& operator=(const VendorLibrary&) = delete;

  /// The generation told from the exported symbols.
  FeatureSet features() const { return features_; }
  /// The resolved functions.
  const VendorSymbols& symbols() const { return symbols_; }
  /// The name or path the main library was opened by.
  const std::string& shmem_library() const { return shmem_library_; }
  /// The name or path the ACL runtime was opened by.
  const std::string& acl_library() const { return acl_library_; }

 private:
  VendorLibrary() = default;

  void* acl_handle_ = nullptr;
  void* utils_handle_ = nullptr;
  void* shmem_handle_ = nullptr;
  std::string acl_library_;
  std::string shmem_library_;
  FeatureSet features_ = FeatureSet::kV1_0;
  VendorSymbols symbols_;
};

}  // namespace hyper_parallel::shmem::cann
