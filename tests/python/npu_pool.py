"""PE pools on the fake NPU device (tests/fake_npu: a stand-in torch_npu over the fake ACL
runtime) for the test_npu*.py files: the CANN backend over the fake vendor library, with an
environment of their own, so those files run in the ordinary test run.

A module fixture yields from pools(): it builds the fake device's extension once (not in every
PE), then hands out pools by size and fake generation, replacing a pool a test dirtied. A PE
body starts with pe_pool.use_fake_npu(rank), which imports torch_npu and makes NPU
rank % device count current.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pe_pool import FAKE_NPU, PePool

REPO = Path(__file__).resolve().parents[2]
FAKE_DIR = REPO / "build" / "backends" / "cann" / "fake_cann"
GENERATIONS = {"v1.5": "libhps_fake_cann_v1_5.so", "v1.0": "libhps_fake_cann_v1_0.so"}


def library(generation: str = "v1.5") -> Path:
    return FAKE_DIR / GENERATIONS[generation]


def environment(generation: str = "v1.5") -> dict:
    """The variables of a pool on the fake NPU device over fake CANN `generation`."""
    path = os.pathsep.join(p for p in (FAKE_NPU, os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path, "HYPER_PARALLEL_SHMEM_BACKEND": "cann",
            "HYPER_PARALLEL_SHMEM_CANN_LIBRARY": str(library(generation)),
            "HYPER_PARALLEL_SHMEM_ACL_LIBRARY": str(library(generation)),
            "HYPER_PARALLEL_SHMEM_HEAP_SIZE": str(64 << 20)}


def pools():
    """Yields get(n, generation="v1.5") -> a PePool of n PEs on the fake NPU device."""
    if not library().is_file():
        pytest.skip(f"the fake CANN library is not built ({library()}): "
                    "bash scripts/test.sh builds it")
    env = dict(os.environ, **environment())
    built = subprocess.run([sys.executable, "-c", "import torch_npu"], env=env,
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-4000:]
    made: dict = {}

    def get(size: int, generation: str = "v1.5") -> PePool:
        key = (size, generation)
        pool = made.get(key)
        if pool is None or not pool.clean:
            if pool is not None:
                pool.kill()
            pool = made[key] = PePool(size, env=environment(generation))
        return pool

    yield get
    for pool in made.values():
        pool.close()
