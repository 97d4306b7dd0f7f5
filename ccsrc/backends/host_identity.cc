#include "backends/host_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

namespace hyper_parallel::shmem {
namespace {

std::uint64_t NamespaceInode(const char* path) {
  struct stat info {};
  return ::stat(path, &info) == 0 ? static_cast<std::uint64_t>(info.st_ino) : 0;
}

template <std::size_t N>
void CopyTruncated(const std::string& text, std::array<char, N>* out) {
  out->fill('\0');
  std::memcpy(out->data(), text.data(), std::min(text.size(), N - 1));
}

}  // namespace

HostIdentity HostIdentity::Current() {
  HostIdentity identity;
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  CopyTruncated(boot, &identity.boot_id);
  identity.pid_namespace = NamespaceInode("/proc/self/ns/pid");
  identity.net_namespace = NamespaceInode("/proc/self/ns/net");
  char name[65] = {};
  if (::gethostname(name, sizeof name - 1) != 0) name[0] = '\0';
  CopyTruncated(name, &identity.hostname);
  return identity;
}

bool HostIdentity::SameHost(const HostIdentity& other) const {
  return boot_id == other.boot_id && pid_namespace == other.pid_namespace &&
         net_namespace == other.net_namespace;
}

bool HostIdentity::SameCores(const HostIdentity& other) const {
  return boot_id[0] != '\0' && boot_id == other.boot_id;
}

std::string HostIdentity::Label() const {
  return std::string(hostname.data()) + " (net:[" + std::to_string(net_namespace) + "])";
}

}  // namespace hyper_parallel::shmem
