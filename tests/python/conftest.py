"""Fixtures of the system tests: cached PE pools by size, replaced when a test dirties them."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from pe_pool import PePool  # noqa: E402

# The CANN backend over the fake vendor library (scripts/test.sh runs a part of the suite so).
ON_CANN = os.environ.get("HYPER_PARALLEL_SHMEM_BACKEND") == "cann"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "host_only(reason): tests the host backend's own behaviour (its streams, "
        "wait policy or messages); skipped when the suite runs on the CANN backend")
    config.addinivalue_line(
        "markers", "cann_fake: also run on the CANN backend over the fake vendor library "
        "(scripts/test.sh selects them with -m cann_fake)")


def pytest_collection_modifyitems(config, items):
    if not ON_CANN:
        return
    for item in items:
        marker = item.get_closest_marker("host_only")
        if marker is not None:
            item.add_marker(pytest.mark.skip(reason="host backend only: " + marker.args[0]))


class PoolCache:
    def __init__(self) -> None:
        self._pools: dict = {}

    def __call__(self, size: int) -> PePool:
        pool = self._pools.get(size)
        if pool is None or not pool.clean:
            if pool is not None:
                pool.kill()
            pool = PePool(size)
            self._pools[size] = pool
        return pool

    def discard(self, size: int) -> None:
        pool = self._pools.pop(size, None)
        if pool is not None:
            pool.kill()

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()


@pytest.fixture(scope="session")
def pes():
    """pes(n) -> a PePool of n PEs, shared across tests while it stays clean."""
    cache = PoolCache()
    yield cache
    cache.close()
