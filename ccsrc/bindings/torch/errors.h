// Native errors on their way to Python. A failed Status is thrown as a NativeError and raised
// as one of the package's ShmemError classes, which the factory shmem/errors.py registers with
// set_error_factory picks by the error code (docs/api.md, "Errors and logs"): a bad argument
// (INVALID_ARGUMENT, USE_AFTER_FREE, DOUBLE_FREE, STALE_LIFECYCLE) is a ShmemValueError, also
// a ValueError; an argument of the wrong type (ThrowTypeError) a ShmemTypeError, also a
// TypeError; anything else a plain ShmemError (a RuntimeError). Before the factory is
// registered: TypeError or RuntimeError. Both the throw and the translator live in the
// binding's shared library, so an error thrown under any module linking it (a consumer's
// module too) is translated alike; the translator is registered once, by the generic module.
//
// Argument mistakes are INVALID_ARGUMENT in the contract shape, at (operation, validate), like
// every other native error; the conversions in arguments.h raise them.
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
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

/// INVALID_ARGUMENT in the contract shape at (`operation`, validate) for an argument of the
/// wrong type ('value must be an int, but got str'): raised as ShmemTypeError, noted as Throw
/// notes.
[[noreturn]] HPS_BINDING_API void ThrowTypeError(std::string_view operation, std::string_view what,
                                                 std::string_view rule, std::string_view got);

/// INVALID_ARGUMENT in the contract shape at (`operation`, validate) for an argument of the
/// right type and a wrong value: raised as ShmemValueError (Throw(Contract(...)), which cannot
/// return).
[[noreturn]] HPS_BINDING_API void ThrowValueError(std::string_view operation,
                                                  std::string_view what, std::string_view rule,
                                                  std::string_view got);

/// What a failure in flight says, as a Status: a NativeError's own, else INVALID_ARGUMENT with
/// the exception's text (a TypeError / ValueError of an argument).
HPS_BINDING_API Status ReasonOf(std::exception_ptr error);

/// Throws a failed `status`; an ok one returns.
HPS_BINDING_API void Check(Status status);

/// INVALID_ARGUMENT in the contract shape, at (`operation`, validate).
HPS_BINDING_API Status Contract(std::string_view operation, std::string_view what,
                                std::string_view rule, std::string_view got);

/// The contract message shape: '<what> must be <rule>, but got <got>'.
HPS_BINDING_API std::string ContractText(std::string_view what, std::string_view rule,
                                         std::string_view got);

}  // namespace hyper_parallel::shmem::binding
