// The checks a device backend must pass on a running Runtime, shared by the device backends'
// multi-process tests (CANN over its fake vendor library, CUDA over its fake CUDA layer and over
// the real one): RMA and 64-bit signals, the protection chain, all_gather with several chunks
// from host memory and from the heap, a collective mismatch on every PE, and one MegaMoE
// dispatch and combine on the kernel-side API. The heap is written and read only through the
// Runtime's own put and get to this PE (Fill, ReadBack), never through host pointers, so the
// checks hold for device memory this process cannot address. Run by every PE of a Runtime that
// is ready; leaves its allocations live (the caller frees and shuts down). CheckDeviceAllToAll
// does the same for all_to_all.
#pragma once

#include <vector>

#include "ops/mega_moe/kernels.h"
#include "tests/multiprocess/pe_helpers.h"

namespace hyper_parallel::shmem::testing {

/// `refuses_wide_signals`: whether a signal value beyond 32 bits is UNSUPPORTED_CAPABILITY.
inline void CheckDeviceBackend(PeContext& ctx, bool refuses_wide_signals) {
  using ops::kMoeCounterStride;
  const int next = (ctx.rank + 1) % ctx.size, previous = (ctx.rank + ctx.size - 1) % ctx.size;

  // Put to the next PE, then a 64-bit signal add there; wait for the previous PE's.
  Allocation data = MustAllocate(ctx, 4096);
  Allocation flag = MustAllocate(ctx, 8);
  Fill(ctx, data, 0);
  Fill(ctx, flag, 0);
  CHECK_PE_OK(ctx, Barrier(Rt(), {}));
  std::vector<std::uint32_t> mine(1024);
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = ctx.rank * 100000 + i;
  CHECK_PE_OK(ctx, Rt().Put(View(data), mine.data(), next, {}));
  CHECK_PE_OK(ctx, Rt().Signal(View(flag), SignalWidth::k64, 1, next, SignalOp::kAdd, {}));
  CHECK_PE_OK(ctx, Rt().WaitSignal(View(flag), SignalWidth::k64, 1, Comparison::kGe, {}));
  const std::vector<std::uint32_t> arrived = ReadBack<std::uint32_t>(ctx, data);
  bool right = arrived.size() == mine.size();
  for (std::size_t i = 0; right && i < mine.size(); ++i) {
    right = arrived[i] == previous * 100000 + i;
  }
  CHECK_PE(ctx, right, "the previous PE's put arrived");
  // fence and quiet are stream order; put_nbi is a put; atomics and the waits on several words
  // are not built for device backends yet and say so (docs/atomics.md, "Backends").
  CHECK_PE_OK(ctx, Rt().Fence({}));
  CHECK_PE_OK(ctx, Rt().Quiet({}));
  {
    std::uint64_t old = 0;
    const Status atomic =
        Rt().Atomic(View(flag), 8, AtomicOp::kAdd, 1, 0, next, &old, {});
    CHECK_PE(ctx, atomic.code() == ErrorCode::kUnsupportedCapability &&
                      atomic.message().find("has no atomics yet") != std::string::npos,
             atomic.ToString());
    std::uint8_t satisfied = 0;
    const Status waits = Rt().WaitSignals(View(flag), SignalWidth::k64, 1, Comparison::kGe, {},
                                          WaitSet::kAll, &satisfied, {});
    CHECK_PE(ctx, waits.code() == ErrorCode::kUnsupportedCapability, waits.ToString());
  }
  // Get it back from the next PE: our own pattern.
  std::vector<std::uint32_t> back(1024);
  CHECK_PE_OK(ctx, Rt().Get(back.data(), View(data), next, {}));
  CHECK_PE(ctx, back == mine, "get returns what this PE put");
  if (refuses_wide_signals) {  // 32-bit vendor signals: a value beyond is refused, nothing sent
    const Status wide =
        Rt().Signal(View(flag), SignalWidth::k64, 1ll << 40, next, SignalOp::kSet, {});
    CHECK_PE(ctx, wide.code() == ErrorCode::kUnsupportedCapability, wide.ToString());
  }
  // The protection chain is the Runtime's, whatever the backend: beyond the allocation.
  const Status outside = Rt().Put(Sub(data, 4000, 200), mine.data(), next, {});
  CHECK_PE(ctx, outside.code() == ErrorCode::kInvalidArgument, outside.ToString());

  // all_gather: several chunks per PE and a tail, from host memory, then from the heap (device
  // memory on a GPU, where a device backend's batched copy reads it in place). Every byte of
  // every slot is checked; the second round's pattern differs from the first's.
  const std::uint64_t per_pe = (300 << 10) + 3;
  Allocation gathered = MustAllocate(ctx, per_pe * ctx.size);
  Allocation heap_input = MustAllocate(ctx, per_pe);
  std::vector<std::uint8_t> input(per_pe);
  for (int round = 0; round < 2; ++round) {
    const auto pattern = [round](int pe, std::uint64_t i) {
      return static_cast<std::uint8_t>(pe * 31 + i * (7 + 2 * round));
    };
    for (std::uint64_t i = 0; i < per_pe; ++i) input[i] = pattern(ctx.rank, i);
    const void* source = input.data();
    if (round == 1) {
      CHECK_PE_OK(ctx, Rt().Put(View(heap_input), input.data(), ctx.rank, {}));
      source = heap_input.data;
    }
    CHECK_PE_OK(ctx, AllGather(Rt(), View(gathered), source, per_pe, {}));
    const std::vector<std::uint8_t> output = ReadBack<std::uint8_t>(ctx, gathered);
    right = output.size() == per_pe * ctx.size;
    for (int pe = 0; right && pe < ctx.size; ++pe) {
      for (std::uint64_t i = 0; right && i < per_pe; ++i) {
        right = output[pe * per_pe + i] == pattern(pe, i);
      }
    }
    CHECK_PE(ctx, right, round == 0 ? "all_gather from host memory put every PE's input in its slot"
                                    : "all_gather from the heap put every PE's input in its slot");
  }

  // Different collectives of one number: every PE fails alike, and they stay in step.
  const Status mismatch = ctx.rank == 0
                              ? Barrier(Rt(), {})
                              : AllGather(Rt(), View(gathered), input.data(), per_pe, {});
  CHECK_PE(ctx, mismatch.code() == ErrorCode::kCollectiveMismatch, mismatch.ToString());
  CHECK_PE_OK(ctx, Barrier(Rt(), {}));

  // A call refused on PE 0 only keeps its place (docs/architecture.md, "A refused call keeps
  // its place"): PE 0 reports its own reason, the others name it, and the next calls pair.
  const Status refused = AllGather(Rt(), View(gathered), input.data(),
                                   ctx.rank == 0 ? per_pe + 1 : per_pe, {});
  if (ctx.rank == 0) {
    CHECK_PE(ctx, refused.code() == ErrorCode::kInvalidArgument, refused.ToString());
  } else {
    CHECK_PE(ctx, refused.code() == ErrorCode::kCollectiveMismatch &&
                      Contains(refused.message(),
                               "all_gather was refused on PE 0: INVALID_ARGUMENT"),
             refused.ToString());
  }
  CHECK_PE_OK(ctx, Barrier(Rt(), {}));

  // MegaMoE: one dispatch and combine, two experts per PE, rows off the chunk size.
  const int experts = 2 * ctx.size, locals = 2;
  constexpr int kHidden = 4;
  const std::uint64_t row_bytes = kHidden * sizeof(float);
  Allocation recv = MustAllocate(ctx, 256 * row_bytes);
  Allocation ret = MustAllocate(ctx, 256 * row_bytes);
  Allocation counters = MustAllocate(ctx, (2 * locals + 1) * kMoeCounterStride);
  Fill(ctx, counters, 0);
  std::vector<std::int64_t> counts(ctx.size * experts);
  for (int pe = 0; pe < ctx.size; ++pe) {
    for (int e = 0; e < experts; ++e) counts[pe * experts + e] = (pe * 3 + e * 5) % 7;
  }
  const ops::MoeLayout layout(ops::MoeShape{ctx.size, experts, row_bytes, 3}, counts);
  CHECK_PE_OK(ctx, layout.Validate());
  std::vector<float> rows(layout.SendRows(ctx.rank) * kHidden);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = ctx.rank * 1000.0f + i;
  CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // counters zeroed everywhere first
  ops::DispatchPlan dispatch{reinterpret_cast<const std::byte*>(rows.data()), 0, 0};
  CHECK_PE_OK(ctx, Rt().Launch("moe_dispatch", {View(recv), View(counters)}, {},
                               [&](data_plane::KernelApi& api, const std::vector<std::uint64_t>& at) {
                                 ops::DispatchPlan plan = dispatch;
                                 plan.recv_offset = at[0];
                                 plan.counters_offset = at[1];
                                 return ops::Dispatch(api, layout, plan);
                               }));
  std::vector<float> results(std::max<std::int64_t>(1, layout.RecvRows(ctx.rank)) * kHidden);
  for (int l = 0; l < locals; ++l) {
    CHECK_PE_OK(ctx, Rt().WaitSignal(Sub(counters, l * kMoeCounterStride, 8), SignalWidth::k64,
                                     layout.ExpectedChunks(ctx.rank, l), Comparison::kGe, {}));
    const int expert = ctx.rank * locals + l;
    const std::vector<float> received = ReadBack<float>(ctx, recv);
    for (std::int64_t r = layout.ExpertRow(ctx.rank, l);
         r < layout.ExpertRow(ctx.rank, l) + layout.ExpertRows(ctx.rank, l); ++r) {
      for (int col = 0; col < kHidden; ++col) {
        results[r * kHidden + col] = 2.0f * received[r * kHidden + col] + expert;
      }
    }
    CHECK_PE_OK(ctx, Rt().Signal(Sub(counters, (locals + l) * kMoeCounterStride, 8),
                                 SignalWidth::k64, 1, ctx.rank, SignalOp::kAdd, {}));
  }
  ops::CombinePlan combine{reinterpret_cast<const std::byte*>(results.data()), 0, 0, 0, {1, 1}};
  CHECK_PE_OK(ctx, Rt().Launch("moe_combine", {View(ret), View(counters)}, {},
                               [&](data_plane::KernelApi& api, const std::vector<std::uint64_t>& at) {
                                 ops::CombinePlan plan = combine;
                                 plan.return_offset = at[0];
                                 plan.done_offset = at[1] + locals * kMoeCounterStride;
                                 plan.return_counter_offset = at[1] + 2 * locals * kMoeCounterStride;
                                 return ops::Combine(api, layout, plan);
                               }));
  CHECK_PE_OK(ctx, Rt().WaitSignal(Sub(counters, 2 * locals * kMoeCounterStride, 8),
                                   SignalWidth::k64, experts, Comparison::kGe, {}));
  const std::vector<float> returned = ReadBack<float>(ctx, ret);
  right = true;
  for (int e = 0; e < experts; ++e) {
    for (std::int64_t r = layout.SendRow(ctx.rank, e); r < layout.SendRow(ctx.rank, e + 1); ++r) {
      for (int col = 0; col < kHidden; ++col) {
        right = right && returned[r * kHidden + col] == 2.0f * rows[r * kHidden + col] + e;
      }
    }
  }
  CHECK_PE(ctx, right, "every row came back through its expert");
  CHECK_PE_OK(ctx, Barrier(Rt(), {}));
}

/// all_to_all on a device backend: blocks of several chunks and a tail, from host memory and
/// from the heap, every byte of every block checked, then calls that differ across PEs.
inline void CheckDeviceAllToAll(PeContext& ctx) {
  const std::uint64_t block = (300 << 10) + 5;
  const std::uint64_t bytes = block * ctx.size;
  Allocation output = MustAllocate(ctx, bytes);
  Allocation heap_input = MustAllocate(ctx, bytes);
  std::vector<std::uint8_t> input(bytes);
  for (int round = 0; round < 2; ++round) {
    const auto pattern = [round](int from, int to, std::uint64_t i) {
      return static_cast<std::uint8_t>(from * 31 + to * 7 + i * (5 + 2 * round));
    };
    for (int to = 0; to < ctx.size; ++to) {
      for (std::uint64_t i = 0; i < block; ++i) input[to * block + i] = pattern(ctx.rank, to, i);
    }
    const void* source = input.data();
    if (round == 1) {
      CHECK_PE_OK(ctx, Rt().Put(View(heap_input), input.data(), ctx.rank, {}));
      source = heap_input.data;
    }
    CHECK_PE_OK(ctx, AllToAll(Rt(), View(output), source, bytes, {}));
    const std::vector<std::uint8_t> got = ReadBack<std::uint8_t>(ctx, output);
    bool right = got.size() == bytes;
    for (int from = 0; right && from < ctx.size; ++from) {
      for (std::uint64_t i = 0; right && i < block; ++i) {
        right = got[from * block + i] == pattern(from, ctx.rank, i);
      }
    }
    CHECK_PE(ctx, right, round == 0 ? "all_to_all from host memory delivered every block"
                                    : "all_to_all from the heap delivered every block");
  }
  const std::uint64_t mine = ctx.rank == 0 ? bytes - ctx.size : bytes;  // smaller blocks
  const Status mismatch = AllToAll(Rt(), Sub(output, 0, mine), input.data(), mine, {});
  CHECK_PE(ctx, mismatch.code() == ErrorCode::kCollectiveMismatch, mismatch.ToString());
  CHECK_PE_OK(ctx, Barrier(Rt(), {}));
}

}  // namespace hyper_parallel::shmem::testing
