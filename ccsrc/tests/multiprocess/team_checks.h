// The team checks every backend must pass on a running Runtime of 4 or 8 PEs (docs/teams.md),
// shared by the host backend's team tests and the device backends' (CANN and CUDA over their
// fakes): a 2-D split (rows of 2 = EP, columns = DP) and a strided split with their numbering,
// all_gather and all_to_all over each team in team-PE order, barriers, a kernel launched over a
// team (team PEs, team-scoped counters), a mismatch inside one team while the others go on, the
// identity rule (the same ranks share a team), destroy and re-create. The heap is written and
// read only through the Runtime's own put and get (Fill, ReadBack), so the checks hold for
// device memory. Leaves no team behind; the caller frees and shuts down.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "tests/multiprocess/pe_helpers.h"

namespace hyper_parallel::shmem::testing {

/// The team's members and this PE's place in it, as DescribeTeam reports them.
inline TeamInfo MustDescribe(PeContext& ctx, const TeamHandle& team) {
  TeamInfo info;
  CHECK_PE_OK(ctx, Rt().DescribeTeam(team, &info));
  return info;
}

/// all_gather over `team` of one 8-byte word per PE (the world PE number times 1000 plus
/// `salt`): the output must hold every member's word in team-PE order.
inline void CheckTeamAllGather(PeContext& ctx, const TeamHandle& team, const Allocation& out,
                               std::int64_t salt) {
  const TeamInfo info = MustDescribe(ctx, team);
  const auto n = static_cast<std::uint64_t>(info.pes.size());
  Fill(ctx, out, 0xAB);
  const std::int64_t mine = ctx.rank * 1000 + salt;
  CHECK_PE_OK(ctx, Rt().RunCollective(team, CollectiveNamed("all_gather"),
                                      CollectiveOperands{Sub(out, 0, 8 * n), &mine, 8, 0, {}},
                                      {}));
  const std::vector<std::int64_t> got = ReadBack<std::int64_t>(ctx, out);
  for (std::uint64_t member = 0; member < n; ++member) {
    CHECK_PE(ctx, got[member] == info.pes[member] * 1000 + salt,
             "all_gather slot " + std::to_string(member) + " holds " +
                 std::to_string(got[member]));
  }
  // Nothing past the team's slots.
  const std::vector<unsigned char> bytes = ReadBack<unsigned char>(ctx, out);
  CHECK_PE(ctx, std::all_of(bytes.begin() + static_cast<std::ptrdiff_t>(8 * n), bytes.end(),
                            [](unsigned char b) { return b == 0xAB; }),
           "all_gather wrote past the team's slots");
}

/// all_to_all over `team`: block j (8 bytes) goes to team PE j, and block i of the output is
/// what team PE i sent this PE.
inline void CheckTeamAllToAll(PeContext& ctx, const TeamHandle& team, const Allocation& out) {
  const TeamInfo info = MustDescribe(ctx, team);
  const int n = static_cast<int>(info.pes.size());
  std::vector<std::int64_t> input(static_cast<std::size_t>(n));
  for (int to = 0; to < n; ++to) input[to] = ctx.rank * 100 + info.pes[to];
  CHECK_PE_OK(ctx, Rt().RunCollective(
                       team, CollectiveNamed("all_to_all"),
                       CollectiveOperands{Sub(out, 0, 8 * static_cast<std::uint64_t>(n)),
                                          input.data(), 8 * static_cast<std::uint64_t>(n), 0, {}},
                       {}));
  const std::vector<std::int64_t> got = ReadBack<std::int64_t>(ctx, out);
  for (int from = 0; from < n; ++from) {
    CHECK_PE(ctx, got[from] == info.pes[from] * 100 + ctx.rank,
             "all_to_all block " + std::to_string(from) + " holds " + std::to_string(got[from]));
  }
}

/// A kernel launched over `team`: it sees team numbering, puts its team PE to the next team
/// PE's word and adds to that PE's counter, then waits for its own counter.
inline void CheckTeamKernel(PeContext& ctx, const TeamHandle& team, const Allocation& words) {
  const TeamInfo info = MustDescribe(ctx, team);
  const int n = static_cast<int>(info.pes.size());
  Fill(ctx, words, 0);  // before the barrier: no team PE adds to the counter until then
  CHECK_PE_OK(ctx, Rt().RunCollective(team, CollectiveNamed("barrier"), {}, {}));
  int seen_rank = -1, seen_size = -1;
  const std::int64_t mine = info.my_pe;
  CHECK_PE_OK(ctx, Rt().Launch(team, "team_ring", {View(words)}, {},
                               [&](data_plane::KernelApi& api,
                                   const std::vector<std::uint64_t>& at) {
                                 seen_rank = api.rank();
                                 seen_size = api.size();
                                 const int next = (api.rank() + 1) % api.size();
                                 api.PutBlock(next, at[0], &mine, 8);
                                 api.AddCounter(next, at[0] + 64, 1);
                                 return api.WaitCounter(at[0] + 64, 1, "the previous team PE");
                               }));
  CHECK_PE(ctx, seen_rank == info.my_pe && seen_size == n,
           "the kernel saw rank " + std::to_string(seen_rank) + " of " +
               std::to_string(seen_size));
  const std::vector<std::int64_t> got = ReadBack<std::int64_t>(ctx, words);
  CHECK_PE(ctx, got[0] == (info.my_pe + n - 1) % n,
           "the previous team PE's word: " + std::to_string(got[0]));
  CHECK_PE_OK(ctx, Rt().RunCollective(team, CollectiveNamed("barrier"), {}, {}));
}

inline void CheckTeams(PeContext& ctx) {
  const int n = ctx.size;
  // Allocation is collective over the world: every PE makes the scratch the checks reuse (a
  // peer's data of a team collective arrives only after this PE entered it).
  Allocation s = MustAllocate(ctx, std::max<std::uint64_t>(8 * static_cast<std::uint64_t>(n), 256));
  // A 2-D split of the world: rows of 2 (EP), columns of n / 2 (DP).
  TeamHandle row, column;
  CHECK_PE_OK(ctx, Rt().TeamSplit2d(kWorldTeam, 2, &row, &column));
  const TeamInfo row_info = MustDescribe(ctx, row);
  const TeamInfo column_info = MustDescribe(ctx, column);
  const int base = ctx.rank / 2 * 2;
  CHECK_PE(ctx, row_info.pes == std::vector<int>({base, base + 1}) &&
                    row_info.my_pe == ctx.rank % 2,
           "row team");
  std::vector<int> column_pes;
  for (int pe = ctx.rank % 2; pe < n; pe += 2) column_pes.push_back(pe);
  CHECK_PE(ctx, column_info.pes == column_pes && column_info.my_pe == ctx.rank / 2,
           "column team");
  int world_pe = -1;
  CHECK_PE_OK(ctx, Rt().TeamPe(column, 1, &world_pe));
  CHECK_PE(ctx, world_pe == ctx.rank % 2 + 2, "team PE 1 of the column");
  const Status outside = Rt().TeamPe(row, 2, &world_pe);
  CHECK_PE(ctx, outside.code() == ErrorCode::kInvalidArgument, outside.ToString());

  CheckTeamAllGather(ctx, row, s, 1);
  CheckTeamAllGather(ctx, column, s, 2);
  CheckTeamAllToAll(ctx, row, s);
  CheckTeamAllToAll(ctx, column, s);
  CheckTeamKernel(ctx, row, s);
  CheckTeamKernel(ctx, column, s);

  // A mismatch inside each row: its two PEs both fail naming the team; the rows stay usable.
  std::vector<std::uint8_t> input(128, 7);
  const std::uint64_t bytes = ctx.rank % 2 == 0 ? 64 : 128;
  const Status mismatch = Rt().RunCollective(
      row, CollectiveNamed("all_gather"),
      CollectiveOperands{Sub(s, 0, 2 * bytes), input.data(), bytes, 0, {}}, {});
  CHECK_PE(ctx, mismatch.code() == ErrorCode::kCollectiveMismatch, mismatch.ToString());
  CHECK_PE(ctx, Contains(mismatch.message(), "team=team " + std::to_string(row_info.slot) +
                                                 " pes=[" + std::to_string(base) + "," +
                                                 std::to_string(base + 1) + "]") &&
                    Contains(mismatch.message(), "field=bytes"),
           mismatch.message());
  CHECK_PE_OK(ctx, Rt().RunCollective(row, CollectiveNamed("barrier"), {}, {}));

  // A strided split: the even PEs; the odd ones get no team.
  TeamHandle even;
  CHECK_PE_OK(ctx, Rt().TeamSplitStrided(kWorldTeam, 0, 2, n / 2, &even));
  CHECK_PE(ctx, even.valid() == (ctx.rank % 2 == 0), "strided membership");
  if (even.valid()) {
    CHECK_PE(ctx, MustDescribe(ctx, even).my_pe == ctx.rank / 2, "strided numbering");
    // The same ranks as the even column: one team, shared by both handles.
    CHECK_PE(ctx, even.slot == column.slot && even.id != column.id, "identity rule");
    CheckTeamAllGather(ctx, even, s, 3);
    CHECK_PE_OK(ctx, Rt().TeamDestroy(even));
    CHECK_PE(ctx, Rt().TeamDestroy(even).code() == ErrorCode::kInvalidArgument,
             "a destroyed handle is refused");
    CheckTeamAllGather(ctx, column, s, 4);  // the other handle still holds the team
  }
  // A team of the row's PEs in the other order: a team of its own.
  TeamHandle reversed;
  CHECK_PE_OK(ctx, Rt().TeamCreate({base + 1, base}, &reversed));
  CHECK_PE(ctx, reversed.slot != row.slot && MustDescribe(ctx, reversed).my_pe == 1 - ctx.rank % 2,
           "reversed row");
  CheckTeamAllToAll(ctx, reversed, s);
  const int row_slot = row.slot;
  CHECK_PE_OK(ctx, Rt().TeamDestroy(reversed));
  CHECK_PE_OK(ctx, Rt().TeamDestroy(row));
  const Status gone = Rt().RunCollective(row, CollectiveNamed("barrier"), {}, {});
  CHECK_PE(ctx, gone.code() == ErrorCode::kInvalidArgument, gone.ToString());
  // Re-created: a slot free on both, collectives continue where the slot's numbers left off.
  CHECK_PE_OK(ctx, Rt().TeamCreate({base, base + 1}, &row));
  const TeamInfo again = MustDescribe(ctx, row);
  CHECK_PE(ctx, again.first_sequence >= (again.slot == row_slot ? row_info.sequence : 0),
           "a re-created team continues above the slot's numbers");
  CheckTeamAllGather(ctx, row, s, 5);
  CHECK_PE_OK(ctx, Rt().TeamDestroy(row));
  CHECK_PE_OK(ctx, Rt().TeamDestroy(column));
  CHECK_PE(ctx, Rt().Snapshot().teams.size() == 1, "only the world is left");
  CHECK_PE(ctx, Rt().TeamDestroy(kWorldTeam).code() == ErrorCode::kInvalidArgument,
           "the world cannot be destroyed");
  CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // every PE read its last result before the free
  CHECK_PE_OK(ctx, Rt().Free(View(s)));
}

}  // namespace hyper_parallel::shmem::testing
