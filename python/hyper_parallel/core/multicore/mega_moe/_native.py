"""MegaMoE's native module: moe_layout, moe_dispatch and moe_combine (ops/mega_moe).

The module links the shmem binding's shared library: the process Runtime, the heap tensors
and the translation of native errors to ShmemError are that library's. So torch is imported
first (the libraries it links are then loaded), and the shmem package next (its native
module registers the translation and the error class).
"""

from __future__ import annotations

import torch  # noqa: F401  (loads libtorch before the extension)

from .. import shmem  # noqa: F401  (the shmem package first: ShmemError, one Runtime)
from . import hyper_parallel_mega_moe_torch as native
