#include "ops/reduce_scatter/reduce_scatter.h"

#include <optional>
#include <string>

#include "ops/reduce/checks.h"
#include "ops/reduce/element.h"

namespace hyper_parallel::shmem::ops {

std::string ReduceScatter::ArgumentValue(int index, std::int64_t value) const {
  const std::optional<ReduceOp> op = index == 0 ? ReduceOpOf(value) : std::nullopt;
  return op ? std::string(ReduceOpName(*op)) : std::to_string(value);
}

Status ReduceScatter::Check(const data_plane::CollectiveCall& call) const {
  ElementType type;
  ReduceOp op;
  HPS_RETURN_IF_ERROR(CheckReductionCall(call, name(), &type, &op));
  const std::string unit(data_plane::SizeUnit(call));
  const auto size = static_cast<std::uint64_t>(call.group.size());
  if (call.input_bytes != call.output_bytes * size) {
    return Status::Contract(ErrorCode::kInvalidArgument, "input " + unit,
                            "output " + unit + " * team size (" +
                                data_plane::SizeText(call, call.output_bytes * size) + ")",
                            data_plane::SizeText(call, call.input_bytes));
  }
  HPS_RETURN_IF_ERROR(data_plane::CheckInputBeside(call, name()));
  ReductionLayout layout;
  return PlanReduction(ReductionKind::kReduceScatter, call.group.size(), call.group.index,
                       call.output_bytes / ElementBytes(type), type, call.workspace_bytes, name(),
                       &layout);
}

Status ReduceScatter::Run(data_plane::KernelApi& api,
                          const data_plane::CollectivePlan& plan) const {
  const ElementType type = *ElementTypeNamed(plan.dtype);
  const auto size = static_cast<std::uint64_t>(plan.group.size());
  ReductionLayout layout;
  HPS_RETURN_IF_ERROR(PlanReduction(ReductionKind::kReduceScatter, plan.group.size(),
                                    plan.group.index,
                                    plan.input_bytes / size / ElementBytes(type), type,
                                    plan.workspace_bytes, name(), &layout,
                                    /*staged=*/!api.HostAddressable()));
  return RunReduction(api, plan, layout, type, *ReduceOpOf(plan.arguments[0]), name());
}

}  // namespace hyper_parallel::shmem::ops
