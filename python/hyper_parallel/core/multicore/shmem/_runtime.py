"""The native module, and native errors raised as the classes of errors.py.

Importing torch first matters: the native module links against torch's libraries and finds
them already loaded.
"""

from __future__ import annotations

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
