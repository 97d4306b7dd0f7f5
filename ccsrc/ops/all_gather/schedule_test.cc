#include "ops/all_gather/schedule.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace hyper_parallel::shmem::ops {
namespace {

// Plays a schedule among `hosts` leaders: each starts with its own host; a round may send only
// what its sender holds, the blocks it says it sends must be the ones the receiver says it
// receives, and every leader must end with every host, never receiving one twice.
void ExpectEveryLeaderEndsWithEveryHost(AllGatherAlgorithm algorithm, int hosts) {
  std::vector<std::set<int>> held(static_cast<std::size_t>(hosts));
  for (int i = 0; i < hosts; ++i) held[i].insert(i);
  const auto at = [hosts](int i, int relative) { return ((i - relative) % hosts + hosts) % hosts; };
  for (const LeaderRound& round : LeaderSchedule(algorithm, hosts)) {
    ASSERT_EQ(round.send.size(), round.receive.size());
    std::vector<std::set<int>> next = held;
    for (int i = 0; i < hosts; ++i) {
      const int to = at(i, -round.to);
      for (std::size_t b = 0; b < round.send.size(); ++b) {
        const int host = at(i, round.send[b]);
        ASSERT_TRUE(held[i].count(host)) << "leader " << i << " sends host " << host
                                         << " it does not hold";
        // The receiver names the same host among what it receives.
        EXPECT_EQ(at(to, round.receive[b]), host);
        EXPECT_TRUE(next[to].insert(host).second) << "host " << host << " twice at " << to;
      }
    }
    held = next;
  }
  for (int i = 0; i < hosts; ++i) {
    EXPECT_EQ(held[i].size(), static_cast<std::size_t>(hosts)) << "leader " << i;
  }
}

TEST(AllGatherSchedule, BruckAndRingGiveEveryLeaderEveryHost) {
  for (int hosts = 2; hosts <= 33; ++hosts) {
    SCOPED_TRACE(hosts);
    ExpectEveryLeaderEndsWithEveryHost(AllGatherAlgorithm::kBruck, hosts);
    ExpectEveryLeaderEndsWithEveryHost(AllGatherAlgorithm::kRing, hosts);
  }
}

TEST(AllGatherSchedule, BruckTakesCeilLog2RoundsAndRingOneFewerThanTheHosts) {
  EXPECT_EQ(LeaderSchedule(AllGatherAlgorithm::kBruck, 2).size(), 1u);
  EXPECT_EQ(LeaderSchedule(AllGatherAlgorithm::kBruck, 5).size(), 3u);
  EXPECT_EQ(LeaderSchedule(AllGatherAlgorithm::kBruck, 8).size(), 3u);
  EXPECT_EQ(LeaderSchedule(AllGatherAlgorithm::kBruck, 1024).size(), 10u);
  EXPECT_EQ(LeaderSchedule(AllGatherAlgorithm::kRing, 5).size(), 4u);
  EXPECT_TRUE(LeaderSchedule(AllGatherAlgorithm::kDirect, 8).empty());
  EXPECT_TRUE(LeaderSchedule(AllGatherAlgorithm::kBruck, 1).empty());
  // Bruck's rounds use words 0, 1, ...; the ring's steps go through word 0.
  const std::vector<LeaderRound> bruck = LeaderSchedule(AllGatherAlgorithm::kBruck, 8);
  for (std::size_t k = 0; k < bruck.size(); ++k) {
    EXPECT_EQ(bruck[k].word, static_cast<int>(k));
    EXPECT_EQ(bruck[k].to, 1 << k);
  }
  const std::vector<LeaderRound> ring = LeaderSchedule(AllGatherAlgorithm::kRing, 4);
  for (std::size_t k = 0; k < ring.size(); ++k) {
    EXPECT_EQ(ring[k].word, 0);
    EXPECT_EQ(ring[k].step, static_cast<int>(k));
  }
  EXPECT_EQ(RoundWordsNeeded(AllGatherAlgorithm::kBruck, 9), 4);
  EXPECT_EQ(RoundWordsNeeded(AllGatherAlgorithm::kRing, 9), 1);
  EXPECT_EQ(RoundWordsNeeded(AllGatherAlgorithm::kDirect, 9), 0);
}

TEST(AllGatherSchedule, AutoChoosesBruckForSmallBlocksOnThreeHostsOrMore) {
  EXPECT_EQ(ChooseAllGather("auto", 1, 8, 8, 4), AllGatherAlgorithm::kDirect);
  EXPECT_EQ(ChooseAllGather("auto", 2, 4, 8, 4), AllGatherAlgorithm::kDirect);
  EXPECT_EQ(ChooseAllGather("auto", 4, 2, 8, 4), AllGatherAlgorithm::kBruck);
  EXPECT_EQ(ChooseAllGather("auto", 4, 2, kBruckMaxHostBytes / 2, 4), AllGatherAlgorithm::kBruck);
  EXPECT_EQ(ChooseAllGather("auto", 4, 2, kBruckMaxHostBytes / 2 + 1, 4),
            AllGatherAlgorithm::kDirect);
  EXPECT_EQ(ChooseAllGather("auto", 16, 1, 1 << 20, 4), AllGatherAlgorithm::kDirect);
  // Forced, whatever the size; a backend without round words falls back to direct.
  EXPECT_EQ(ChooseAllGather("bruck", 2, 1, 1 << 20, 1), AllGatherAlgorithm::kBruck);
  EXPECT_EQ(ChooseAllGather("ring", 3, 4, 8, 2), AllGatherAlgorithm::kRing);
  EXPECT_EQ(ChooseAllGather("direct", 16, 1, 8, 4), AllGatherAlgorithm::kDirect);
  EXPECT_EQ(ChooseAllGather("bruck", 16, 1, 8, 3), AllGatherAlgorithm::kDirect);
  EXPECT_EQ(ChooseAllGather("ring", 4, 1, 8, 0), AllGatherAlgorithm::kDirect);
  EXPECT_EQ(ChooseAllGather("bruck", 1, 4, 8, 4), AllGatherAlgorithm::kDirect);
}

TEST(HostPlacement, GroupsMembersByHostInGroupOrder) {
  const HostPlacement placement({4, 0, 4, 0, 9});
  ASSERT_EQ(placement.hosts(), 3);
  EXPECT_EQ(placement.members[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(placement.members[1], (std::vector<int>{1, 3}));
  EXPECT_EQ(placement.members[2], (std::vector<int>{4}));
  EXPECT_EQ(placement.host_index, (std::vector<int>{0, 1, 0, 1, 2}));
  EXPECT_EQ(placement.place, (std::vector<int>{0, 0, 1, 1, 0}));
  EXPECT_EQ(placement.largest(), 2);
}

}  // namespace
}  // namespace hyper_parallel::shmem::ops
