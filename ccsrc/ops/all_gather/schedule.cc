#include "ops/all_gather/schedule.h"

#include <algorithm>
#include <unordered_map>

namespace hyper_parallel::shmem::ops {

std::string_view AllGatherAlgorithmName(AllGatherAlgorithm algorithm) {
  switch (algorithm) {
    case AllGatherAlgorithm::kDirect: return "direct";
    case AllGatherAlgorithm::kBruck: return "bruck";
    case AllGatherAlgorithm::kRing: return "ring";
  }
  return "direct";
}

HostPlacement::HostPlacement(const std::vector<int>& host_of)
    : host_index(host_of.size()), place(host_of.size()) {
  std::unordered_map<int, std::size_t> index_of;  // host -> its index in `members`
  for (std::size_t m = 0; m < host_of.size(); ++m) {
    const auto [at, added] = index_of.emplace(host_of[m], members.size());
    if (added) members.emplace_back();
    std::vector<int>& here = members[at->second];
    host_index[m] = static_cast<int>(at->second);
    place[m] = static_cast<int>(here.size());
    here.push_back(static_cast<int>(m));
  }
}

int HostPlacement::largest() const {
  std::size_t most = 0;
  for (const std::vector<int>& here : members) most = std::max(most, here.size());
  return static_cast<int>(most);
}

namespace {

int Log2Ceiling(int count) {
  int rounds = 0;
  while ((1 << rounds) < count) ++rounds;
  return rounds;
}

}  // namespace

int RoundWordsNeeded(AllGatherAlgorithm algorithm, int hosts) {
  switch (algorithm) {
    case AllGatherAlgorithm::kDirect: return 0;
    case AllGatherAlgorithm::kBruck: return Log2Ceiling(hosts);
    case AllGatherAlgorithm::kRing: return hosts > 1 ? 1 : 0;
  }
  return 0;
}

AllGatherAlgorithm ChooseAllGather(std::string_view setting, int hosts, int largest,
                                   std::uint64_t block_bytes, int round_words) {
  if (hosts < 2) return AllGatherAlgorithm::kDirect;
  AllGatherAlgorithm chosen = AllGatherAlgorithm::kDirect;
  if (setting == "bruck") {
    chosen = AllGatherAlgorithm::kBruck;
  } else if (setting == "ring") {
    chosen = AllGatherAlgorithm::kRing;
  } else if (setting == "auto" && hosts >= 3 &&
             block_bytes * static_cast<std::uint64_t>(largest) <= kBruckMaxHostBytes) {
    chosen = AllGatherAlgorithm::kBruck;
  }
  if (RoundWordsNeeded(chosen, hosts) > round_words) return AllGatherAlgorithm::kDirect;
  return chosen;
}

std::vector<LeaderRound> LeaderSchedule(AllGatherAlgorithm algorithm, int hosts) {
  std::vector<LeaderRound> rounds;
  if (hosts < 2) return rounds;
  if (algorithm == AllGatherAlgorithm::kBruck) {
    // After round k - 1 a leader holds hosts i .. i - 2^k + 1; round k doubles that (the last
    // round only tops it up to H).
    for (int k = 0; (1 << k) < hosts; ++k) {
      const int distance = 1 << k;
      const int span = std::min(distance, hosts - distance);
      LeaderRound round;
      round.to = distance;
      round.word = k;
      for (int s = 0; s < span; ++s) {
        round.send.push_back(s);
        round.receive.push_back(distance + s);
      }
      rounds.push_back(std::move(round));
    }
  } else if (algorithm == AllGatherAlgorithm::kRing) {
    // Round k passes on what came in round k - 1 (its own host's blocks first).
    for (int k = 0; k + 1 < hosts; ++k) {
      LeaderRound round;
      round.step = k;
      round.send.push_back(k);
      round.receive.push_back(k + 1);
      rounds.push_back(std::move(round));
    }
  }
  return rounds;
}

}  // namespace hyper_parallel::shmem::ops
