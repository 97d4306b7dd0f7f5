"""The native module, and native errors raised as errors.ShmemError.

Importing torch first matters: the native module links against torch's libraries and finds
them already loaded.
"""

from __future__ import annotations

import torch  # noqa: F401  (loads libtorch before the extension)

from . import hyper_parallel_shmem_torch as native
from .errors import ERROR_PREFIX, ShmemError, assertion, contract  # noqa: F401

native.set_error_class(ShmemError)
