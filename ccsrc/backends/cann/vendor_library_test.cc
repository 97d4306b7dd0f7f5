#include "backends/cann/vendor_library.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "testing/fake_cann/fake_library.h"

namespace hyper_parallel::shmem::cann {
namespace {

using fake::FakeCann;

// Sets (or unsets, with null) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) previous_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (previous_) {
      setenv(name_, previous_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> previous_;
};

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

bool IsLoaded(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  dlclose(handle);
  return true;
}

TEST(CannVendorLibrary, LoadsThroughTheEnvironmentOverrides) {
  ScopedEnv shmem(kCannLibraryEnv, fake::kV15);
  ScopedEnv acl(kAclLibraryEnv, fake::kV15);
  std::shared_ptr<const VendorLibrary> library;
  const Status status = VendorLibrary::Load(LoadOptions{}, &library);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(library->shmem_library(), fake::kV15);
  EXPECT_EQ(library->acl_library(), fake::kV15);
  EXPECT_EQ(library->features(), FeatureSet::kV1_5);
  const VendorSymbols& s = library->symbols();
  EXPECT_NE(s.aclshmemx_init_attr, nullptr);
  EXPECT_NE(s.aclshmemx_putmem_on_stream, nullptr);
  EXPECT_NE(s.aclshmemx_signal_wait_until_on_stream, nullptr);
  EXPECT_NE(s.aclshmemx_quiet_on_stream, nullptr);
  EXPECT_NE(s.aclshmemx_finalize, nullptr);
  EXPECT_NE(s.aclrtGetSocName, nullptr);
  EXPECT_NE(s.aclrtSynchronizeStream, nullptr);
}

TEST(CannVendorLibrary, ExplicitPathsWinOverTheEnvironment) {
  ScopedEnv shmem(kCannLibraryEnv, "/nonexistent/libshmem.so");
  std::shared_ptr<const VendorLibrary> library;
  const Status status = VendorLibrary::Load(LoadOptions{fake::kV10, fake::kV10}, &library);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(library->features(), FeatureSet::kV1_0);
}

TEST(CannVendorLibrary, MissingMainLibraryIsAClearError) {
  std::shared_ptr<const VendorLibrary> library;
  const Status status =
      VendorLibrary::Load(LoadOptions{"/nonexistent/libshmem.so", fake::kV15}, &library);
  EXPECT_EQ(status.code(), ErrorCode::kUnsupportedCapability);
  EXPECT_TRUE(Contains(status.message(), "cannot load the CANN SHMEM library")) << status.message();
  EXPECT_TRUE(Contains(status.message(), "library=/nonexistent/libshmem.so")) << status.message();
  EXPECT_TRUE(Contains(status.message(), kCannLibraryEnv)) << status.message();
  EXPECT_EQ(library, nullptr);
}

TEST(CannVendorLibrary, MissingAclRuntimeIsAClearError) {
  std::shared_ptr<const VendorLibrary> library;
  const Status status =
      VendorLibrary::Load(LoadOptions{fake::kV15, "/nonexistent/libascendcl.so"}, &library);
  EXPECT_EQ(status.code(), ErrorCode::kUnsupportedCapability);
  EXPECT_TRUE(Contains(status.message(), "cannot load the ACL runtime")) << status.message();
  EXPECT_TRUE(Contains(status.message(), "library=/nonexistent/libascendcl.so"));
  EXPECT_TRUE(Contains(status.message(), kAclLibraryEnv)) << status.message();
}

TEST(CannVendorLibrary, DefaultNamesAreTriedInOrder) {
  void* real = dlopen("libshmem.so", RTLD_NOW | RTLD_LOCAL);
  if (real == nullptr) real = dlopen("libaclshmem.so", RTLD_NOW | RTLD_LOCAL);
  if (real != nullptr) {
    dlclose(real);
    GTEST_SKIP() << "a CANN SHMEM library is installed here";
  }
  ScopedEnv shmem(kCannLibraryEnv, nullptr);
  std::shared_ptr<const VendorLibrary> library;
  const Status status = VendorLibrary::Load(LoadOptions{"", fake::kV15}, &library);
  EXPECT_EQ(status.code(), ErrorCode::kUnsupportedCapability);
  EXPECT_TRUE(Contains(status.message(), "tried=libshmem.so, libaclshmem.so")) << status.message();
  EXPECT_TRUE(Contains(status.message(), "libshmem.so: cannot open")) << status.message();
  EXPECT_TRUE(Contains(status.message(), "libaclshmem.so: cannot open")) << status.message();
}

TEST(CannVendorLibrary, MissingRequiredSymbolNamesItAndTheLibrary) {
  std::shared_ptr<const VendorLibrary> library;
  const Status status = VendorLibrary::Load(LoadOptions{fake::kNoMalloc, fake::kV15}, &library);
  EXPECT_EQ(status.code(), ErrorCode::kBackendError);
  EXPECT_TRUE(Contains(status.message(), "lacks a required symbol")) << status.message();
  EXPECT_TRUE(Contains(status.message(), "symbol=aclshmem_malloc")) << status.message();
  EXPECT_TRUE(Contains(status.message(), std::string("library=") + fake::kNoMalloc));
}

TEST(CannVendorLibrary, MissingAclSymbolNamesItAndTheLibrary) {
  std::shared_ptr<const VendorLibrary> library;
  const Status status = VendorLibrary::Load(LoadOptions{fake::kV15, "libm.so.6"}, &library);
  EXPECT_EQ(status.code(), ErrorCode::kBackendError);
  EXPECT_TRUE(Contains(status.message(), "symbol=aclrtGetDevice")) << status.message();
  EXPECT_TRUE(Contains(status.message(), "library=libm.so.6")) << status.message();
}

TEST(CannVendorLibrary, NotAnAclshmemLibraryIsRefused) {
  std::shared_ptr<const VendorLibrary> library;
  const Status status = VendorLibrary::Load(LoadOptions{"libm.so.6", fake::kV15}, &library);
  EXPECT_EQ(status.code(), ErrorCode::kBackendError);
  EXPECT_TRUE(Contains(status.message(), "symbol=aclshmemx_init_attr")) << status.message();
}

TEST(CannVendorLibrary, DetectsEachGeneration) {
  struct Case {
    const char* path;
    FeatureSet features;
    bool quiet;
    bool finalize_x;
  };
  for (const Case& c : {Case{fake::kV15, FeatureSet::kV1_5, true, true},
                        Case{fake::kV15Rc1, FeatureSet::kV1_5, true, false},
                        Case{fake::kV10, FeatureSet::kV1_0, false, false}}) {
    std::shared_ptr<const VendorLibrary> library;
    const Status status = VendorLibrary::Load(LoadOptions{c.path, c.path}, &library);
    ASSERT_TRUE(status.ok()) << c.path << ": " << status.ToString();
    EXPECT_EQ(library->features(), c.features) << c.path;
    EXPECT_EQ(library->symbols().aclshmemx_quiet_on_stream != nullptr, c.quiet) << c.path;
    EXPECT_EQ(library->symbols().aclshmemx_finalize != nullptr, c.finalize_x) << c.path;
  }
}

TEST(CannVendorLibrary, RefusesOldGenerationsByName) {
  std::shared_ptr<const VendorLibrary> library;
  Status status = VendorLibrary::Load(LoadOptions{fake::kShmemGen, fake::kShmemGen}, &library);
  EXPECT_EQ(status.code(), ErrorCode::kUnsupportedCapability);
  EXPECT_TRUE(Contains(status.message(), "SHMEM-GEN")) << status.message();
  EXPECT_TRUE(Contains(status.message(), "v1.0 or later")) << status.message();

  status = VendorLibrary::Load(LoadOptions{fake::kAclGen, fake::kAclGen}, &library);
  EXPECT_EQ(status.code(), ErrorCode::kUnsupportedCapability);
  EXPECT_TRUE(Contains(status.message(), "ACL-GEN")) << status.message();
  EXPECT_TRUE(Contains(status.message(), "aclshmemx_putmem_on_stream")) << status.message();
  EXPECT_EQ(library, nullptr);
}

TEST(CannVendorLibrary, DetectFeatureSetBySymbolPresence) {
  SymbolPresence p;
  EXPECT_EQ(DetectFeatureSet(p), FeatureSet::kAclGen);
  p.shmem_init_attr = true;
  EXPECT_EQ(DetectFeatureSet(p), FeatureSet::kShmemGen);
  p = SymbolPresence{};
  p.aclshmemx_init_attr = true;
  EXPECT_EQ(DetectFeatureSet(p), FeatureSet::kAclGen);
  p.aclshmemx_putmem_on_stream = true;
  EXPECT_EQ(DetectFeatureSet(p), FeatureSet::kV1_0);
  p.aclshmemx_quiet_on_stream = true;
  EXPECT_EQ(DetectFeatureSet(p), FeatureSet::kV1_5);
  p.aclshmemx_quiet_on_stream = false;
  p.aclshmemx_finalize = true;
  EXPECT_EQ(DetectFeatureSet(p), FeatureSet::kV1_5);
  EXPECT_FALSE(IsSupported(FeatureSet::kShmemGen));
  EXPECT_FALSE(IsSupported(FeatureSet::kAclGen));
  EXPECT_TRUE(IsSupported(FeatureSet::kV1_0));
  EXPECT_TRUE(IsSupported(FeatureSet::kV1_5));
}

TEST(CannVendorLibrary, UnloadsOnDestructionAndLoadsAgain) {
  // The v1.0 variant is loaded by nothing else in this test.
  ASSERT_FALSE(IsLoaded(fake::kV10));
  for (int cycle = 0; cycle < 3; ++cycle) {
    std::shared_ptr<const VendorLibrary> library;
    const Status status = VendorLibrary::Load(LoadOptions{fake::kV10, fake::kV10}, &library);
    ASSERT_TRUE(status.ok()) << status.ToString();
    EXPECT_TRUE(IsLoaded(fake::kV10));
    library.reset();
    EXPECT_FALSE(IsLoaded(fake::kV10)) << "cycle " << cycle;
  }
}

}  // namespace
}  // namespace hyper_parallel::shmem::cann
