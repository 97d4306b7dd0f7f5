#include "ops/reduce/checks.h"

#include <optional>
#include <string>

#include "ops/reduce/element.h"

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

std::string ReductionUnit::ArgumentValue(int index, std::int64_t value) const {
  const std::optional<ReduceOp> op = index == 0 ? ReduceOpOf(value) : std::nullopt;
  return op ? std::string(ReduceOpName(*op)) : std::to_string(value);
}

std::uint64_t ReductionUnit::Elements(std::uint64_t input_bytes, int group_size,
                                      ElementType type) const {
  const std::uint64_t blocks =
      kind_ == ReductionKind::kReduceScatter ? static_cast<std::uint64_t>(group_size) : 1;
  return input_bytes / blocks / ElementBytes(type);
}

Status ReductionUnit::Check(const data_plane::CollectiveCall& call) const {
  ElementType type;
  ReduceOp op;
  HPS_RETURN_IF_ERROR(CheckReductionCall(call, name(), &type, &op));
  HPS_RETURN_IF_ERROR(CheckSizes(call));
  ReductionLayout layout;
  return PlanReduction(kind_, call.group.size(), call.group.index,
                       Elements(call.input_bytes, call.group.size(), type), type,
                       call.workspace_bytes, name(), &layout);
}

Status ReductionUnit::Run(data_plane::KernelApi& api,
                          const data_plane::CollectivePlan& plan) const {
  const ElementType type = *ElementTypeNamed(plan.dtype);
  ReductionLayout layout;
  HPS_RETURN_IF_ERROR(PlanReduction(kind_, plan.group.size(), plan.group.index,
                                    Elements(plan.input_bytes, plan.group.size(), type), type,
                                    plan.workspace_bytes, name(), &layout,
                                    /*staged=*/!api.HostAddressable()));
  return RunReduction(api, plan, layout, type, *ReduceOpOf(plan.arguments[0]), name());
}

}  // namespace hyper_parallel::shmem::ops
