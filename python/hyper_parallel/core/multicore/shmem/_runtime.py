"""The native module, and native errors raised as the classes of errors.py; the argument checks
and the with-block exit that several modules of the package share.

Importing torch first matters: the native module links against torch's libraries and finds
them already loaded.
"""

from __future__ import annotations

from typing import Callable

import torch  # noqa: F401  (loads libtorch before the extension)

from . import hyper_parallel_shmem_torch as native
from .errors import (  # noqa: F401
    ERROR_PREFIX,
    ShmemError,
    ShmemTypeError,
    ShmemValueError,
    assertion,
    contract,
    from_native,
    type_error,
    value_error,
)

native.set_error_factory(from_native)


def type_name(value: object) -> str:
    return type(value).__name__


def require_int(operation: str, name: str, value: object) -> int:
    """`value`, or a ShmemTypeError naming `operation`'s argument `name` unless it is an int (a
    bool is not)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise type_error(operation, name, "an int", f"{type_name(value)} {value!r}")
    return value


def end_block(end: Callable[[], None], exc: BaseException | None, what: str) -> None:
    """Leaves a with-block by `end()` (a handle's close, a team's destroy). After an exception
    the block raised, a refused `end()` never hides it: its error is added to the exception as
    a note ("<what> also failed: ...") and the object stays as it was."""
    if exc is None:
        end()
        return
    try:
        end()
    except ShmemError as end_error:
        if hasattr(exc, "add_note"):
            exc.add_note(f"{what} also failed: {end_error}")
