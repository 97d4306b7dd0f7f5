// The reductions and the collectives whose sizes differ per PE on a device backend's running
// Runtime (CANN over its fake vendor library, CUDA over its fake CUDA layer and the real one).
// As device_backend_checks.h, the heap is written and read only through the Runtime's own put
// and get to this PE, so the checks hold for device memory this process cannot address.
//   - all_gather_v with a PE that contributes nothing, and the sizes it reports;
//   - all_to_all with split sizes (some zero), and a pair whose sizes differ:
//     COLLECTIVE_MISMATCH on every PE, naming the pair;
//   - all_reduce and reduce_scatter of every dtype with every operator it takes (exact values,
//     compared bitwise with the reference), in place, over several passes of the workspace,
//     twice in a row (round words start from zero again): with the backend's element-wise
//     kernel (CUDA) or through host memory (CANN).
// Run by every PE of a ready Runtime; leaves its allocations live.
#pragma once

#include <string>
#include <vector>

#include "testing/collectives.h"
#include "tests/multiprocess/reduction_values.h"

namespace hyper_parallel::shmem::testing {

inline void CheckDeviceVariableCollectives(PeContext& ctx) {
  const int n = ctx.size;
  // all_gather_v: PE r gives (r * 37 + 11) bytes, PE 1 none.
  const auto given = [](int pe) -> std::uint64_t { return pe == 1 ? 0 : pe * 37 + 11; };
  std::uint64_t total = 0;
  for (int pe = 0; pe < n; ++pe) total += given(pe);
  Allocation gathered = MustAllocate(ctx, total + 64);
  std::vector<std::uint8_t> mine(given(ctx.rank) + 1);
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<std::uint8_t>(ctx.rank * 13 + i);
  for (int call = 0; call < 2; ++call) {
    Fill(ctx, gathered, 0xee);
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    std::vector<std::uint64_t> sizes;
    CHECK_PE_OK(ctx, AllGatherV(Rt(), View(gathered), mine.data(), given(ctx.rank), &sizes, {}));
    bool right = sizes.size() == static_cast<std::size_t>(n);
    for (int pe = 0; right && pe < n; ++pe) right = sizes[pe] == given(pe);
    CHECK_PE(ctx, right, "all_gather_v reported every PE's size");
    const std::vector<std::uint8_t> got = ReadBack<std::uint8_t>(ctx, gathered);
    std::uint64_t at = 0;
    for (int pe = 0; right && pe < n; ++pe) {
      for (std::uint64_t i = 0; right && i < given(pe); ++i) {
        right = got[at + i] == static_cast<std::uint8_t>(pe * 13 + i);
      }
      at += given(pe);
    }
    right = right && got[total] == 0xee;  // nothing past what was gathered
    CHECK_PE(ctx, right, "all_gather_v packed every PE's bytes in PE order");
  }
  // all_to_all with splits: PE r sends split(r, j) bytes to PE j (zero for some pairs).
  const auto split = [](int from, int to) -> std::uint64_t { return (from * 3 + to * 5) % 4 * 29; };
  std::vector<std::uint64_t> send(n), receive(n);
  std::uint64_t send_total = 0, receive_total = 0;
  for (int j = 0; j < n; ++j) {
    send[j] = split(ctx.rank, j);
    receive[j] = split(j, ctx.rank);
    send_total += send[j];
    receive_total += receive[j];
  }
  Allocation exchanged = MustAllocate(ctx, 4 * 29 * n + 64);
  std::vector<std::uint8_t> input(send_total + 1);
  std::uint64_t at = 0;
  for (int j = 0; j < n; ++j) {
    for (std::uint64_t i = 0; i < send[j]; ++i) input[at + i] = static_cast<std::uint8_t>(ctx.rank * 7 + j * 17 + i);
    at += send[j];
  }
  CHECK_PE_OK(ctx, AllToAllV(Rt(), View(exchanged), input.data(), send, receive, {}));
  const std::vector<std::uint8_t> got = ReadBack<std::uint8_t>(ctx, exchanged);
  bool right = true;
  at = 0;
  for (int from = 0; right && from < n; ++from) {
    for (std::uint64_t i = 0; right && i < receive[from]; ++i) {
      right = got[at + i] == static_cast<std::uint8_t>(from * 7 + ctx.rank * 17 + i);
    }
    at += receive[from];
  }
  CHECK_PE(ctx, right, "all_to_all with split sizes delivered every block");
  CHECK_PE_OK(ctx, Barrier(Rt(), {}));
  if (n > 1) {
    // PE 1 expects one byte more from PE 0 than PE 0 sends.
    std::vector<std::uint64_t> wrong = receive;
    if (ctx.rank == 1) wrong[0] += 1;
    const Status mismatch = AllToAllV(Rt(), View(exchanged), input.data(), send, wrong, {});
    CHECK_PE(ctx, mismatch.code() == ErrorCode::kCollectiveMismatch &&
                      Contains(mismatch.ToString(), "pe=0") &&
                      Contains(mismatch.ToString(), "to_pe=1"),
             mismatch.ToString());
  }
  CHECK_PE_OK(ctx, Barrier(Rt(), {}));
}

inline void CheckDeviceReductions(PeContext& ctx) {
  if (!CheckEveryDtypeAndOperator(ctx)) return;
  int call = 1000;
  // In place, over many passes of the workspace (the caller sets it small), from the heap.
  constexpr std::uint64_t kLarge = 5003;
  Allocation large = MustAllocate(ctx, kLarge * 2);
  for (int repeat = 0; repeat < 2; ++repeat) {
    ++call;
    std::vector<std::byte> values(kLarge * 2);
    FillValues(ctx, ElementType::kBFloat16, ReduceOp::kSum, 0, kLarge, call, values.data());
    CHECK_PE_OK(ctx, Rt().Put(View(large), values.data(), ctx.rank, {}));
    CHECK_PE_OK(ctx, AllReduce(Rt(), View(large), large.data, kLarge * 2,
                               Code(ReduceOp::kSum), "bfloat16", {}));
    const std::vector<std::byte> got = ReadBack<std::byte>(ctx, large);
    if (!CheckReduced(ctx, ElementType::kBFloat16, ReduceOp::kSum, 0, kLarge, call, got.data(),
                      "in-place all_reduce over several passes")) {
      return;
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
  }
}

}  // namespace hyper_parallel::shmem::testing
