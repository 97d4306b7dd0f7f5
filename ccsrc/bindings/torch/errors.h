// Native errors on their way to Python. A failed Status is thrown as a NativeError and raised
// as the package's ShmemError (the class shmem/_runtime.py registers with set_error_class), or
// as RuntimeError before one is registered. Both the throw and the translator live in the
// binding's shared library, so an error thrown under any module linking it (a consumer's
// module too) is translated alike; the translator is registered once, by the generic module.
//
// Argument mistakes are not Status: the conversions in arguments.h raise TypeError and
// ValueError, in the same contract shape (ContractText).
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <string_view>

#include "base/status.h"
#include "bindings/torch/export.h"

namespace hyper_parallel::shmem::binding {

/// Raises `status` (failed) as ShmemError, after noting it as the Runtime's latest failure
/// (debug_state's latest_failure).
[[noreturn]] HPS_BINDING_API void Throw(Status status);

/// Raises `status` (failed) as ShmemError without noting it: a refusal that is no failure of
/// the Runtime (no streams of the backend's own).
[[noreturn]] HPS_BINDING_API void ThrowUnnoted(Status status);

/// Throws a failed `status`; an ok one returns.
HPS_BINDING_API void Check(Status status);

/// INVALID_ARGUMENT in the contract shape, at (`operation`, validate).
HPS_BINDING_API Status Contract(std::string_view operation, std::string_view what,
                                std::string_view rule, std::string_view got);

/// The contract message shape: '<what> must be <rule>, but got <got>'.
HPS_BINDING_API std::string ContractText(std::string_view what, std::string_view rule,
                                         std::string_view got);

}  // namespace hyper_parallel::shmem::binding
