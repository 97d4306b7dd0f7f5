// The primitives on converted operands, shared by the two ways in: the Python functions of the
// generic module (native.put, ...: primitives.cc, atomics.cc, collectives.cc) and the torch
// custom ops (ops.cc, torch.ops.hps.put, ...). Each resolves its operands through the
// protection chain (heap_tensors.h), checks that the two sides of a transfer match, and calls
// the Runtime; a refusal raises ShmemError; what completed is noted in the recent-operations
// record (op_record.h) with the way it came in. None touches the GIL: the Python functions
// release it around the calls that may wait, and torch's dispatcher has released it before a
// custom op's kernel runs. Includes ATen's Tensor, not torch's Python headers.
#pragma once

#include <ATen/core/Tensor.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "bindings/torch/op_record.h"
#include "data_plane/collective.h"
#include "runtime/runtime.h"

namespace hyper_parallel::shmem::binding {

/// Copies local `src` into symmetric `dst` on world PE `pe`, on the current stream (`nbi`: the
/// non-blocking form, put_nbi).
void PutTensors(const at::Tensor& dst, const at::Tensor& src, int pe, CallPath path,
                bool nbi = false);
/// Copies symmetric `src` on world PE `pe` into local `dst`, on the current stream (`nbi`:
/// get_nbi).
void GetTensors(const at::Tensor& dst, const at::Tensor& src, int pe, CallPath path,
                bool nbi = false);
/// Sets or adds `value` to the symmetric one-element signal `sig` on world PE `pe`.
void SignalTensor(const at::Tensor& sig, std::int64_t value, int pe, SignalOp op,
                  CallPath path);
/// PutTensors then SignalTensor, as one call.
void PutSignalTensors(const at::Tensor& dst, const at::Tensor& src, const at::Tensor& sig,
                      std::int64_t value, int pe, SignalOp op, CallPath path);
/// Waits until the local `sig` compares true against `value`.
void WaitSignalTensor(const at::Tensor& sig, std::int64_t value, Comparison comparison,
                      CallPath path);
/// `op` on the one-element symmetric `dest` of world PE `pe` (atomics.cc; docs/atomics.md):
/// `value` and `compare` must fit dest's dtype. Returns the old value as a 0-dim tensor of
/// dest's dtype, filled in stream order, when `fetch`; else an undefined tensor.
at::Tensor AtomicTensor(const at::Tensor& dest, AtomicOp op, const c10::Scalar& value,
                        const c10::Scalar& compare, int pe, bool fetch, CallPath path);
/// fence (`quiet` false) or quiet on the current stream.
void OrderingCall(bool quiet, CallPath path);
/// Waits on the local 1-D int32/int64 symmetric `signals` (docs/atomics.md); returns a bool
/// tensor of their length, filled in stream order: which taking-part words satisfy.
at::Tensor WaitSignalsTensor(const at::Tensor& signals, std::int64_t value, Comparison comparison,
                             WaitSet set, std::vector<std::uint8_t> mask, CallPath path);
/// Whether the local one-element `sig` compares true against `value` now.
bool TestSignalTensor(const at::Tensor& sig, std::int64_t value, Comparison comparison,
                      CallPath path);
/// A signal tensor's word: int32 or int64, else INVALID_ARGUMENT naming `<name> dtype`.
SignalWidth Width(std::string_view operation, const at::Tensor& signal,
                  std::string_view name = "sig");
/// The world PE a Python `pe` argument names: itself without a team (None), else the team's
/// PE `pe`.
int TargetPe(std::string_view operation, pybind11::handle pe_arg, pybind11::handle team);
/// A Python comparison argument ("eq" ... "le"), else ValueError naming the choices.
Comparison ComparisonArg(std::string_view operation, pybind11::handle value);
/// "fetch" ... "xor" and "any" / "all" / "some" as the Runtime's enums; null when unknown.
const AtomicOp* AtomicOpNamed(std::string_view name);
const WaitSet* WaitSetNamed(std::string_view name);

// The collectives (collectives.cc).

/// Publishes this PE's refusal of a collective of kind `kind` over `team` on the current
/// stream (Runtime::RefuseCollective), for the failure `error` (a ShmemError's status, or the
/// text of a TypeError / ValueError). Takes and releases the GIL as it needs; never throws.
void RefuseInPlace(std::string_view kind, const TeamHandle& team, std::exception_ptr error);
/// The same for a failure the caller states: `why`.
void RefuseWith(std::string_view kind, const TeamHandle& team, const Status& why);

/// Runs `checks` (a collective entry's conversions and checks, before its Runtime call) and
/// returns what it returns. A failure there is refused in the call's place first
/// (RefuseInPlace), then propagates as it was thrown: the PEs stay in step whichever of them
/// refused (docs/architecture.md, "A refused call keeps its place").
template <typename Checks>
auto Refusable(std::string_view kind, const TeamHandle& team, Checks&& checks)
    -> decltype(checks()) {
  try {
    return checks();
  } catch (...) {
    RefuseInPlace(kind, team, std::current_exception());
    throw;
  }
}

/// Runs `collective` over `team` (kWorldTeam: the Root WORLD): with no operands when both are
/// null (barrier), else with a symmetric output and a local input of the same dtype, and the
/// collective's integer arguments (a broadcast's root, a reduction's operator).
void RunCollectiveTensors(const data_plane::Collective& collective, const TeamHandle& team,
                          const at::Tensor* output, const at::Tensor* input, CallPath path,
                          const data_plane::CollectiveArguments& arguments = {});

/// all_gather_v over `team`: every PE's rows of dim 0 packed in PE order in `output`; returns
/// every PE's row count (on a queued stream, after waiting for the call to run).
std::vector<std::int64_t> AllGatherVTensors(const at::Tensor& output, const at::Tensor& input,
                                            const TeamHandle& team, CallPath path);

/// all_to_all over `team`, with split sizes in rows of dim 0 where either is given (the other
/// then splits its tensor equally), as torch's all_to_all_single.
void AllToAllTensors(const at::Tensor& output, const at::Tensor& input,
                     const std::optional<std::vector<std::int64_t>>& output_split_sizes,
                     const std::optional<std::vector<std::int64_t>>& input_split_sizes,
                     const TeamHandle& team, CallPath path);

/// A reduction's operator by name ("sum", "prod", "min", "max", "and", "or", "xor") as the
/// number its collective takes; INVALID_ARGUMENT naming `operation`'s op otherwise.
std::int64_t ReduceOpCode(std::string_view operation, std::string_view name);

/// The collective unit called `name` (ops/collectives.h); INVALID_ARGUMENT naming this build's
/// collectives when there is none.
const data_plane::Collective& CollectiveNamed(std::string_view name);

/// The value `name` stands for in `table` (a name and a value a row); null when it names none.
template <typename Value, std::size_t N>
const Value* Named(const std::pair<std::string_view, Value> (&table)[N], std::string_view name) {
  for (const auto& [known, value] : table) {
    if (name == known) return &value;
  }
  return nullptr;
}

/// "set" / "add" and "eq" ... "le" as the Runtime's enums; null when `name` is none of them.
const SignalOp* SignalOpNamed(std::string_view name);
const Comparison* ComparisonNamed(std::string_view name);

}  // namespace hyper_parallel::shmem::binding
