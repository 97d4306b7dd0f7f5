#include "ops/reduce/halving.h"

#include <algorithm>
#include <string>

namespace hyper_parallel::shmem::ops {
namespace {

// Round-word values must stay below 2^16 steps per call (data_plane::RoundValue).
constexpr std::uint64_t kMaxSteps = std::uint64_t{1} << 16;

}  // namespace

HalvingShape::HalvingShape(int group_size, int member) : size(group_size), index(member) {
  while (pow * 2 <= size) {
    pow *= 2;
    ++rounds;
  }
  rest = size - pow;
}

int HalvingShape::VirtualRank() const {
  if (index < 2 * rest) return index % 2 == 0 ? index / 2 : -1;
  return index - rest;
}

ReductionPass ReductionLayout::Pass(std::uint64_t pass) const {
  const auto n = static_cast<std::uint64_t>(shape.size);
  const std::uint64_t start = pass * pass_elements;
  const std::uint64_t length = std::min(pass_elements, elements - std::min(elements, start));
  ReductionPass out;
  out.pieces.resize(n);
  out.prefix.assign(n + 1, 0);
  for (std::uint64_t b = 0; b < n; ++b) {
    ReductionPass::Piece& piece = out.pieces[b];
    if (kind == ReductionKind::kAllReduce) {
      piece.count = length / n + (b < length % n ? 1 : 0);
      piece.input_at = piece.output_at = start + out.prefix[b];
    } else {
      piece.count = length;
      piece.input_at = b * elements + start;
      piece.output_at = start;
    }
    out.prefix[b + 1] = out.prefix[b] + piece.count;
  }
  return out;
}

namespace {

// Round k's region: the largest half any virtual rank keeps in that round.
std::uint64_t RoundCap(const HalvingShape& shape, const ReductionPass& pass, int k) {
  const int d = shape.pow >> (k + 1);
  std::uint64_t cap = 0;
  for (int lo = 0; lo < shape.pow; lo += d) {
    cap = std::max(cap, pass.prefix[static_cast<std::size_t>(shape.FirstBlock(lo + d))] -
                            pass.prefix[static_cast<std::size_t>(shape.FirstBlock(lo))]);
  }
  return cap;
}

}  // namespace

std::uint64_t ReductionLayout::RegionAt(const ReductionPass& pass, int k) const {
  if (k == shape.rounds) return 0;
  std::uint64_t at = shape.rest > 0 ? pass.Elements() : 0;
  for (int j = 0; j < k; ++j) at += RoundCap(shape, pass, j);
  return at;
}

std::uint64_t ReductionLayout::SetElements(const ReductionPass& pass) const {
  std::uint64_t at = shape.rest > 0 ? pass.Elements() : 0;
  for (int j = 0; j < shape.rounds; ++j) at += RoundCap(shape, pass, j);
  return at;
}

Status PlanReduction(ReductionKind kind, int group_size, int member, std::uint64_t elements,
                     ElementType type, std::uint64_t workspace_bytes, std::string_view operation,
                     ReductionLayout* out) {
  ReductionLayout layout;
  layout.kind = kind;
  layout.shape = HalvingShape(group_size, member);
  layout.elements = elements;
  layout.accumulator_bytes = AccumulatorBytes(type);
  layout.set_bytes = (workspace_bytes / 2) / 64 * 64;
  const std::uint64_t capacity = layout.set_bytes / layout.accumulator_bytes;
  const auto n = static_cast<std::uint64_t>(group_size);
  // Elements of one block set per pass: all_reduce's slab, or reduce_scatter's piece of each
  // block (a slab of n pieces). Start from what the set could hold and shrink until it fits.
  const std::uint64_t per_slab = kind == ReductionKind::kAllReduce ? 1 : n;
  std::uint64_t guess = std::max<std::uint64_t>(1, std::min(elements, capacity / per_slab));
  for (;;) {
    layout.pass_elements = guess;
    const std::uint64_t need = layout.SetElements(layout.Pass(0));
    if (need <= capacity) break;
    if (guess == 1) {
      return Status::Contract(
          ErrorCode::kInvalidArgument, std::string(operation) + " workspace bytes",
          "room for one element of each of " + std::to_string(group_size) +
              " members in half of it (set HYPER_PARALLEL_SHMEM_REDUCE_WORKSPACE higher)",
          std::to_string(workspace_bytes));
    }
    guess = std::min(guess - 1, std::max<std::uint64_t>(1, guess * capacity / need));
  }
  layout.passes = elements == 0 ? 0 : (elements + layout.pass_elements - 1) / layout.pass_elements;
  if (layout.passes * layout.shape.StepsPerPass() + 3 >= kMaxSteps) {
    return Status::Contract(
        ErrorCode::kInvalidArgument, std::string(operation) + " passes",
        "fewer than " + std::to_string(kMaxSteps / layout.shape.StepsPerPass()) +
            " (set HYPER_PARALLEL_SHMEM_REDUCE_WORKSPACE higher for this size)",
        std::to_string(layout.passes));
  }
  *out = std::move(layout);
  return Status::Ok();
}

Status RunReduction(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan,
                    const ReductionLayout& layout, ElementType type, ReduceOp op,
                    std::string_view operation) {
  const HalvingShape& shape = layout.shape;
  const data_plane::CollectiveGroup& group = plan.group;
  if (shape.size > 1 && (!api.HostAddressable() || api.RoundWords() < shape.Words())) {
    return Status::Assertion(
        ErrorCode::kUnsupportedCapability,
        "reductions run on the CPU over round words; this backend offers neither (a device "
        "reduction kernel is not built yet)",
        {{"operation", std::string(operation)}});
  }
  const std::uint64_t eb = ElementBytes(type);
  const std::uint64_t ab = layout.accumulator_bytes;
  const int me = shape.index;
  const int vrank = shape.VirtualRank();
  const int m = shape.rounds;
  const bool paired = me < 2 * shape.rest;
  const auto* input = static_cast<const std::byte*>(plan.input);
  std::byte* output = api.Local(plan.output_offset);
  const int slot = group.sync_slot;

  const ReductionPass first = layout.Pass(0);
  std::vector<std::byte> acc(first.Elements() * ab);
  std::vector<std::byte> narrow(first.pieces.empty() ? 0 : first.pieces[0].count * eb + eb);
  std::byte* const a = acc.data();

  for (std::uint64_t p = 0; p < layout.passes; ++p) {
    const ReductionPass pass = layout.Pass(p);
    const std::uint64_t set_base = plan.workspace_offset + (p % 2) * layout.set_bytes;
    const std::uint64_t base_step = p * shape.StepsPerPass();
    const auto value = [&](std::uint64_t step) {
      return data_plane::RoundValue(plan.sequence, base_step + step);
    };
    const auto region = [&](int k) { return set_base + layout.RegionAt(pass, k) * ab; };
    const auto at = [&](int vr) { return pass.prefix[static_cast<std::size_t>(shape.FirstBlock(vr))]; };
    const auto put_and_set = [&](int member, std::uint64_t offset, const void* source,
                                 std::uint64_t bytes, int word, std::uint64_t step) {
      const data_plane::BlockPut put{group.pe(member), offset, source, bytes};
      api.PutBlocksAndSetRound({&put, 1}, group.pe(member), slot, word, value(step));
    };
    const auto wait = [&](int member, int word, std::uint64_t step, std::string_view what) {
      return api.WaitRound(slot, word, value(step), group.pe(member), operation, what);
    };

    for (std::size_t b = 0; b < pass.pieces.size(); ++b) {
      ToAccumulators(type, input + pass.pieces[b].input_at * eb, a + pass.prefix[b] * ab,
                     pass.pieces[b].count);
    }
    // Pre-step: the odd member of a pair hands its partials to the even one.
    if (paired) {
      if (me % 2 == 1) {
        put_and_set(me - 1, region(m), a, pass.Elements() * ab, m, 1);
      } else {
        HPS_RETURN_IF_ERROR(wait(me + 1, m, 1, "the pair's partial sums"));
        Combine(type, op, a, api.Local(region(m)), a, pass.Elements());
      }
    }
    if (vrank >= 0) {
      // Halving: keep half of the range, send the other half's partials to the partner.
      int lo = 0;
      int hi = shape.pow;
      for (int k = 0; k < m; ++k) {
        const int d = shape.pow >> (k + 1);
        const int partner_vrank = vrank ^ d;
        const int partner = shape.MemberOf(partner_vrank);
        const int mid = lo + d;
        const bool lower = vrank < mid;
        const int keep_lo = lower ? lo : mid;
        const int keep_hi = lower ? mid : hi;
        const int send_lo = lower ? mid : lo;
        const int send_hi = lower ? hi : mid;
        put_and_set(partner, region(k), a + at(send_lo) * ab, (at(send_hi) - at(send_lo)) * ab, k,
                    2 + static_cast<std::uint64_t>(k));
        HPS_RETURN_IF_ERROR(wait(partner, k, 2 + static_cast<std::uint64_t>(k),
                                 "the partner's partial sums (halving)"));
        const std::byte* received = api.Local(region(k));
        std::byte* kept = a + at(keep_lo) * ab;
        const std::uint64_t count = at(keep_hi) - at(keep_lo);
        if (vrank < partner_vrank) {
          Combine(type, op, kept, received, kept, count);
        } else {
          Combine(type, op, received, kept, kept, count);
        }
        lo = keep_lo;
        hi = keep_hi;
      }
      // This virtual rank's blocks are reduced: narrow them into their outputs.
      for (int b = shape.FirstBlock(vrank); b < shape.FirstBlock(vrank + 1); ++b) {
        const ReductionPass::Piece& piece = pass.pieces[static_cast<std::size_t>(b)];
        const std::byte* result = a + pass.prefix[static_cast<std::size_t>(b)] * ab;
        if (layout.kind == ReductionKind::kAllReduce || b == me) {
          FromAccumulators(type, result, output + piece.output_at * eb, piece.count);
        } else {  // reduce_scatter: the odd member's block, sent in the post-step
          FromAccumulators(type, result, narrow.data(), piece.count);
        }
      }
      if (layout.kind == ReductionKind::kAllReduce) {
        // Doubling: exchange the finished ranges until every virtual rank has them all.
        const std::uint64_t start = pass.pieces[0].output_at;
        lo = vrank;
        hi = vrank + 1;
        for (int j = 0; j < m; ++j) {
          const int d = 1 << j;
          const int partner = shape.MemberOf(vrank ^ d);
          const int k = m - 1 - j;
          const std::uint64_t from = (start + at(lo)) * eb;
          const std::uint64_t bytes = (at(hi) - at(lo)) * eb;
          put_and_set(partner, plan.output_offset + from, output + from, bytes, k,
                      2 + static_cast<std::uint64_t>(m + j));
          HPS_RETURN_IF_ERROR(wait(partner, k, 2 + static_cast<std::uint64_t>(m + j),
                                   "the partner's results (doubling)"));
          lo &= ~(2 * d - 1);
          hi = lo + 2 * d;
        }
      }
    }
    // Post-step: the even member of a pair hands the odd one its result.
    if (paired) {
      const std::uint64_t post = 2 + 2 * static_cast<std::uint64_t>(m);
      if (me % 2 == 0) {
        if (layout.kind == ReductionKind::kAllReduce) {
          const std::uint64_t from = pass.pieces[0].output_at * eb;
          put_and_set(me + 1, plan.output_offset + from, output + from, pass.Elements() * eb, m,
                      post);
        } else {
          const ReductionPass::Piece& piece = pass.pieces[static_cast<std::size_t>(me + 1)];
          put_and_set(me + 1, plan.output_offset + piece.output_at * eb, narrow.data(),
                      piece.count * eb, m, post);
        }
      } else {
        HPS_RETURN_IF_ERROR(wait(me - 1, m, post, "the pair's result"));
      }
    }
  }
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem::ops
