// The reductions' kernel (all_reduce, reduce_scatter): recursive halving, then, for all_reduce,
// recursive doubling (Rabenseifner's algorithm), written on the kernel-side API alone
// (data_plane/kernel_api.h). docs/architecture.md, "Reductions", draws it.
//
// Members: N = 2^m + r with 0 <= r < 2^m. The first 2r members pair up (2i, 2i+1): the odd one
// hands its partial to the even one (the pre-step) and sits out; the 2^m others take virtual
// ranks 0..2^m-1. The data of a pass is cut into N blocks (block b: the part member b owns in a
// reduce_scatter); virtual rank v holds blocks 2v and 2v+1 when v < r, else block v + r.
// In halving round k (k = 0..m-1) a virtual rank and its partner at distance 2^(m-1-k) split
// their common range of virtual ranks: each sends the other half's partial sums to the partner
// and combines what it receives into the half it keeps, so after m rounds each virtual rank
// holds its blocks fully reduced, every block reduced once and in an order fixed by N alone
// (the lower partner's partial first). all_reduce then narrows its blocks into the output and
// doubles back (round j at distance 2^j), and the even member of each pair copies the result to
// the odd one (the post-step); reduce_scatter writes each member's block into its output.
//
// What moves between partners is accumulators (float32 for the half types), so a half sum is
// rounded once. Received partials land in the group's workspace (CollectivePlan::workspace_*):
// one region per round, in two sets used by alternate passes, so a partner a pass ahead never
// writes where this member still reads. Data larger than a pass fits runs in passes.
// Synchronisation is round words (KernelApi::PutBlocksAndSetRound, WaitRound): word k at a
// member is written only by its round-k partner, word m only by its pair, with values
// RoundValue(epoch, step) that grow through a call (steps numbered across the passes) and from
// call to call.
//
// On a stream backend (KernelApi::HostAddressable false) the kernel is the same, staged: its
// accumulators, its staging of half-type input and reduce_scatter's hand-over block live in the
// workspace too (a quarter of it for each set of regions, the other half for these), each pass
// first puts its input pieces there, and every widening, combining and narrowing is an
// element-wise step the backend enqueues (KernelApi::Elementwise; the CUDA backend's kernel),
// or, on a backend without such a kernel (CANN), a step through host memory: its operands read
// back (KernelApi::ReadLocal), combined on the CPU and put back into the heap.
//
// Thread-safety: pure functions of their arguments; RunReduction runs on the launching stream.
#pragma once

#include <cstdint>
#include <vector>

#include "data_plane/collective.h"
#include "data_plane/kernel_api.h"
#include "ops/reduce/element.h"

namespace hyper_parallel::shmem::ops {

/// The members' places in the halving: N = 2^m + r.
struct HalvingShape {
  int size = 1;    ///< N
  int index = 0;   ///< this member
  int pow = 1;     ///< 2^m
  int rest = 0;    ///< r
  int rounds = 0;  ///< m

  explicit HalvingShape(int group_size, int member = 0);
  /// This member's virtual rank, or -1 for the odd member of a pair (it sits out).
  int VirtualRank() const;
  /// The member of virtual rank v.
  int MemberOf(int vrank) const { return vrank < rest ? 2 * vrank : vrank + rest; }
  /// The first block virtual rank v holds (FirstBlock(pow) == N).
  int FirstBlock(int vrank) const { return vrank < rest ? 2 * vrank : vrank + rest; }
  /// Round words the algorithm needs: m, and one more for the pairs.
  int Words() const { return rounds + (rest > 0 ? 1 : 0); }
  /// Round-word steps one pass takes.
  std::uint64_t StepsPerPass() const { return 2 * static_cast<std::uint64_t>(rounds) + 3; }
};

/// What a reduction reduces.
enum class ReductionKind { kAllReduce, kReduceScatter };

/// One pass's data: piece b is block b's part in this pass.
struct ReductionPass {
  struct Piece {
    std::uint64_t input_at = 0;   ///< first element in the input
    std::uint64_t output_at = 0;  ///< first element in its owner's (all_reduce: every) output
    std::uint64_t count = 0;
  };
  std::vector<Piece> pieces;         ///< N of them
  std::vector<std::uint64_t> prefix; ///< N + 1: where piece b starts among the accumulators
  std::uint64_t Elements() const { return prefix.back(); }
};

/// How a call's elements are cut into passes.
struct ReductionLayout {
  ReductionKind kind = ReductionKind::kAllReduce;
  HalvingShape shape{1};
  std::uint64_t elements = 0;          ///< all_reduce: the tensor's; reduce_scatter: a block's
  std::uint64_t pass_elements = 0;     ///< elements of each block set a pass takes
  std::uint64_t passes = 0;
  std::uint64_t accumulator_bytes = 4;
  std::uint64_t set_bytes = 0;         ///< workspace bytes of one of the two sets
  /// Staged (a stream backend): where, past the two sets, the accumulators, the staged input
  /// (half types) and reduce_scatter's hand-over block start in the workspace; 0 if unstaged.
  bool staged = false;
  std::uint64_t accumulators_at = 0;
  std::uint64_t stage_at = 0;
  std::uint64_t hand_over_at = 0;

  /// The pass numbered `pass`.
  ReductionPass Pass(std::uint64_t pass) const;
  /// Where round k's region starts within a set, in accumulators (k == rounds: the pair's
  /// pre-step region, at 0), for a pass of these pieces.
  std::uint64_t RegionAt(const ReductionPass& pass, int k) const;
  /// Accumulators one set needs for a pass of these pieces.
  std::uint64_t SetElements(const ReductionPass& pass) const;
};

/// Cuts a reduction of `elements` (all_reduce: the tensor's numel; reduce_scatter: the output's)
/// into passes that fit `workspace_bytes`. INVALID_ARGUMENT when it cannot: a workspace too
/// small for one element per member, or more passes than round words count (2^16 steps).
/// `staged`: the layout of a stream backend (see above).
Status PlanReduction(ReductionKind kind, int group_size, int member, std::uint64_t elements,
                     ElementType type, std::uint64_t workspace_bytes, std::string_view operation,
                     ReductionLayout* out, bool staged = false);

/// Runs a planned reduction of `plan.input` into the output (the kernel of both units).
Status RunReduction(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan,
                    const ReductionLayout& layout, ElementType type, ReduceOp op,
                    std::string_view operation);

}  // namespace hyper_parallel::shmem::ops
