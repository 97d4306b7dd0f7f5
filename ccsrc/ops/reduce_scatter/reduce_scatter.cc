#include "ops/reduce_scatter/reduce_scatter.h"

#include <cstdint>
#include <string>

namespace hyper_parallel::shmem::ops {

Status ReduceScatter::CheckSizes(const data_plane::CollectiveCall& call) const {
  const std::string unit(data_plane::SizeUnit(call));
  const auto size = static_cast<std::uint64_t>(call.group.size());
  if (call.input_bytes != call.output_bytes * size) {
    return Status::Contract(ErrorCode::kInvalidArgument, "input " + unit,
                            "output " + unit + " * team size (" +
                                data_plane::SizeText(call, call.output_bytes * size) + ")",
                            data_plane::SizeText(call, call.input_bytes));
  }
  return data_plane::CheckInputBeside(call, name());
}

}  // namespace hyper_parallel::shmem::ops
