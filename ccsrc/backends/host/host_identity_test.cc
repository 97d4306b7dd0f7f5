#include "backends/host_identity.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/host/host_backend.h"

namespace hyper_parallel::shmem::host {
namespace {

TEST(HostIdentity, ThisProcessKnowsItsKernelAndNamespaces) {
  const HostIdentity here = HostIdentity::Current();
  EXPECT_EQ(std::string(here.boot_id.data()).size(), 36u);  // a UUID
  EXPECT_NE(here.pid_namespace, 0u);
  EXPECT_NE(here.net_namespace, 0u);
  EXPECT_TRUE(here.SameHost(HostIdentity::Current()));
  EXPECT_NE(here.Label().find("(net:[" + std::to_string(here.net_namespace) + "])"),
            std::string::npos);
}

TEST(HostIdentity, NamespaceHostsOfOneKernelAreDifferentHosts) {
  const HostIdentity here = HostIdentity::Current();
  HostIdentity other_net = here;
  other_net.net_namespace += 1;
  HostIdentity other_pid = here;
  other_pid.pid_namespace += 1;
  HostIdentity other_kernel = here;
  other_kernel.boot_id[0] = here.boot_id[0] == 'a' ? 'b' : 'a';
  HostIdentity renamed = here;
  renamed.hostname[0] = '#';
  EXPECT_FALSE(here.SameHost(other_net));
  EXPECT_FALSE(here.SameHost(other_pid));
  EXPECT_FALSE(here.SameHost(other_kernel));
  EXPECT_TRUE(here.SameHost(renamed));  // the hostname only names it
}

std::vector<SegmentHandle> Handles(const std::vector<int>& host_of_pe) {
  std::vector<SegmentHandle> handles(host_of_pe.size());
  for (std::size_t pe = 0; pe < host_of_pe.size(); ++pe) {
    handles[pe].rank = static_cast<int>(pe);
    handles[pe].host = HostIdentity::Current();
    handles[pe].host.net_namespace = 100 + host_of_pe[pe];
    const std::string name = "host" + std::to_string(host_of_pe[pe]);
    handles[pe].host.hostname = {};
    name.copy(handles[pe].host.hostname.data(), name.size());
  }
  return handles;
}

TEST(HostIdentity, NamespaceHostsAreDistinctHostsOnTheSameCores) {
  const std::vector<SegmentHandle> handles = Handles({0, 1});
  EXPECT_FALSE(handles[0].host.SameHost(handles[1].host));
  EXPECT_TRUE(handles[0].host.SameCores(handles[1].host));  // one kernel, one boot id
  HostIdentity elsewhere = handles[1].host;
  elsewhere.boot_id = {};
  std::string("another-boot").copy(elsewhere.boot_id.data(), 12);
  EXPECT_FALSE(handles[0].host.SameCores(elsewhere));
}

TEST(HostIdentity, OneHostPasses) {
  EXPECT_TRUE(CheckOneHost(Handles({0, 0, 0}), 1).ok());
}

TEST(HostIdentity, PesOnOtherHostsWithoutTheNetworkAreRefusedNamingEveryHostAndItsPes) {
  const Status status = CheckOneHost(Handles({0, 1, 0, 1}), 2);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), ErrorCode::kUnsupportedCapability);
  const std::string message = status.message();
  EXPECT_NE(message.find("PEs on other hosts need the network transport (UCX)"), std::string::npos) << message;
  EXPECT_NE(message.find("pe=2"), std::string::npos) << message;
  EXPECT_NE(message.find("host=host0 (net:[100])"), std::string::npos) << message;
  EXPECT_NE(message.find("other_host_pes=1,3"), std::string::npos) << message;
  EXPECT_NE(message.find("hosts=host0 (net:[100]): pes 0,2; host1 (net:[101]): pes 1,3"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace hyper_parallel::shmem::host
