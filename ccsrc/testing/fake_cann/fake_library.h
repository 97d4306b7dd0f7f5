// FakeCann: a test's handle on one fake CANN vendor library (see fake_control.h).
//
// Opens the same .so the adapter loads (the dynamic loader shares one copy per process), looks
// up the control API, and resets the fake. The paths of the built variants come from the
// build as compile definitions. One per test, on the test's thread.
#pragma once

#include <dlfcn.h>

#include <memory>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "backends/cann/vendor_calls.h"
#include "backends/cann/vendor_library.h"
#include "testing/fake_cann/fake_control.h"

namespace hyper_parallel::shmem::cann::fake {

/// The fake variants the build made.
inline constexpr const char* kV15 = HPS_FAKE_CANN_V1_5;
inline constexpr const char* kV15Rc1 = HPS_FAKE_CANN_V1_5RC1;
inline constexpr const char* kV10 = HPS_FAKE_CANN_V1_0;
inline constexpr const char* kAclGen = HPS_FAKE_CANN_ACL_GEN;
inline constexpr const char* kShmemGen = HPS_FAKE_CANN_SHMEM_GEN;
inline constexpr const char* kNoMalloc = HPS_FAKE_CANN_NO_MALLOC;

class FakeCann {
 public:
  explicit FakeCann(const char* path) : path_(path) {
    handle_ = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      ADD_FAILURE() << "cannot open the fake " << path << ": " << dlerror();
      return;
    }
    calls_ = Lookup<HpsFakeCallsFn>("hps_fake_calls");
    reset_ = Lookup<HpsFakeResetFn>("hps_fake_reset");
    fail_at_ = Lookup<HpsFakeFailAtFn>("hps_fake_fail_at");
    set_soc_ = Lookup<HpsFakeSetSocFn>("hps_fake_set_soc");
    set_device_ = Lookup<HpsFakeSetDeviceFn>("hps_fake_set_device");
    generation_ = Lookup<HpsFakeGenerationFn>("hps_fake_generation");
    uid_segment_ = Lookup<HpsFakeUidSegmentFn>("hps_fake_uid_segment");
    reset_();
  }
  ~FakeCann() { Close(); }
  FakeCann(const FakeCann&) = delete;
  FakeCann& operator=(const FakeCann&) = delete;

  /// Drops this handle on the library (the adapter may hold its own).
  void Close() {
    if (handle_ != nullptr) {
      reset_();
      dlclose(handle_);
      handle_ = nullptr;
    }
  }

  const char* path() const { return path_; }
  std::string Calls() const { return calls_(); }
  void Reset() const { reset_(); }
  void FailAt(const char* name, int nth, int code) const { fail_at_(name, nth, code); }
  void SetSoc(const char* name) const { set_soc_(name); }
  void SetDevice(int device) const { set_device_(device); }
  std::string Generation() const { return generation_(); }
  const char* UidSegment(const void* uid) const { return uid_segment_(uid); }
  /// Any symbol of the fake (ACL calls the adapter does not resolve, newer control calls).
  void* Symbol(const char* name) const {
    return handle_ == nullptr ? nullptr : dlsym(handle_, name);
  }

  /// Loads the adapter's view of this variant (both override paths point at it).
  Status Load(std::shared_ptr<const VendorLibrary>* library) const {
    return VendorLibrary::Load(LoadOptions{path_, path_}, library);
  }

 private:
  template <typename Fn>
  Fn Lookup(const char* name) {
    void* address = dlsym(handle_, name);
    if (address == nullptr) ADD_FAILURE() << "the fake lacks " << name;
    return reinterpret_cast<Fn>(address);
  }

  const char* path_;
  void* handle_ = nullptr;
  HpsFakeCallsFn calls_ = nullptr;
  HpsFakeResetFn reset_ = nullptr;
  HpsFakeFailAtFn fail_at_ = nullptr;
  HpsFakeSetSocFn set_soc_ = nullptr;
  HpsFakeSetDeviceFn set_device_ = nullptr;
  HpsFakeGenerationFn generation_ = nullptr;
  HpsFakeUidSegmentFn uid_segment_ = nullptr;
};

/// Number of lines of `log` that start with `prefix`.
inline int CountLines(std::string_view log, std::string_view prefix) {
  int count = 0;
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string_view::npos) end = log.size();
    if (log.substr(start, end - start).starts_with(prefix)) ++count;
    start = end + 1;
  }
  return count;
}

/// Index of the first line of `log` that starts with `prefix`, or -1.
inline int LineIndex(std::string_view log, std::string_view prefix) {
  int index = 0;
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string_view::npos) end = log.size();
    if (log.substr(start, end - start).starts_with(prefix)) return index;
    ++index;
    start = end + 1;
  }
  return -1;
}

/// The first line of `log` that starts with `prefix` (empty if none).
inline std::string Line(std::string_view log, std::string_view prefix) {
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string_view::npos) end = log.size();
    if (log.substr(start, end - start).starts_with(prefix)) {
      return std::string(log.substr(start, end - start));
    }
    start = end + 1;
  }
  return "";
}

}  // namespace hyper_parallel::shmem::cann::fake
