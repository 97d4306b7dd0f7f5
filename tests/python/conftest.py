"""Fixtures of the system tests: cached PE pools by size, replaced when a test dirties them."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from pe_pool import PePool  # noqa: E402


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
