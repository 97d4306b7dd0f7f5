#include "ops/mega_moe/layout.h"

#include <algorithm>
#include <string>

namespace hyper_parallel::shmem::ops {

MoeLayout::MoeLayout(MoeShape shape, std::vector<std::int64_t> counts)
    : shape_(shape), counts_(std::move(counts)) {
  if (!Validate().ok()) return;
  const int pes = shape_.pes;
  const int experts = shape_.experts;
  const int local = shape_.local_experts();
  send_start_.assign(static_cast<std::size_t>(pes) * (experts + 1), 0);
  for (int source = 0; source < pes; ++source) {
    std::int64_t row = 0;
    for (int e = 0; e < experts; ++e) {
      send_start_[static_cast<std::size_t>(source) * (experts + 1) + e] = row;
      row += Count(source, e);
    }
    send_start_[static_cast<std::size_t>(source) * (experts + 1) + experts] = row;
  }
  // One extra entry per owner holds its total.
  recv_start_.assign(static_cast<std::size_t>(pes) * (local * pes + 1), 0);
  for (int owner = 0; owner < pes; ++owner) {
    std::int64_t row = 0;
    const std::size_t base = static_cast<std::size_t>(owner) * (local * pes + 1);
    for (int l = 0; l < local; ++l) {
      for (int source = 0; source < pes; ++source) {
        recv_start_[base + static_cast<std::size_t>(l) * pes + source] = row;
        row += Count(source, owner * local + l);
      }
    }
    recv_start_[base + static_cast<std::size_t>(local) * pes] = row;
  }
}

Status MoeLayout::Validate() const {
  if (shape_.pes < 1 || shape_.experts < shape_.pes || shape_.experts % shape_.pes != 0) {
    return Status::Contract(ErrorCode::kInvalidArgument, "MoE experts",
                            "a positive multiple of the PE count " + std::to_string(shape_.pes),
                            std::to_string(shape_.experts));
  }
  if (shape_.chunk_rows == 0) {
    return Status::Contract(ErrorCode::kInvalidArgument, "MoE chunk rows", "positive", "0");
  }
  const std::size_t cells = static_cast<std::size_t>(shape_.pes) * shape_.experts;
  if (counts_.size() != cells) {
    return Status::Contract(ErrorCode::kInvalidArgument, "MoE count matrix",
                            std::to_string(shape_.pes) + " x " + std::to_string(shape_.experts) +
                                " entries",
                            std::to_string(counts_.size()) + " entries");
  }
  for (std::size_t i = 0; i < cells; ++i) {
    if (counts_[i] < 0) {
      return Status::Contract(ErrorCode::kInvalidArgument, "MoE row count", "non-negative",
                              std::to_string(counts_[i]) + " (pe " +
                                  std::to_string(i / shape_.experts) + ", expert " +
                                  std::to_string(i % shape_.experts) + ")");
    }
  }
  return Status::Ok();
}

std::int64_t MoeLayout::RecvRows(int owner) const {
  const int local = shape_.local_experts();
  return recv_start_[static_cast<std::size_t>(owner) * (local * shape_.pes + 1) +
                     static_cast<std::size_t>(local) * shape_.pes];
}

std::int64_t MoeLayout::RecvRow(int owner, int local, int source) const {
  const int locals = shape_.local_experts();
  return recv_start_[static_cast<std::size_t>(owner) * (locals * shape_.pes + 1) +
                     static_cast<std::size_t>(local) * shape_.pes + source];
}

std::int64_t MoeLayout::ExpertRow(int owner, int local) const { return RecvRow(owner, local, 0); }

std::int64_t MoeLayout::ExpertRows(int owner, int local) const {
  const int locals = shape_.local_experts();
  const std::int64_t end = local + 1 < locals ? ExpertRow(owner, local + 1) : RecvRows(owner);
  return end - ExpertRow(owner, local);
}

std::int64_t MoeLayout::Chunks(std::int64_t rows) const {
  const auto chunk = static_cast<std::int64_t>(shape_.chunk_rows);
  return rows == 0 ? 1 : (rows + chunk - 1) / chunk;
}

std::int64_t MoeLayout::ExpectedChunks(int owner, int local) const {
  std::int64_t chunks = 0;
  for (int source = 0; source < shape_.pes; ++source) {
    chunks += Chunks(Count(source, owner * shape_.local_experts() + local));
  }
  return chunks;
}

std::int64_t MoeLayout::MaxRecvRows() const {
  std::int64_t most = 0;
  for (int owner = 0; owner < shape_.pes; ++owner) most = std::max(most, RecvRows(owner));
  return most;
}

}  // namespace hyper_parallel::shmem::ops
