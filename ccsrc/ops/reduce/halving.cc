#include "ops/reduce/halving.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <string>

namespace hyper_parallel::shmem::ops {
namespace {

// Round-word values must stay below 2^16 steps per call (data_plane::RoundValue).
constexpr std::uint64_t kMaxSteps = std::uint64_t{1} << 16;

std::uint64_t Lines(std::uint64_t bytes) { return (bytes + 63) / 64 * 64; }

// One element-wise step over this PE's heap on a stream backend without an element-wise kernel:
// its operands read back into host memory, combined on the CPU, the result put back (from a
// buffer kept in `put_back`, which must live until the stream is next synchronised).
Status StepThroughHost(data_plane::KernelApi& api, int self,
                       const data_plane::ElementwiseStep& step,
                       std::deque<std::vector<std::byte>>* put_back) {
  using Kind = data_plane::ElementwiseStep::Kind;
  const std::byte* heap = api.Local(0);
  const auto offset = [heap](const void* p) {
    return static_cast<std::uint64_t>(static_cast<const std::byte*>(p) - heap);
  };
  const std::uint64_t eb = ElementBytes(step.type);
  const std::uint64_t ab = AccumulatorBytes(step.type);
  const std::uint64_t in = step.count * (step.kind == Kind::kWiden ? eb : ab);
  const std::uint64_t out = step.count * (step.kind == Kind::kNarrow ? eb : ab);
  std::vector<std::byte> lower(in), upper(step.kind == Kind::kCombine ? in : 0);
  HPS_RETURN_IF_ERROR(api.ReadLocal(lower.data(), offset(step.lower), in));
  if (step.kind == Kind::kCombine) {
    HPS_RETURN_IF_ERROR(api.ReadLocal(upper.data(), offset(step.upper), in));
  }
  std::vector<std::byte>& result = put_back->emplace_back(out);
  data_plane::ElementwiseStep on_host = step;
  on_host.lower = lower.data();
  on_host.upper = upper.data();
  on_host.out = result.data();
  RunElementwise(on_host);
  api.PutBlock(self, offset(step.out), result.data(), out);
  return Status::Ok();
}

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
                     ReductionLayout* out, bool staged) {
  ReductionLayout layout;
  layout.kind = kind;
  layout.shape = HalvingShape(group_size, member);
  layout.elements = elements;
  layout.accumulator_bytes = AccumulatorBytes(type);
  layout.staged = staged;
  layout.set_bytes = (workspace_bytes / (staged ? 4 : 2)) / 64 * 64;
  const std::uint64_t eb = ElementBytes(type);
  // Staged: what lies past the two sets for a pass of these pieces, and whether it fits.
  const auto place_staged = [&](const ReductionPass& pass) {
    layout.accumulators_at = 2 * layout.set_bytes;
    layout.stage_at = layout.accumulators_at + Lines(pass.Elements() * layout.accumulator_bytes);
    const std::uint64_t stage = layout.accumulator_bytes == eb ? 0 : Lines(pass.Elements() * eb);
    layout.hand_over_at = layout.stage_at + stage;
    const std::uint64_t hand_over =
        kind == ReductionKind::kReduceScatter ? Lines(layout.pass_elements * eb) : 0;
    return layout.hand_over_at + hand_over <= workspace_bytes;
  };
  const std::uint64_t capacity = layout.set_bytes / layout.accumulator_bytes;
  const auto n = static_cast<std::uint64_t>(group_size);
  // Elements of one block set per pass: all_reduce's slab, or reduce_scatter's piece of each
  // block (a slab of n pieces). A set holds about what a member receives, half a slab or more:
  // start from twice the capacity and shrink until it fits.
  const std::uint64_t per_slab = kind == ReductionKind::kAllReduce ? 1 : n;
  std::uint64_t guess = std::max<std::uint64_t>(1, std::min(elements, 2 * capacity / per_slab));
  for (;;) {
    layout.pass_elements = guess;
    const ReductionPass first = layout.Pass(0);
    const std::uint64_t need = layout.SetElements(first);
    if (need <= capacity && (!staged || place_staged(first))) break;
    if (guess == 1) {
      return Status::Contract(
          ErrorCode::kInvalidArgument, std::string(operation) + " workspace bytes",
          "room for one element of each of " + std::to_string(group_size) +
              " members in " + (staged ? "a quarter" : "half") +
              " of it (set HYPER_PARALLEL_SHMEM_REDUCE_WORKSPACE higher)",
          std::to_string(workspace_bytes));
    }
    // Shrink by the sets' excess, or (the staged areas did not fit) by a quarter.
    const std::uint64_t smaller = need > capacity ? guess * capacity / need : guess * 3 / 4;
    guess = std::min(guess - 1, std::max<std::uint64_t>(1, smaller));
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
  const bool staged = layout.staged;
  if ((shape.size > 1 && api.RoundWords() < shape.Words()) ||
      staged != !api.HostAddressable()) {
    return Status::Assertion(ErrorCode::kUnsupportedCapability,
                             "reductions need round words, which this backend lacks (or the "
                             "layout was planned for another kind of heap)",
                             {{"operation", std::string(operation)}});
  }
  const std::uint64_t eb = ElementBytes(type);
  const std::uint64_t ab = layout.accumulator_bytes;
  // Types that accumulate in themselves are read straight from the input the first time and
  // written straight into their output the last: no copy in, none out (on the CPU; staged
  // kernels put their input into the workspace first).
  const bool direct = ab == eb && !staged;
  const int me = shape.index;
  const int vrank = shape.VirtualRank();
  const int m = shape.rounds;
  const bool paired = me < 2 * shape.rest;
  const bool all_reduce = layout.kind == ReductionKind::kAllReduce;
  const auto* input = static_cast<const std::byte*>(plan.input);
  std::byte* output = api.Local(plan.output_offset);
  const int slot = group.sync_slot;

  // The accumulators and the hand-over block: host memory, or (staged) the workspace.
  const ReductionPass first = layout.Pass(0);
  std::vector<std::byte> acc(staged ? 0 : first.Elements() * ab);
  std::vector<std::byte> narrow_buffer(
      staged || first.pieces.empty() ? 0 : first.pieces[0].count * eb + eb);
  std::byte* const a = staged ? api.Local(plan.workspace_offset + layout.accumulators_at) : acc.data();
  std::byte* const narrow =
      staged ? api.Local(plan.workspace_offset + layout.hand_over_at) : narrow_buffer.data();
  // One element-wise step: on the CPU, enqueued on the backend's stream, or (a stream backend
  // without an element-wise kernel: CANN) through host memory, whose results stay alive in
  // `put_back` until the stream is synchronised at the end.
  const bool through_host = staged && !api.ComputesElementwise();
  std::deque<std::vector<std::byte>> put_back;
  const auto step = [&](data_plane::ElementwiseStep::Kind kind, const void* lower,
                        const void* upper, void* out, std::uint64_t count) -> Status {
    const data_plane::ElementwiseStep element{kind, type, op, lower, upper, out, count};
    if (!staged) {
      RunElementwise(element);
      return Status::Ok();
    }
    if (count == 0) return Status::Ok();
    if (through_host) return StepThroughHost(api, group.pe(me), element, &put_back);
    return api.Elementwise(element);
  };
  using Kind = data_plane::ElementwiseStep::Kind;

  for (std::uint64_t p = 0; p < layout.passes; ++p) {
    const ReductionPass pass = layout.Pass(p);
    const std::uint64_t set_base = plan.workspace_offset + (p % 2) * layout.set_bytes;
    const std::uint64_t base_step = p * shape.StepsPerPass();
    const auto value = [&](std::uint64_t step_number) {
      return data_plane::RoundValue(plan.sequence, base_step + step_number);
    };
    const auto region = [&](int k) { return set_base + layout.RegionAt(pass, k) * ab; };
    const auto at = [&](int vr) { return pass.prefix[static_cast<std::size_t>(shape.FirstBlock(vr))]; };
    const auto piece = [&](int b) -> const ReductionPass::Piece& {
      return pass.pieces[static_cast<std::size_t>(b)];
    };
    const auto prefix = [&](int b) { return pass.prefix[static_cast<std::size_t>(b)]; };
    const auto wait = [&](int member, int word, std::uint64_t step_number, std::string_view what) {
      return api.WaitRound(slot, word, value(step_number), group.pe(member), operation, what);
    };
    // Where block b's partials are: the input until something was combined into them.
    bool in_input = direct;
    const auto partials = [&](int b) -> const std::byte* {
      return in_input ? input + piece(b).input_at * eb : a + prefix(b) * ab;
    };
    // Puts blocks [lo, hi)'s partials to `member`'s workspace at `offset` (one block after the
    // other, as they lie among the accumulators), then sets its round word.
    const auto send = [&](int member, std::uint64_t offset, int lo, int hi, int word,
                          std::uint64_t step_number) {
      std::vector<data_plane::BlockPut> puts;
      const std::uint64_t base = prefix(lo);
      for (int b = lo; b < hi; ++b) {
        if (piece(b).count == 0) continue;
        puts.push_back({group.pe(member), offset + (prefix(b) - base) * ab, partials(b),
                        piece(b).count * ab});
      }
      api.PutBlocksAndSetRound(puts, group.pe(member), slot, word, value(step_number));
    };
    // Where block b's result goes when it is final: straight into its output where the type
    // allows, else the accumulators (narrowed afterwards).
    const auto result = [&](int b) -> std::byte* {
      if (!direct) return a + prefix(b) * ab;
      if (all_reduce || b == me) return output + piece(b).output_at * eb;
      return narrow;  // reduce_scatter: the odd member's block, sent in the post-step
    };
    // Combines blocks [lo, hi) with `received` (laid out as they lie among the accumulators),
    // this member's partials first when `mine_first`; into `result` when `final`.
    const auto combine = [&](int lo, int hi, const std::byte* received, bool mine_first,
                             bool final) -> Status {
      const std::uint64_t base = prefix(lo);
      for (int b = lo; b < hi; ++b) {
        const std::byte* theirs = received + (prefix(b) - base) * ab;
        std::byte* out = final ? result(b) : a + prefix(b) * ab;
        HPS_RETURN_IF_ERROR(step(Kind::kCombine, mine_first ? partials(b) : theirs,
                                 mine_first ? theirs : partials(b), out, piece(b).count));
      }
      in_input = false;
      return Status::Ok();
    };

    if (staged) {
      // The pass's input pieces into the workspace (accumulators, or the stage to widen from).
      std::vector<data_plane::BlockPut> puts;
      const std::uint64_t into = plan.workspace_offset +
                                 (ab == eb ? layout.accumulators_at : layout.stage_at);
      const std::uint64_t unit = ab == eb ? ab : eb;
      for (int b = 0; b < shape.size; ++b) {
        if (piece(b).count == 0) continue;
        puts.push_back({group.pe(me), into + prefix(b) * unit, input + piece(b).input_at * eb,
                        piece(b).count * eb});
      }
      api.PutBlocks(puts);
      if (ab != eb) {
        const std::byte* stage = api.Local(plan.workspace_offset + layout.stage_at);
        HPS_RETURN_IF_ERROR(step(Kind::kWiden, stage, nullptr, a, pass.Elements()));
      }
    } else if (!direct) {
      for (int b = 0; b < shape.size; ++b) {
        HPS_RETURN_IF_ERROR(step(Kind::kWiden, input + piece(b).input_at * eb, nullptr,
                                 a + prefix(b) * ab, piece(b).count));
      }
    }
    // Pre-step: the odd member of a pair hands its partials to the even one.
    if (paired) {
      if (me % 2 == 1) {
        send(me - 1, region(m), 0, shape.size, m, 1);
      } else {
        HPS_RETURN_IF_ERROR(wait(me + 1, m, 1, "the pair's partial sums"));
        HPS_RETURN_IF_ERROR(combine(0, shape.size, api.Local(region(m)), true, m == 0));
      }
    }
    bool finished = vrank >= 0 && m == 0 && !in_input;
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
        send(partner, region(k), shape.FirstBlock(lower ? mid : lo),
             shape.FirstBlock(lower ? hi : mid), k, 2 + static_cast<std::uint64_t>(k));
        HPS_RETURN_IF_ERROR(wait(partner, k, 2 + static_cast<std::uint64_t>(k),
                                 "the partner's partial sums (halving)"));
        HPS_RETURN_IF_ERROR(combine(shape.FirstBlock(keep_lo), shape.FirstBlock(keep_hi),
                                    api.Local(region(k)), vrank < partner_vrank, k == m - 1));
        lo = keep_lo;
        hi = keep_hi;
      }
      finished = finished || m > 0;
      // This virtual rank's blocks are reduced: where they are not in place yet, narrow them
      // (or, with nothing to combine, copy them) into their outputs.
      for (int b = shape.FirstBlock(vrank); b < shape.FirstBlock(vrank + 1); ++b) {
        std::byte* target = (all_reduce || b == me) ? output + piece(b).output_at * eb : narrow;
        if (!direct) {
          HPS_RETURN_IF_ERROR(step(Kind::kNarrow, a + prefix(b) * ab, nullptr, target,
                                   piece(b).count));
        } else if (!finished && piece(b).count > 0 && partials(b) != target) {
          std::memmove(target, partials(b), piece(b).count * eb);
        }
      }
      if (all_reduce) {
        // Doubling: exchange the finished ranges until every virtual rank has them all.
        const std::uint64_t start = piece(0).output_at;
        lo = vrank;
        hi = vrank + 1;
        for (int j = 0; j < m; ++j) {
          const int d = 1 << j;
          const int partner = shape.MemberOf(vrank ^ d);
          const int k = m - 1 - j;
          const std::uint64_t from = (start + at(lo)) * eb;
          const data_plane::BlockPut put{group.pe(partner), plan.output_offset + from,
                                         output + from, (at(hi) - at(lo)) * eb};
          api.PutBlocksAndSetRound({&put, 1}, group.pe(partner), slot, k,
                                   value(2 + static_cast<std::uint64_t>(m + j)));
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
        const bool whole = all_reduce;
        const std::uint64_t from = whole ? piece(0).output_at * eb : piece(me + 1).output_at * eb;
        const data_plane::BlockPut put{group.pe(me + 1), plan.output_offset + from,
                                       whole ? output + from : narrow,
                                       whole ? pass.Elements() * eb : piece(me + 1).count * eb};
        api.PutBlocksAndSetRound({&put, 1}, group.pe(me + 1), slot, m, value(post));
      } else {
        HPS_RETURN_IF_ERROR(wait(me - 1, m, post, "the pair's result"));
      }
    }
  }
  if (!put_back.empty()) {
    // The last puts read `put_back`'s buffers: a read back synchronises the stream first.
    std::byte synchronised{};
    HPS_RETURN_IF_ERROR(api.ReadLocal(&synchronised, plan.output_offset, 1));
  }
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem::ops
