"""The error types of Hyper-Parallel SHMEM and the two message shapes, for the package and for
layers built on it (mega_moe raises its own errors in the same shape).

Every error the package raises is a ShmemError, whose text reads ``[HYPER_PARALLEL_SHMEM_ERROR]
error_code=<CODE> operation=<op> phase=<phase> <message>``; the message is either a broken
contract (``contract``: '<what> must be <rule>, but got <value>') or a state assertion
(``assertion``: '<fact>: key=value, ...'). A bad argument is also the built-in a Python user
catches, as numpy's AxisError is both a ValueError and an IndexError:

    ShmemError (RuntimeError)            the call cannot run now (INVALID_STATE, TIMEOUT, ...)
    ShmemValueError (ShmemError, ValueError)
                                         an argument's value (INVALID_ARGUMENT, and an operand
                                         freed or of an earlier lifecycle: USE_AFTER_FREE,
                                         DOUBLE_FREE, STALE_LIFECYCLE)
    ShmemTypeError (ShmemError, TypeError)
                                         an argument of the wrong type (INVALID_ARGUMENT)

docs/api.md, Errors and logs, lists the codes and this mapping.
"""

from __future__ import annotations

ERROR_PREFIX = "[HYPER_PARALLEL_SHMEM_ERROR]"

# The codes of a bad argument: the call names something it cannot take (a value out of its
# contract, an operand already freed or of an earlier lifecycle). Raised as ShmemValueError.
ARGUMENT_CODES = frozenset({"INVALID_ARGUMENT", "USE_AFTER_FREE", "DOUBLE_FREE",
                            "STALE_LIFECYCLE"})


class ShmemError(RuntimeError):
    """An error of Hyper-Parallel SHMEM.

    The text reads ``[HYPER_PARALLEL_SHMEM_ERROR] error_code=<CODE> operation=<op>
    phase=<phase> <message>``; the three fields are also attributes. A bad argument is raised
    as one of the subclasses ShmemValueError and ShmemTypeError.
    """

    def __init__(self, text: str, error_code: str, operation: str, phase: str) -> None:
        super().__init__(text)
        self.error_code = error_code
        self.operation = operation
        self.phase = phase

    @classmethod
    def make(cls, error_code: str, operation: str, phase: str, message: str) -> "ShmemError":
        """Builds an error raised by the Python layer in the native error's shape. Called on
        ShmemError itself, the class is the one the code maps to (error_class); called on a
        subclass, that subclass."""
        text = (
            f"{ERROR_PREFIX} error_code={error_code} operation={operation} "
            f"phase={phase} {message}"
        )
        chosen = error_class(error_code) if cls is ShmemError else cls
        return chosen(text, error_code, operation, phase)


class ShmemValueError(ShmemError, ValueError):
    """A bad argument value: ``except ShmemError`` and ``except ValueError`` both catch it.

    Its code is INVALID_ARGUMENT (a value out of the call's contract: a range, a size, a
    tensor's dtype, shape or device, a non-symmetric operand), or USE_AFTER_FREE, DOUBLE_FREE,
    STALE_LIFECYCLE (an operand freed, or of an earlier lifecycle).
    """


class ShmemTypeError(ShmemError, TypeError):
    """An argument of the wrong type (INVALID_ARGUMENT): ``except ShmemError`` and ``except
    TypeError`` both catch it."""


def error_class(error_code: str, type_mistake: bool = False) -> type:
    """The class an error of `error_code` is raised as: ShmemTypeError for an argument of the
    wrong type, ShmemValueError for the other argument codes (ARGUMENT_CODES), else
    ShmemError."""
    if type_mistake:
        return ShmemTypeError
    return ShmemValueError if error_code in ARGUMENT_CODES else ShmemError


def value_error(operation: str, what: str, rule: str, got: object) -> ShmemValueError:
    """INVALID_ARGUMENT at (`operation`, validate) for an argument of a wrong value, in the
    contract shape: ``raise value_error("empty", "size", "non-negative", -1)``."""
    return ShmemValueError.make("INVALID_ARGUMENT", operation, "validate",
                                contract(what, rule, got))


def type_error(operation: str, what: str, rule: str, got: object) -> ShmemTypeError:
    """INVALID_ARGUMENT at (`operation`, validate) for an argument of the wrong type, in the
    contract shape: ``raise type_error("empty", "dtype", "a torch.dtype or None", "str")``."""
    return ShmemTypeError.make("INVALID_ARGUMENT", operation, "validate",
                               contract(what, rule, got))


def from_native(text: str, error_code: str, operation: str, phase: str,
                type_mistake: bool) -> ShmemError:
    """The exception a native error is raised as (the native module's set_error_factory)."""
    return error_class(error_code, type_mistake)(text, error_code, operation, phase)


def contract(what: str, rule: str, got: object) -> str:
    """The broken-contract message shape: '<what> must be <rule>, but got <value>'."""
    return f"{what} must be {rule}, but got {got}"


def assertion(fact: str, **fields: object) -> str:
    """The state-assertion message shape: '<fact>: key=value, key=value'."""
    if not fields:
        return fact
    return fact + ": " + ", ".join(f"{key}={value}" for key, value in fields.items())
