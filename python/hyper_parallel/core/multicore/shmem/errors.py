"""The error type of Hyper-Parallel SHMEM and the two message shapes, for the package and for
layers built on it (mega_moe raises its own errors in the same shape).

Every native failure raises ShmemError, whose text reads ``[HYPER_PARALLEL_SHMEM_ERROR]
error_code=<CODE> operation=<op> phase=<phase> <message>``; the message is either a broken
contract (``contract``: '<what> must be <rule>, but got <value>') or a state assertion
(``assertion``: '<fact>: key=value, ...'). docs/api.md, Errors and logs, lists the codes.
"""

from __future__ import annotations

ERROR_PREFIX = "[HYPER_PARALLEL_SHMEM_ERROR]"


class ShmemError(RuntimeError):
    """A native error of Hyper-Parallel SHMEM.

    The text reads ``[HYPER_PARALLEL_SHMEM_ERROR] error_code=<CODE> operation=<op>
    phase=<phase> <message>``; the three fields are also attributes.
    """

    def __init__(self, text: str, error_code: str, operation: str, phase: str) -> None:
        super().__init__(text)
        self.error_code = error_code
        self.operation = operation
        self.phase = phase

    @classmethod
    def make(cls, error_code: str, operation: str, phase: str, message: str) -> "ShmemError":
        """Builds an error raised by the Python layer in the native error's shape."""
        text = (
            f"{ERROR_PREFIX} error_code={error_code} operation={operation} "
            f"phase={phase} {message}"
        )
        return cls(text, error_code, operation, phase)


def contract(what: str, rule: str, got: object) -> str:
    """The broken-contract message shape: '<what> must be <rule>, but got <value>'."""
    return f"{what} must be {rule}, but got {got}"


def assertion(fact: str, **fields: object) -> str:
    """The state-assertion message shape: '<fact>: key=value, key=value'."""
    if not fields:
        return fact
    return fact + ": " + ", ".join(f"{key}={value}" for key, value in fields.items())
