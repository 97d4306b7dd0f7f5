// The all_to_all_vdev family of the symm_mem operators on this runtime (docs/api.md, "torch's
// symmetric-memory API"): all_to_all_vdev, all_to_all_vdev_2d and all_to_all_vdev_2d_offset,
// with torch's schemas and semantics (symm_mem_ops.h; symm_mem_ops.cc registers them). Each
// rank reads every peer's splits, then pulls what it receives with this runtime's get, so only
// the input and its splits must be symmetric; out may be any tensor of the device.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bindings/torch/symm_mem_ops.h"

namespace hyper_parallel::shmem::binding {
namespace {

// Every peer's copy of the int64 symmetric `splits`, by group rank.
std::vector<std::vector<std::int64_t>> PeerSplits(const SymmGroup& group,
                                                  const SymmetricView& splits,
                                                  const c10::Device& device) {
  std::vector<std::vector<std::int64_t>> all(static_cast<std::size_t>(group.world()));
  for (int r = 0; r < group.world(); ++r) {
    all[r].resize(splits.bytes / sizeof(std::int64_t));
    GetBytes(device, all[r].data(), splits, 0, splits.bytes, group.pes[r]);
  }
  Synchronize(device);
  return all;
}

std::uint64_t RowBytes(const at::Tensor& tensor) {
  if (tensor.dim() == 0) return tensor.element_size();
  return static_cast<std::uint64_t>(tensor.stride(0)) * tensor.element_size();
}

std::int64_t Rows(const at::Tensor& tensor) { return tensor.dim() == 0 ? 1 : tensor.size(0); }

// One chunk to pull: `rows` rows from row `from` of the source on group rank `peer`, to row
// `to` of the output.
struct Pull {
  int peer;
  std::int64_t from;
  std::int64_t to;
  std::int64_t rows;
};

// The checks every member of the family makes of its data operands.
void CheckData(std::string_view op, const at::Tensor& input, const at::Tensor& out) {
  TORCH_CHECK(input.is_contiguous() && out.is_contiguous(), op,
              ": input and out must be contiguous");
  TORCH_CHECK(input.dtype() == out.dtype() &&
                  (input.dim() == 0 || out.dim() == 0 || input.stride(0) == out.stride(0)),
              "input and out must have the same dtype and same stride at dim 0");
  // Peers read input; out is written by this rank only (it pulls), so it may be any tensor
  // (a compiled graph's functionalized copy of a symmetric one included).
  SymmetricOperand(op, "input", input);
  TORCH_CHECK(out.device() == input.device(), op, ": out must be on input's device");
}

// Splits peers read (`symmetric`) or this rank alone writes.
void CheckSplits(std::string_view op, std::string_view name, const at::Tensor& splits,
                 bool symmetric) {
  TORCH_CHECK(splits.scalar_type() == at::kLong, "splits and offsets must be int64");
  TORCH_CHECK(splits.is_contiguous(), op, ": ", name, " must be contiguous");
  if (symmetric) SymmetricOperand(op, name, splits);
}

// The data operands and both splits, as every member of the family checks them: the input
// splits (`in_name`) are read by peers, out_splits_offsets is written by this rank alone.
void CheckOperands(std::string_view op, const at::Tensor& input, const at::Tensor& out,
                   std::string_view in_name, const at::Tensor& in_splits,
                   const at::Tensor& out_splits_offsets) {
  CheckData(op, input, out);
  CheckSplits(op, in_name, in_splits, true);
  CheckSplits(op, "out_splits_offsets", out_splits_offsets, false);
}

// A group's pulls, after every PE's checks and the barrier; then the output fit is agreed
// (a PE whose output cannot hold what it receives refuses, so every PE raises and nothing is
// written), the splits and offsets are written, the rows pulled, and a barrier ends the call.
void RunPulls(std::string_view op, const SymmGroup& group, const at::Tensor& input,
              const at::Tensor& out, const at::Tensor& out_splits_offsets,
              const std::vector<std::int64_t>& splits, const std::vector<std::int64_t>& offsets,
              const std::vector<Pull>& pulls) {
  std::int64_t end = 0;
  for (const Pull& pull : pulls) end = std::max(end, pull.to + pull.rows);
  CheckedBarrier(group, [&] {
    TORCH_CHECK(end <= Rows(out), op, ": the splits do not fit out: the rows received end at ",
                end, " but out has ", Rows(out), " rows");
  });
  std::vector<std::int64_t> both(splits);
  both.insert(both.end(), offsets.begin(), offsets.end());
  out_splits_offsets.copy_(
      at::from_blob(both.data(), out_splits_offsets.sizes(), at::TensorOptions(at::kLong)));
  const SymmetricView source = SymmetricOperand(op, "input", input);
  const std::uint64_t row = RowBytes(input);
  auto* destination = static_cast<std::byte*>(out.data_ptr());
  for (const Pull& pull : pulls) {
    GetBytes(out.device(), destination + pull.to * row, source, pull.from * row,
             pull.rows * row, group.pes[pull.peer]);
  }
  Barrier(group);
  Synchronize(out.device());  // `both` is read by the copy until the stream ran it
}

// Non-negative splits whose rows lie inside `input` (with offsets where given).
void CheckLocalSplits(std::string_view op, const at::Tensor& input, const std::int64_t* splits,
                      const std::int64_t* offsets, std::int64_t count) {
  std::int64_t sum = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    TORCH_CHECK(splits[i] >= 0, op, ": split ", i, " is negative (", splits[i], ")");
    if (offsets != nullptr) {
      TORCH_CHECK(offsets[i] >= 0 && offsets[i] + splits[i] <= Rows(input), op, ": chunk ", i,
                  " (offset ", offsets[i], ", split ", splits[i], ") lies outside input's ",
                  Rows(input), " rows");
    }
    sum += splits[i];
  }
  TORCH_CHECK(offsets != nullptr || sum <= Rows(input),
              "sum of splits is larger than input dim (", sum, " > ", Rows(input), ")");
}

}  // namespace

void AllToAllVdev(const at::Tensor& input, at::Tensor& out, const at::Tensor& in_splits,
                  at::Tensor& out_splits_offsets, std::string group_name) {
  constexpr std::string_view kOp = "all_to_all_vdev";
  const SymmGroup group = GroupNamed(kOp, group_name);
  const int world = group.world();
  const SymmetricView splits_view = CheckedBarrier(group, [&] {
    CheckOperands(kOp, input, out, "in_splits", in_splits, out_splits_offsets);
    TORCH_CHECK(in_splits.numel() == world, "in_splits must have world_size (", world,
                ") elements, but got ", in_splits.numel());
    TORCH_CHECK(out_splits_offsets.dim() == 2 && out_splits_offsets.size(0) == 2 &&
                    out_splits_offsets.size(1) == world,
                "out_splits_offsets must be 2D with 2 rows of world_size (", world, ")");
    CheckLocalSplits(kOp, input, OnHost(in_splits).data_ptr<std::int64_t>(), nullptr, world);
    return SymmetricOperand(kOp, "in_splits", in_splits);
  });
  const auto peers = PeerSplits(group, splits_view, input.device());
  std::vector<std::int64_t> splits(world), offsets(world);
  std::vector<Pull> pulls;
  std::int64_t at = 0;
  for (int p = 0; p < world; ++p) {
    const auto& theirs = peers[p];
    const std::int64_t from = std::accumulate(theirs.begin(), theirs.begin() + group.rank,
                                              std::int64_t{0});
    splits[p] = theirs[group.rank];
    offsets[p] = at;
    pulls.push_back(Pull{p, from, at, splits[p]});
    at += splits[p];
  }
  RunPulls(kOp, group, input, out, out_splits_offsets, splits, offsets, pulls);
}

void AllToAllVdev2d(const at::Tensor& input, at::Tensor& out, const at::Tensor& in_splits,
                    at::Tensor& out_splits_offsets, std::string group_name,
                    std::optional<std::int64_t> major_align) {
  constexpr std::string_view kOp = "all_to_all_vdev_2d";
  const SymmGroup group = GroupNamed(kOp, group_name);
  const int world = group.world();
  const std::int64_t align = major_align.value_or(1);
  const SymmetricView splits_view = CheckedBarrier(group, [&] {
    TORCH_CHECK(align > 0, "major_align must be positive");
    CheckOperands(kOp, input, out, "in_splits", in_splits, out_splits_offsets);
    TORCH_CHECK(out_splits_offsets.dim() == 2 && out_splits_offsets.size(0) == 2 &&
                    out_splits_offsets.size(1) == in_splits.numel() &&
                    in_splits.numel() % world == 0,
                "out_splits_offsets must be 2D with 2 rows, each row must be a multiple of "
                "world_size");
    const at::Tensor host = OnHost(in_splits);
    CheckLocalSplits(kOp, input, host.data_ptr<std::int64_t>(), nullptr, in_splits.numel());
    return SymmetricOperand(kOp, "in_splits", in_splits);
  });
  const std::int64_t experts = in_splits.numel() / world;
  const auto peers = PeerSplits(group, splits_view, input.device());
  // Output in expert-major order: expert e's rows from every source rank, in rank order; each
  // expert's block up-aligned to major_align (at least major_align when empty).
  const std::size_t count = static_cast<std::size_t>(experts * world);
  std::vector<std::int64_t> splits(count), offsets(count);
  std::vector<Pull> pulls;
  std::int64_t start = 0;
  for (std::int64_t e = 0; e < experts; ++e) {
    std::int64_t at = start;
    for (int src = 0; src < world; ++src) {
      const auto& theirs = peers[src];
      const std::int64_t chunk = group.rank * experts + e;
      const std::int64_t from =
          std::accumulate(theirs.begin(), theirs.begin() + chunk, std::int64_t{0});
      splits[e * world + src] = theirs[chunk];
      offsets[e * world + src] = at;
      pulls.push_back(Pull{src, from, at, theirs[chunk]});
      at += theirs[chunk];
    }
    const std::int64_t length = at - start;
    start += std::max((length + align - 1) / align * align, align);
  }
  RunPulls(kOp, group, input, out, out_splits_offsets, splits, offsets, pulls);
}

void AllToAllVdev2dOffset(const at::Tensor& input, at::Tensor& out,
                          const at::Tensor& in_splits_offsets, at::Tensor& out_splits_offsets,
                          std::string group_name) {
  constexpr std::string_view kOp = "all_to_all_vdev_2d_offset";
  const SymmGroup group = GroupNamed(kOp, group_name);
  const int world = group.world();
  const SymmetricView splits_view = CheckedBarrier(group, [&] {
    CheckOperands(kOp, input, out, "in_splits_offsets", in_splits_offsets, out_splits_offsets);
    TORCH_CHECK(in_splits_offsets.dim() == 2 && in_splits_offsets.size(0) == 2 &&
                    in_splits_offsets.size(1) % world == 0,
                "in_splits_offsets must be 2D with 2 rows, each row must be a multiple of "
                "world_size");
    TORCH_CHECK(out_splits_offsets.dim() == 2 && out_splits_offsets.size(0) == 2 &&
                    out_splits_offsets.size(1) == in_splits_offsets.size(1),
                "out_splits_offsets must be 2D with 2 rows of the same length as "
                "in_splits_offsets'");
    const std::int64_t n = in_splits_offsets.size(1);
    const at::Tensor host = OnHost(in_splits_offsets);
    const auto* data = host.data_ptr<std::int64_t>();
    CheckLocalSplits(kOp, input, data, data + n, n);
    return SymmetricOperand(kOp, "in_splits_offsets", in_splits_offsets);
  });
  const std::int64_t n = in_splits_offsets.size(1);
  const std::int64_t experts = n / world;
  const auto peers = PeerSplits(group, splits_view, input.device());
  // Input in expert-major order (chunk e * world + destination rank), with offsets; output in
  // rank-major order (source rank * experts + e), packed.
  std::vector<std::int64_t> splits(static_cast<std::size_t>(n)), offsets(splits.size());
  std::vector<Pull> pulls;
  std::int64_t at = 0;
  for (int src = 0; src < world; ++src) {
    for (std::int64_t e = 0; e < experts; ++e) {
      const std::int64_t chunk = e * world + group.rank;
      const std::int64_t rows = peers[src][chunk];
      splits[src * experts + e] = rows;
      offsets[src * experts + e] = at;
      pulls.push_back(Pull{src, peers[src][n + chunk], at, rows});
      at += rows;
    }
  }
  RunPulls(kOp, group, input, out, out_splits_offsets, splits, offsets, pulls);
}

}  // namespace hyper_parallel::shmem::binding
