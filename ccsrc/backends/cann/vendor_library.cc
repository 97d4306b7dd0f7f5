#include "backends/cann/vendor_library.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <initializer_list>
#include <string_view>
#include <utility>

namespace hyper_parallel::shmem::cann {
namespace {

constexpr const char* kDefaultAclLibrary = "libascendcl.so";
constexpr const char* kDefaultShmemLibraries[] = {"libshmem.so", "libaclshmem.so"};
constexpr int kOpenFlags = RTLD_NOW | RTLD_LOCAL;

std::string LastDlError() {
  const char* error = dlerror();
  return error != nullptr ? error : "unknown dlopen error";
}

std::string FromEnvironment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

bool Has(void* handle, const char* symbol) { return dlsym(handle, symbol) != nullptr; }

// Resolves `symbol` into `*slot`. A required one that is missing fails with BACKEND_ERROR
// naming it and the library; an optional one stays null.
template <typename Fn>
Status Resolve(void* handle, const std::string& library, const char* symbol, bool required,
               Fn* slot) {
  dlerror();
  void* address = dlsym(handle, symbol);
  if (address == nullptr && required) {
    return Status::Assertion(ErrorCode::kBackendError,
                             "vendor library lacks a required symbol",
                             {{"symbol", symbol}, {"library", library}});
  }
  *slot = reinterpret_cast<Fn>(address);
  return Status::Ok();
}

std::string DirectoryOf(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

}  // namespace

FeatureSet DetectFeatureSet(const SymbolPresence& presence) {
  if (!presence.aclshmemx_init_attr) {
    return presence.shmem_init_attr ? FeatureSet::kShmemGen : FeatureSet::kAclGen;
  }
  if (!presence.aclshmemx_putmem_on_stream) return FeatureSet::kAclGen;
  if (presence.aclshmemx_quiet_on_stream || presence.aclshmemx_finalize) {
    return FeatureSet::kV1_5;
  }
  return FeatureSet::kV1_0;
}

Status VendorLibrary::Load(const LoadOptions& options, std::shared_ptr<const VendorLibrary>* out) {
  out->reset();
  std::shared_ptr<VendorLibrary> library(new VendorLibrary());

  // The ACL runtime first: the main library needs it, and the adapter calls it directly.
  std::string acl = options.acl_library;
  if (acl.empty()) acl = FromEnvironment(kAclLibraryEnv);
  if (acl.empty()) acl = kDefaultAclLibrary;
  library->acl_handle_ = dlopen(acl.c_str(), kOpenFlags);
  if (library->acl_handle_ == nullptr) {
    return Status::Assertion(ErrorCode::kUnsupportedCapability,
                             "cannot load the ACL runtime (install the CANN toolkit, put its "
                             "lib64 on LD_LIBRARY_PATH, or set the override)",
                             {{"library", acl},
                              {"override", kAclLibraryEnv},
                              {"dlerror", LastDlError()}});
  }
  library->acl_library_ = acl;

  std::string shmem = options.shmem_library;
  if (shmem.empty()) shmem = FromEnvironment(kCannLibraryEnv);
  if (!shmem.empty()) {
    // The vendor build sets no RPATH: load the utilities library beside it by path first.
    const std::string directory = DirectoryOf(shmem);
    if (!directory.empty()) {
      const std::string utils = directory + "/libshmem_utils.so";
      if (access(utils.c_str(), R_OK) == 0) {
        library->utils_handle_ = dlopen(utils.c_str(), kOpenFlags);
      }
    }
    library->shmem_handle_ = dlopen(shmem.c_str(), kOpenFlags);
    if (library->shmem_handle_ == nullptr) {
      return Status::Assertion(ErrorCode::kUnsupportedCapability,
                               "cannot load the CANN SHMEM library",
                               {{"library", shmem},
                                {"override", kCannLibraryEnv},
                                {"dlerror", LastDlError()}});
    }
  } else {
    std::string tried;
    for (const char* name : kDefaultShmemLibraries) {
      library->shmem_handle_ = dlopen(name, kOpenFlags);
      if (library->shmem_handle_ != nullptr) {
        shmem = name;
        break;
      }
      if (!tried.empty()) tried += "; ";
      tried += LastDlError();
    }
    if (library->shmem_handle_ == nullptr) {
      return Status::Assertion(
          ErrorCode::kUnsupportedCapability,
          "cannot load the CANN SHMEM library (install the aclshmem package, put its lib "
          "directory on LD_LIBRARY_PATH, or set the override)",
          {{"tried", "libshmem.so, libaclshmem.so"},
           {"override", kCannLibraryEnv},
           {"dlerror", tried}});
    }
  }
  library->shmem_library_ = shmem;

  void* main = library->shmem_handle_;
  SymbolPresence presence;
  presence.shmem_init_attr = Has(main, "shmem_init_attr");
  presence.aclshmemx_init_attr = Has(main, "aclshmemx_init_attr");
  presence.aclshmemx_putmem_on_stream = Has(main, "aclshmemx_putmem_on_stream");
  presence.aclshmemx_quiet_on_stream = Has(main, "aclshmemx_quiet_on_stream");
  presence.aclshmemx_finalize = Has(main, "aclshmemx_finalize");
  library->features_ = DetectFeatureSet(presence);
  if (!presence.aclshmemx_init_attr && !presence.shmem_init_attr) {
    return Status::Assertion(ErrorCode::kBackendError,
                             "vendor library lacks a required symbol (not an aclshmem library)",
                             {{"symbol", "aclshmemx_init_attr"}, {"library", shmem}});
  }
  if (!IsSupported(library->features_)) {
    return Status::Assertion(
        ErrorCode::kUnsupportedCapability,
        "the CANN SHMEM library is too old: the adapter needs aclshmem v1.0 or later "
        "(aclshmemx_putmem_on_stream and the other on-stream calls)",
        {{"library", shmem}, {"feature_set", std::string(FeatureSetName(library->features_))}});
  }

  VendorSymbols& s = library->symbols_;
  const std::string& m = shmem;
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmemx_set_conf_store_tls", true,
                              &s.aclshmemx_set_conf_store_tls));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmemx_get_uniqueid", true, &s.aclshmemx_get_uniqueid));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmemx_init_attr", true, &s.aclshmemx_init_attr));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmemx_init_status", false, &s.aclshmemx_init_status));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmem_finalize", true, &s.aclshmem_finalize));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmemx_finalize", false, &s.aclshmemx_finalize));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmem_my_pe", true, &s.aclshmem_my_pe));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmem_n_pes", true, &s.aclshmem_n_pes));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmem_malloc", true, &s.aclshmem_malloc));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmem_align", true, &s.aclshmem_align));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmem_free", true, &s.aclshmem_free));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmem_ptr", true, &s.aclshmem_ptr));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmemx_putmem_on_stream", true,
                              &s.aclshmemx_putmem_on_stream));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmemx_getmem_on_stream", true,
                              &s.aclshmemx_getmem_on_stream));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmemx_signal_op_on_stream", true,
                              &s.aclshmemx_signal_op_on_stream));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmemx_signal_wait_until_on_stream", true,
                              &s.aclshmemx_signal_wait_until_on_stream));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmemx_quiet_on_stream", false,
                              &s.aclshmemx_quiet_on_stream));
  HPS_RETURN_IF_ERROR(Resolve(main, m, "aclshmemx_barrier_all_on_stream", true,
                              &s.aclshmemx_barrier_all_on_stream));

  void* rt = library->acl_handle_;
  HPS_RETURN_IF_ERROR(Resolve(rt, acl, "aclrtGetDevice", true, &s.aclrtGetDevice));
  HPS_RETURN_IF_ERROR(Resolve(rt, acl, "aclrtSetDevice", true, &s.aclrtSetDevice));
  HPS_RETURN_IF_ERROR(Resolve(rt, acl, "aclrtGetSocName", true, &s.aclrtGetSocName));
  HPS_RETURN_IF_ERROR(Resolve(rt, acl, "aclrtSynchronizeStream", true, &s.aclrtSynchronizeStream));
  HPS_RETURN_IF_ERROR(Resolve(rt, acl, "aclrtCreateStream", true, &s.aclrtCreateStream));
  HPS_RETURN_IF_ERROR(Resolve(rt, acl, "aclrtDestroyStream", true, &s.aclrtDestroyStream));

  *out = std::move(library);
  return Status::Ok();
}

VendorLibrary::~VendorLibrary() {
  // Reverse order of loading: the main library depends on the other two.
  if (shmem_handle_ != nullptr) dlclose(shmem_handle_);
  if (utils_handle_ != nullptr) dlclose(utils_handle_);
  if (acl_handle_ != nullptr) dlclose(acl_handle_);
}

}  // namespace hyper_parallel::shmem::cann
