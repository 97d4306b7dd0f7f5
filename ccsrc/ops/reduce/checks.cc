#include "ops/reduce/checks.h"

#include <string>

namespace hyper_parallel::shmem::ops {

Status CheckReductionCall(const data_plane::CollectiveCall& call, std::string_view operation,
                          ElementType* type, ReduceOp* op) {
  HPS_RETURN_IF_ERROR(CheckReducible(operation, call.dtype, call.arguments[0]));
  *type = *ElementTypeNamed(call.dtype);
  *op = *ReduceOpOf(call.arguments[0]);
  const std::uint64_t bytes = ElementBytes(*type);
  if (call.element_bytes != 0 && call.element_bytes != bytes) {
    return Status::Contract(ErrorCode::kInvalidArgument, std::string(operation) + " element size",
                            std::to_string(bytes) + " (" + std::string(call.dtype) + ")",
                            std::to_string(call.element_bytes));
  }
  if (call.input_bytes % bytes != 0) {
    return Status::Contract(ErrorCode::kInvalidArgument, std::string(operation) + " input bytes",
                            "a multiple of " + std::to_string(bytes) + " (" +
                                std::string(call.dtype) + ")",
                            std::to_string(call.input_bytes));
  }
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem::ops
