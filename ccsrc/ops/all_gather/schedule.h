// How all_gather moves blocks among hosts: where the members sit (HostPlacement), which
// algorithm runs for a call (ChooseAllGather) and, for the algorithms that go through each
// host's leader, the rounds among the leaders (LeaderSchedule). Pure and header-light, so the
// choice and the schedules have unit tests of their own (schedule_test.cc); the kernels that
// follow them are in all_gather.cc (docs/architecture.md, "Algorithms").
//
// The algorithms among hosts:
//   - direct: every member puts its block to its host's members and to one member of every
//     other host (its rail), which forwards it on its own host: each block crosses once per
//     pair of hosts, in H - 1 messages per member at once;
//   - bruck: each host's members first put their blocks to their leader (and to each other),
//     then the H leaders exchange in ceil(log2 H) rounds: in round k leader i sends every host
//     block it holds (at most 2^k of them, those of hosts i, i - 1, ...) to leader i + 2^k and
//     receives as many from leader i - 2^k; each leader forwards what it receives to its host
//     through shared memory. Each block still crosses once per pair of hosts, in log2 H
//     messages per leader: latency-bound small blocks;
//   - ring: the same with H - 1 rounds to the next leader (round k forwards what came in round
//     k - 1), one message in flight per leader: bandwidth-bound large blocks on a network whose
//     links the direct pattern would overload at once.
//
// Thread-safety: pure functions and plain values.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace hyper_parallel::shmem::ops {

enum class AllGatherAlgorithm { kDirect, kBruck, kRing };

std::string_view AllGatherAlgorithmName(AllGatherAlgorithm algorithm);

/// The members of a group by host: `host_of[m]` is member m's host (KernelApi::HostOf).
struct HostPlacement {
  explicit HostPlacement(const std::vector<int>& host_of);

  int hosts() const { return static_cast<int>(members.size()); }
  /// The most members any one host has.
  int largest() const;

  std::vector<std::vector<int>> members;  ///< by host index (in group order of first member)
  std::vector<int> host_index;            ///< by member: its host's index
  std::vector<int> place;                 ///< by member: its place among its host's members
};

/// The all_gather algorithm for a call: `setting` is HYPER_PARALLEL_SHMEM_ALGORITHMS' value for
/// all_gather ("auto", "direct", "bruck" or "ring"), `hosts` the hosts the members sit on, each
/// with at most `largest` members, `block_bytes` each member's input, `round_words` the
/// backend's KernelApi::RoundWords(). One host: direct (shared memory). Auto picks bruck when
/// there are at least 3 hosts and a host's blocks together are at most kBruckMaxHostBytes, and
/// direct otherwise (ring is never picked by itself: docs/benchmarks.md has the measurements).
/// An algorithm the backend cannot run (too few round words) falls back to direct.
AllGatherAlgorithm ChooseAllGather(std::string_view setting, int hosts, int largest,
                                   std::uint64_t block_bytes, int round_words);

inline constexpr std::uint64_t kBruckMaxHostBytes = 64ull << 10;

/// One round among H leaders, relative to leader i: it sends the host blocks of hosts
/// i - s for s in `send` to leader i + `to`, sets round word `word` there to step `step` of the
/// call (data_plane::RoundValue), and receives the blocks of hosts i - r for r in `receive` from
/// leader i - `to`.
struct LeaderRound {
  int to = 1;
  int word = 0;
  int step = 0;
  std::vector<int> send;
  std::vector<int> receive;
};

/// The rounds of `algorithm` (bruck or ring) among `hosts` leaders (none for direct or fewer
/// than two hosts). Every leader ends holding every host's blocks, and sends only blocks it
/// holds (its own or received in an earlier round).
std::vector<LeaderRound> LeaderSchedule(AllGatherAlgorithm algorithm, int hosts);

/// How many round words `algorithm` needs among `hosts` leaders.
int RoundWordsNeeded(AllGatherAlgorithm algorithm, int hosts);

}  // namespace hyper_parallel::shmem::ops
