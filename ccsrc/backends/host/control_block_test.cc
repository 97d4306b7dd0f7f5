#include "backends/host/control_block.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace hyper_parallel::shmem::host {
namespace {

// docs/scale-out.md, "Cost model": a control block of T team slots and N PEs takes
//   head + T * (2176 + 832 * ceil(log2 N)) + 320 * N bytes.
std::uint64_t Formula(std::uint64_t teams, std::uint64_t pes) {
  const std::uint64_t head = (sizeof(ControlBlock) + 63) / 64 * 64;
  return head + teams * (2176 + 832 * static_cast<std::uint64_t>(DisseminationRounds(pes))) +
         320 * pes;
}

TEST(ControlLayout, SizeFollowsTheDocumentedFormula) {
  EXPECT_EQ((sizeof(ControlBlock) + 63) / 64 * 64, 192u) << "the head, as the docs give it";
  EXPECT_EQ(sizeof(SummarySlot), 384u);
  EXPECT_EQ(sizeof(CollectiveSlot), 128u);
  for (int teams : {1, 8, 64, 256}) {
    for (int pes : {1, 2, 3, 8, 16, 255, 1024, 4096, 65536}) {
      EXPECT_EQ(ControlLayout(teams, pes).bytes, Formula(teams, pes))
          << "teams=" << teams << " pes=" << pes;
    }
  }
}

TEST(ControlLayout, At1024PesWithTheDefaultTeamSlotsItStaysUnderOneMebibyte) {
  const ControlLayout layout(64, 1024);  // HYPER_PARALLEL_SHMEM_MAX_TEAMS' default
  EXPECT_LE(layout.bytes, 1u << 20) << layout.bytes;
  // What a team slot takes grows with log2 of the PEs only.
  const std::uint64_t per_team_1024 = ControlLayout(2, 1024).bytes - ControlLayout(1, 1024).bytes;
  const std::uint64_t per_team_2048 = ControlLayout(2, 2048).bytes - ControlLayout(1, 2048).bytes;
  EXPECT_EQ(per_team_2048 - per_team_1024, 2 * sizeof(SummarySlot) + sizeof(PaddedCounter))
      << "one more round: its summary slots and its round word";
}

TEST(ControlLayout, RoundsAreTheCeilingOfLog2) {
  EXPECT_EQ(DisseminationRounds(1), 0);
  EXPECT_EQ(DisseminationRounds(2), 1);
  EXPECT_EQ(DisseminationRounds(3), 2);
  EXPECT_EQ(DisseminationRounds(8), 3);
  EXPECT_EQ(DisseminationRounds(9), 4);
  EXPECT_EQ(DisseminationRounds(65536), 16);
}

}  // namespace
}  // namespace hyper_parallel::shmem::host
