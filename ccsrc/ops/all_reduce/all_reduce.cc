#include "ops/all_reduce/all_reduce.h"

#include <optional>
#include <string>

#include "ops/reduce/checks.h"
#include "ops/reduce/element.h"

namespace hyper_parallel::shmem::ops {

std::string AllReduce::ArgumentValue(int index, std::int64_t value) const {
  const std::optional<ReduceOp> op = index == 0 ? ReduceOpOf(value) : std::nullopt;
  return op ? std::string(ReduceOpName(*op)) : std::to_string(value);
}

Status AllReduce::Check(const data_plane::CollectiveCall& call) const {
  ElementType type;
  ReduceOp op;
  HPS_RETURN_IF_ERROR(CheckReductionCall(call, name(), &type, &op));
  const std::string unit(data_plane::SizeUnit(call));
  if (call.output_bytes != call.input_bytes) {
    return Status::Contract(ErrorCode::kInvalidArgument, "output " + unit,
                            "input " + unit + " (" + data_plane::SizeText(call, call.input_bytes) +
                                ")",
                            data_plane::SizeText(call, call.output_bytes));
  }
  HPS_RETURN_IF_ERROR(data_plane::CheckInputInPlaceOrBeside(call, name()));
  ReductionLayout layout;
  return PlanReduction(ReductionKind::kAllReduce, call.group.size(), call.group.index,
                       call.input_bytes / ElementBytes(type), type, call.workspace_bytes, name(),
                       &layout);
}

Status AllReduce::Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const {
  const ElementType type = *ElementTypeNamed(plan.dtype);
  ReductionLayout layout;
  HPS_RETURN_IF_ERROR(PlanReduction(ReductionKind::kAllReduce, plan.group.size(), plan.group.index,
                                    plan.input_bytes / ElementBytes(type), type,
                                    plan.workspace_bytes, name(), &layout,
                                    /*staged=*/!api.HostAddressable()));
  return RunReduction(api, plan, layout, type, *ReduceOpOf(plan.arguments[0]), name());
}

}  // namespace hyper_parallel::shmem::ops
