#include "ops/all_reduce/all_reduce.h"

namespace hyper_parallel::shmem::ops {

Status AllReduce::CheckSizes(const data_plane::CollectiveCall& call) const {
  HPS_RETURN_IF_ERROR(data_plane::CheckOutputSizeIsInput(call));
  return data_plane::CheckInputInPlaceOrBeside(call, name());
}

}  // namespace hyper_parallel::shmem::ops
