// MoeLayout: where every routed row of one MegaMoE step lives, from the count matrix alone.
//
// E experts over P PEs, contiguous blocks: global expert e lives on PE e / L as local expert
// e % L (L = E / P). Each PE sorts its N = T * k routed rows by expert (stably) and sends the
// rows of expert e to its owner. counts[s][e] (exchanged once per step) is how many rows PE s
// routes to expert e; from it every PE computes, without further talk:
//   - on a source: where its rows for expert e start in its own expert-sorted rows
//     (SendRow: the prefix sum of its counts), which is also where the owner's results for them
//     come back in its return buffer;
//   - on an owner: its receive buffer, grouped by local expert, then by source PE, packed
//     without padding (ExpertRow, RecvRow), and how many dispatch signals each local expert's
//     counter gets in one step: one per chunk of `chunk_rows` rows from each source, and one
//     for a source that sends the expert nothing, so the target is known before any row moves.
//
// A plain value, built once per step; pure functions; safe to share between threads.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace hyper_parallel::shmem::ops {

struct MoeShape {
  int pes = 1;
  int experts = 1;
  std::uint64_t row_bytes = 0;    ///< one token's hidden state, in bytes
  std::uint64_t chunk_rows = 128; ///< rows per dispatched block (and per signal)

  int local_experts() const { return experts / pes; }
  int OwnerOf(int expert) const { return expert / local_experts(); }
  int LocalIndex(int expert) const { return expert % local_experts(); }
};

class MoeLayout {
 public:
  /// `counts` is [pes][experts], row-major. Check Validate() before use.
  MoeLayout(MoeShape shape, std::vector<std::int64_t> counts);

  /// INVALID_ARGUMENT unless experts is a positive multiple of pes, chunk_rows > 0, the matrix
  /// is pes x experts and no count is negative.
  Status Validate() const;

  const MoeShape& shape() const { return shape_; }
  std::int64_t Count(int source, int expert) const { return counts_[Index(source, expert)]; }

  /// Rows PE `source` routes in this step, and where its rows for `expert` start among them
  /// (`expert` may be `experts`: the end).
  std::int64_t SendRows(int source) const { return SendRow(source, shape_.experts); }
  std::int64_t SendRow(int source, int expert) const {
    return send_start_[Index(source, 0) + source + expert];
  }

  /// On PE `owner`: rows received in this step; the first received row of its local expert
  /// `local` and how many; the first row from `source` for that expert.
  std::int64_t RecvRows(int owner) const;
  std::int64_t ExpertRow(int owner, int local) const;
  std::int64_t ExpertRows(int owner, int local) const;
  std::int64_t RecvRow(int owner, int local, int source) const;

  /// Dispatch signals of `rows` rows from one source (at least one).
  std::int64_t Chunks(std::int64_t rows) const;
  /// Dispatch signals PE `owner`'s counter of local expert `local` gets in one step.
  std::int64_t ExpectedChunks(int owner, int local) const;
  /// The most rows any PE receives in this step (what its receive buffer must hold).
  std::int64_t MaxRecvRows() const;

 private:
  std::size_t Index(int source, int expert) const {
    return static_cast<std::size_t>(source) * shape_.experts + expert;
  }

  MoeShape shape_;
  std::vector<std::int64_t> counts_;
  // send_start_[source * (experts + 1) + e]: prefix sums of counts[source][0..e).
  std::vector<std::int64_t> send_start_;
  // recv_start_[owner][local][source] flattened: prefix over (local, source) on `owner`.
  std::vector<std::int64_t> recv_start_;
};

}  // namespace hyper_parallel::shmem::ops
