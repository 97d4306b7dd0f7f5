// The primitives as torch custom ops, torch.ops.hps.<op> (docs/compile.md): the schemas, each
// with its kernel under the CPU and CUDA keys, and order_token() for Python (the token itself:
// order_token.h, order_token.cc).
//
// The schemas are shaped for the compiler (docs/compile.md, Schemas): every op takes the order
// token first and declares it mutated, so that each op depends on the one before it and no
// pass reorders or drops them; every local write is declared too (get's dst, the collectives'
// output, wait_signal's sig and the tensors it guards, the tensors a barrier publishes), so
// that no read of them moves across the op. All return (). A team is an int list (the code a
// shmem.Team carries: [] the world, [-1] the node team, [lifecycle, slot, id] a made team).
//
// The kernels run the same entries as the Python functions (primitives.h). A kernel checks the
// token, then that every tensor it writes or waits on is symmetric: a copy (what
// functionalization hands an op under aot_eager) is refused, never waited on or written. No
// kernel is registered under a composite or catch-all key: such a kernel runs during tracing.
#include "bindings/torch/ops.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings/torch/errors.h"
#include "bindings/torch/heap_tensors.h"
#include "bindings/torch/order_token.h"
#include "bindings/torch/primitives.h"
#include "bindings/torch/teams.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace hyper_parallel::shmem::binding {
namespace {

// An int64 PE argument as the int the Runtime takes; one outside every int is refused here.
int PeValue(std::string_view op, std::int64_t pe) {
  if (pe < std::numeric_limits<int>::min() || pe > std::numeric_limits<int>::max()) {
    Check(Contract(op, "pe", "in [0, " + std::to_string(Runtime::Process().size()) + ")",
                   std::to_string(pe)));
  }
  return static_cast<int>(pe);
}

// The team a team code names (docs/compile.md, Teams).
TeamHandle TeamOf(std::string_view op, at::IntArrayRef code) {
  if (code.empty()) return kWorldTeam;
  if (code.size() == 1 && code[0] == -1) {
    TeamHandle node;
    const Status status = Runtime::Process().NodeTeam(&node);
    if (!status.ok()) Throw(status.Retagged(op, "validate"));
    return node;
  }
  if (code.size() != 3 || code[0] < 0 || code[1] < 0 || code[2] < 0 ||
      code[1] > std::numeric_limits<int>::max()) {
    Check(Contract(op, "team",
                   "a shmem.Team's code ([] the world, [-1] the node team, [lifecycle, slot, "
                   "id] a made team)",
                   c10::str(code)));
  }
  return TeamHandle{static_cast<std::uint64_t>(code[0]), static_cast<int>(code[1]),
                    static_cast<std::uint64_t>(code[2])};
}

int TargetPe(std::string_view op, std::int64_t pe, at::IntArrayRef team) {
  const int value = PeValue(op, pe);
  if (team.empty()) [[likely]] return value;
  return WorldPe(op, TeamOf(op, team), value);
}

// What an op writes or waits on must be the symmetric tensor itself, never a copy of it.
void RequireSymmetric(std::string_view op, std::string_view name, const at::Tensor& tensor) {
  if (IsSymmetric(tensor)) [[likely]] return;
  Check(Contract(op, name,
                 "a symmetric tensor from shmem.empty, itself (under torch.compile an op that "
                 "is handed a copy, as functionalization does outside inductor, refuses it: "
                 "docs/compile.md)",
                 Describe(tensor) + " outside the symmetric heap"));
}

void RequireSymmetric(std::string_view op, std::string_view name, at::TensorList tensors) {
  for (const at::Tensor& tensor : tensors) RequireSymmetric(op, name, tensor);
}

// A collective op's team, after its order token and its symmetric operands (`name`) passed;
// a failure there is refused in the call's place as `kind` (primitives.h, Refusable).
TeamHandle CollectiveEntry(const char* op, std::string_view kind, const at::Tensor& order,
                           std::string_view name, at::TensorList symmetric,
                           at::IntArrayRef team) {
  const TeamHandle on = TeamOf(op, team);
  Refusable(kind, on, [&] {
    CheckOrderToken(order, op);
    RequireSymmetric(op, name, symmetric);
  });
  return on;
}

SignalOp SignalOpOf(std::string_view op, c10::string_view name) {
  const SignalOp* chosen = SignalOpNamed(name);
  if (chosen == nullptr) {
    ThrowValueError(op, "operation", "one of set, add", "'" + std::string(name) + "'");
  }
  return *chosen;
}

// A comparison's name as the enum; ValueError naming the choices otherwise.
Comparison ComparisonOf(std::string_view op, c10::string_view name) {
  const Comparison* chosen = ComparisonNamed(name);
  if (chosen == nullptr) {
    ThrowValueError(op, "comparison", "one of eq, ne, gt, ge, lt, le",
                    "'" + std::string(name) + "'");
  }
  return *chosen;
}

void PutKernel(at::Tensor& order, const at::Tensor& dst, const at::Tensor& src, std::int64_t pe,
               at::IntArrayRef team) {
  CheckOrderToken(order, "put");
  PutTensors(dst, src, TargetPe("put", pe, team), CallPath::kCustomOp);
}

void GetKernel(at::Tensor& order, at::Tensor& dst, const at::Tensor& src, std::int64_t pe,
               at::IntArrayRef team) {
  CheckOrderToken(order, "get");
  GetTensors(dst, src, TargetPe("get", pe, team), CallPath::kCustomOp);
}

void SignalKernel(at::Tensor& order, const at::Tensor& sig, std::int64_t value, std::int64_t pe,
                  c10::string_view operation, at::IntArrayRef team) {
  CheckOrderToken(order, "signal");
  const SignalOp op = SignalOpOf("signal", operation);
  SignalTensor(sig, value, TargetPe("signal", pe, team), op, CallPath::kCustomOp);
}

void PutSignalKernel(at::Tensor& order, const at::Tensor& dst, const at::Tensor& src,
                     const at::Tensor& sig, std::int64_t value, std::int64_t pe,
                     c10::string_view operation, at::IntArrayRef team) {
  CheckOrderToken(order, "put_signal");
  const SignalOp op = SignalOpOf("put_signal", operation);
  PutSignalTensors(dst, src, sig, value, TargetPe("put_signal", pe, team), op,
                   CallPath::kCustomOp);
}

void WaitSignalKernel(at::Tensor& order, at::Tensor& sig, at::TensorList guarded,
                      std::int64_t value, c10::string_view comparison) {
  CheckOrderToken(order, "wait_signal");
  const Comparison chosen = ComparisonOf("wait_signal", comparison);
  RequireSymmetric("wait_signal", "sig", sig);
  RequireSymmetric("wait_signal", "guarded item", guarded);
  WaitSignalTensor(sig, value, chosen, CallPath::kCustomOp);
}

void BarrierKernel(at::Tensor& order, at::TensorList published, at::IntArrayRef team) {
  const TeamHandle on =
      CollectiveEntry("barrier", "barrier", order, "published item", published, team);
  RunCollectiveTensors(CollectiveNamed("barrier"), on, nullptr, nullptr, CallPath::kCustomOp);
}

template <const char* kName>
void ExchangeKernel(at::Tensor& order, at::Tensor& output, const at::Tensor& input,
                    at::IntArrayRef team) {
  const TeamHandle on = CollectiveEntry(kName, kName, order, "output", output, team);
  RunCollectiveTensors(CollectiveNamed(kName), on, &output, &input, CallPath::kCustomOp);
}

void AllToAllKernel(at::Tensor& order, at::Tensor& output, const at::Tensor& input,
                    at::IntArrayRef team, at::OptionalIntArrayRef output_split_sizes,
                    at::OptionalIntArrayRef input_split_sizes) {
  const TeamHandle on = CollectiveEntry(
      "all_to_all", output_split_sizes || input_split_sizes ? "all_to_all_v" : "all_to_all",
      order, "output", output, team);
  const auto as_vector = [](at::OptionalIntArrayRef sizes) -> std::optional<std::vector<std::int64_t>> {
    if (!sizes.has_value()) return std::nullopt;
    return sizes->vec();
  };
  AllToAllTensors(output, input, as_vector(output_split_sizes), as_vector(input_split_sizes), on,
                  CallPath::kCustomOp);
}

at::Tensor AllGatherVKernel(at::Tensor& order, at::Tensor& output, const at::Tensor& input,
                            at::IntArrayRef team) {
  const TeamHandle on =
      CollectiveEntry("all_gather_v", "all_gather_v", order, "output", output, team);
  const std::vector<std::int64_t> rows =
      AllGatherVTensors(output, input, on, CallPath::kCustomOp);
  at::Tensor counts = at::empty({static_cast<std::int64_t>(rows.size())},
                                at::TensorOptions().dtype(at::kLong));
  for (std::size_t i = 0; i < rows.size(); ++i) counts.mutable_data_ptr<std::int64_t>()[i] = rows[i];
  return counts;
}

void BroadcastKernel(at::Tensor& order, at::Tensor& output, const at::Tensor& input,
                     std::int64_t root, at::IntArrayRef team) {
  const TeamHandle on = CollectiveEntry("broadcast", "broadcast", order, "output", output, team);
  RunCollectiveTensors(CollectiveNamed("broadcast"), on, &output, &input, CallPath::kCustomOp,
                       {root, 0, 0});
}

template <const char* kName>
void ReductionKernel(at::Tensor& order, at::Tensor& output, const at::Tensor& input,
                     c10::string_view op, at::IntArrayRef team) {
  const TeamHandle on = CollectiveEntry(kName, kName, order, "output", output, team);
  const std::int64_t code = Refusable(kName, on, [&] { return ReduceOpCode(kName, op); });
  RunCollectiveTensors(CollectiveNamed(kName), on, &output, &input, CallPath::kCustomOp,
                       {code, 0, 0});
}

const AtomicOp& AtomicOpOf(c10::string_view name) {
  const AtomicOp* op = AtomicOpNamed(name);
  if (op == nullptr) {
    ThrowValueError("atomic", "op", "one of fetch, set, swap, compare_swap, add, and, or, xor",
                    "'" + std::string(name) + "'");
  }
  return *op;
}

void AtomicKernel(at::Tensor& order, at::Tensor& dest, c10::string_view op,
                  const c10::Scalar& value, const c10::Scalar& cond, std::int64_t pe,
                  at::IntArrayRef team) {
  CheckOrderToken(order, "atomic");
  RequireSymmetric("atomic", "dest", dest);
  (void)AtomicTensor(dest, AtomicOpOf(op), value, cond, TargetPe("atomic", pe, team),
                     /*fetch=*/false, CallPath::kCustomOp);
}

at::Tensor AtomicFetchKernel(at::Tensor& order, at::Tensor& dest, c10::string_view op,
                             const c10::Scalar& value, const c10::Scalar& cond, std::int64_t pe,
                             at::IntArrayRef team) {
  CheckOrderToken(order, "atomic_fetch");
  RequireSymmetric("atomic_fetch", "dest", dest);
  return AtomicTensor(dest, AtomicOpOf(op), value, cond, TargetPe("atomic_fetch", pe, team),
                      /*fetch=*/true, CallPath::kCustomOp);
}

void FenceKernel(at::Tensor& order) {
  CheckOrderToken(order, "fence");
  OrderingCall(/*quiet=*/false, CallPath::kCustomOp);
}

void QuietKernel(at::Tensor& order) {
  CheckOrderToken(order, "quiet");
  OrderingCall(/*quiet=*/true, CallPath::kCustomOp);
}

void PutNbiKernel(at::Tensor& order, const at::Tensor& dst, const at::Tensor& src,
                  std::int64_t pe, at::IntArrayRef team) {
  CheckOrderToken(order, "put_nbi");
  PutTensors(dst, src, TargetPe("put_nbi", pe, team), CallPath::kCustomOp, /*nbi=*/true);
}

void GetNbiKernel(at::Tensor& order, at::Tensor& dst, const at::Tensor& src, std::int64_t pe,
                  at::IntArrayRef team) {
  CheckOrderToken(order, "get_nbi");
  GetTensors(dst, src, TargetPe("get_nbi", pe, team), CallPath::kCustomOp, /*nbi=*/true);
}

at::Tensor WaitSignalsKernel(at::Tensor& order, at::Tensor& signals, at::TensorList guarded,
                             std::int64_t value, c10::string_view comparison,
                             c10::string_view wait, c10::List<bool> mask) {
  CheckOrderToken(order, "wait_signals");
  const Comparison chosen = ComparisonOf("wait_signals", comparison);
  const WaitSet* set = WaitSetNamed(wait);
  if (set == nullptr) {
    ThrowValueError("wait_signals", "wait", "one of any, all, some", "'" + std::string(wait) + "'");
  }
  RequireSymmetric("wait_signals", "signals", signals);
  RequireSymmetric("wait_signals", "guarded item", guarded);
  std::vector<std::uint8_t> flags;
  flags.reserve(mask.size());
  for (const bool flag : mask) flags.push_back(flag ? 1 : 0);
  return WaitSignalsTensor(signals, value, chosen, *set, std::move(flags), CallPath::kCustomOp);
}

at::Tensor TestSignalKernel(at::Tensor& order, const at::Tensor& sig, std::int64_t value,
                            c10::string_view comparison) {
  CheckOrderToken(order, "test_signal");
  const Comparison chosen = ComparisonOf("test_signal", comparison);
  at::Tensor answer = at::empty({}, at::TensorOptions().dtype(at::kBool));
  *answer.mutable_data_ptr<bool>() = TestSignalTensor(sig, value, chosen, CallPath::kCustomOp);
  return answer;
}

constexpr char kAllGather[] = "all_gather";
constexpr char kAllReduce[] = "all_reduce";
constexpr char kReduceScatter[] = "reduce_scatter";

// Defines the op of `schema`, with `tags`, and registers `kernel` for it under the CPU and CUDA
// keys: the same kernel for the host heap's CPU tensors and a CUDA backend's device tensors
// (the CPU token with a CUDA operand dispatches to CUDA).
template <typename Kernel>
void Define(torch::Library& m, const std::vector<at::Tag>& tags, const char* schema,
            Kernel kernel) {
  m.def(schema, tags);
  const std::string name(schema, std::strchr(schema, '('));
  m.impl(name.c_str(), torch::dispatch(c10::DispatchKey::CPU, kernel));
  m.impl(name.c_str(), torch::dispatch(c10::DispatchKey::CUDA, kernel));
}

}  // namespace

TORCH_LIBRARY(hps, m) {
  const std::vector<at::Tag> ordered = {at::Tag::pt2_compliant_tag};
  // The collectives agree with the other PEs on the host before anything is enqueued: a CUDA
  // graph cannot capture them, so inductor's graph partitioning splits around them.
  const std::vector<at::Tag> host_blocking = {at::Tag::pt2_compliant_tag,
                                              at::Tag::cudagraph_unsafe};
  Define(m, ordered, "put(Tensor(t!) order, Tensor dst, Tensor src, int pe, int[] team=[]) -> ()",
         &PutKernel);
  Define(m, ordered,
         "get(Tensor(t!) order, Tensor(a!) dst, Tensor src, int pe, int[] team=[]) -> ()",
         &GetKernel);
  Define(m, ordered,
         "signal(Tensor(t!) order, Tensor sig, int value, int pe, str operation=\"set\", "
         "int[] team=[]) -> ()",
         &SignalKernel);
  Define(m, ordered,
         "put_signal(Tensor(t!) order, Tensor dst, Tensor src, Tensor sig, int value, int pe, "
         "str operation=\"set\", int[] team=[]) -> ()",
         &PutSignalKernel);
  Define(m, ordered,
         "wait_signal(Tensor(t!) order, Tensor(a!) sig, Tensor(b!)[] guarded, int value, "
         "str comparison=\"eq\") -> ()",
         &WaitSignalKernel);
  // Atomics, ordering, non-blocking RMA and the waits on several words (docs/atomics.md). An
  // atomic declares dest written wherever it goes (conservative: no read of it moves across).
  Define(m, ordered,
         "atomic(Tensor(t!) order, Tensor(a!) dest, str op, Scalar value, Scalar cond, int pe, "
         "int[] team=[]) -> ()",
         &AtomicKernel);
  Define(m, ordered,
         "atomic_fetch(Tensor(t!) order, Tensor(a!) dest, str op, Scalar value, Scalar cond, "
         "int pe, int[] team=[]) -> Tensor",
         &AtomicFetchKernel);
  Define(m, ordered, "fence(Tensor(t!) order) -> ()", &FenceKernel);
  Define(m, ordered, "quiet(Tensor(t!) order) -> ()", &QuietKernel);
  Define(m, ordered,
         "put_nbi(Tensor(t!) order, Tensor dst, Tensor src, int pe, int[] team=[]) -> ()",
         &PutNbiKernel);
  Define(m, ordered,
         "get_nbi(Tensor(t!) order, Tensor(a!) dst, Tensor src, int pe, int[] team=[]) -> ()",
         &GetNbiKernel);
  Define(m, ordered,
         "wait_signals(Tensor(t!) order, Tensor(a!) signals, Tensor(b!)[] guarded, int value, "
         "str comparison, str wait, bool[] mask) -> Tensor",
         &WaitSignalsKernel);
  Define(m, ordered,
         "test_signal(Tensor(t!) order, Tensor sig, int value, str comparison) -> Tensor",
         &TestSignalKernel);
  Define(m, host_blocking, "barrier(Tensor(t!) order, Tensor(b!)[] published, int[] team=[]) -> ()",
         &BarrierKernel);
  Define(m, host_blocking,
         "all_gather(Tensor(t!) order, Tensor(a!) output, Tensor input, int[] team=[]) -> ()",
         &ExchangeKernel<kAllGather>);
  Define(m, host_blocking,
         "all_to_all(Tensor(t!) order, Tensor(a!) output, Tensor input, int[] team=[], "
         "int[]? output_split_sizes=None, int[]? input_split_sizes=None) -> ()",
         &AllToAllKernel);
  Define(m, host_blocking,
         "all_gather_v(Tensor(t!) order, Tensor(a!) output, Tensor input, int[] team=[]) -> "
         "Tensor",
         &AllGatherVKernel);
  Define(m, host_blocking,
         "broadcast(Tensor(t!) order, Tensor(a!) output, Tensor input, int root, "
         "int[] team=[]) -> ()",
         &BroadcastKernel);
  Define(m, host_blocking,
         "all_reduce(Tensor(t!) order, Tensor(a!) output, Tensor input, str op=\"sum\", "
         "int[] team=[]) -> ()",
         &ReductionKernel<kAllReduce>);
  Define(m, host_blocking,
         "reduce_scatter(Tensor(t!) order, Tensor(a!) output, Tensor input, str op=\"sum\", "
         "int[] team=[]) -> ()",
         &ReductionKernel<kReduceScatter>);
}

void RegisterOps(py::module_& m) {
  m.def("order_token", &OrderToken,
        "The live lifecycle's order token, which every torch.ops.hps op takes first.");
}

}  // namespace hyper_parallel::shmem::binding
