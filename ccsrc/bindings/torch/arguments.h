// Python arguments to native values. A mistake raises INVALID_ARGUMENT in the contract shape
// at (operation, validate) (errors.h), here, before anything native runs: ShmemTypeError for an
// argument of the wrong type, ShmemValueError for a wrong value (docs/api.md, "Errors and
// logs"); what the protection chain decides raises the Runtime's code. Checking in C++ keeps a
// call from Python to one crossing (the Python wrappers only pass arguments through).
//
// The entries take such arguments as py::handle and convert them here, in the order their
// checks must run: a pybind signature's casters name no argument in their errors and accept a
// bool as an int. A tensor still goes through torch's pybind caster (TensorArg). Arguments
// whose mistakes pybind may report itself (a str, a list of ints, a dtype, an optional stream)
// are typed in the entry's signature.
//
// Each conversion takes the operation the user called, for the error's operation= field. The
// overloads without one name no operation (operation= is empty); they serve callers not yet
// converted.
#pragma once

#include <ATen/core/Tensor.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "bindings/torch/export.h"

namespace hyper_parallel::shmem::binding {

/// The name of `value`'s type, for a message.
HPS_BINDING_API std::string TypeName(pybind11::handle value);

/// A torch.Tensor, else ShmemTypeError naming `name`, at `operation`.
HPS_BINDING_API at::Tensor TensorArg(std::string_view operation, std::string_view name,
                                     pybind11::handle value);

/// An int (not a bool), else ShmemTypeError; `in_range` false when it does not fit int64.
HPS_BINDING_API std::int64_t IntArg(std::string_view operation, std::string_view name,
                                    pybind11::handle value, bool* in_range);

/// A signal value: an int (ShmemTypeError) representable as int64 (ShmemValueError).
HPS_BINDING_API std::int64_t ValueArg(std::string_view operation, pybind11::handle value);

/// A PE: an int; one outside every PE range is the Runtime's INVALID_ARGUMENT, like -1.
HPS_BINDING_API int PeArg(std::string_view operation, pybind11::handle value,
                           std::string_view name = "pe");

/// One of `choices` (joined by ", " in the message): a str (ShmemTypeError) among them
/// (ShmemValueError).
HPS_BINDING_API std::string ChoiceArg(std::string_view operation, std::string_view name,
                                      pybind11::handle value,
                                      std::initializer_list<std::string_view> choices);

/// A signal operand: a tensor (ShmemTypeError) of dtype int32 or int64 with one element
/// (ShmemValueError); its symmetry is checked natively.
HPS_BINDING_API at::Tensor SignalArg(std::string_view operation, pybind11::handle value);

}  // namespace hyper_parallel::shmem::binding
