"""signal / wait_signal: set and add, every comparison, and every rejection."""

from __future__ import annotations

import os

import pytest
import torch

from helpers import device, expect_shmem_error, state_without_failure
from hyper_parallel.core.multicore import shmem

pytestmark = pytest.mark.cann_fake  # also run on the CANN fake (scripts/test.sh)


def _set_add_every_comparison(rank, size, dtype):
    with shmem.acquire_shmem():
        sig = shmem.empty(1, dtype=dtype)
        sig.zero_()
        data = shmem.empty(256, dtype=torch.float32)
        shmem.barrier()
        nxt = (rank + 1) % size
        # Data before signal: the payload is complete once the signal is seen.
        shmem.put(data, torch.full((256,), float(rank), device=device()), nxt)
        shmem.signal(sig, 100 + nxt, nxt)  # operation="set"
        shmem.wait_signal(sig, 100 + rank)
        assert data.eq(float((rank - 1) % size)).all()
        value = 100 + rank
        for comparison, target in (("eq", value), ("ne", value + 1), ("gt", value - 1),
                                   ("ge", value), ("lt", value + 1), ("le", value)):
            shmem.wait_signal(sig, target, comparison=comparison)
        shmem.barrier()
        for pe in range(size):
            shmem.signal(sig, rank + 1, pe, operation="add")
        total = value + size * (size + 1) // 2
        shmem.wait_signal(sig, total, comparison="ge")
        shmem.barrier()
        observed = int(sig.item())
        shmem.barrier()  # the previous PE overwrites it next
        assert observed == total, (observed, total)
        # Waits that block until the value moves down.
        shmem.signal(sig, -7, nxt)
        shmem.wait_signal(sig, 0, comparison="lt")
        shmem.wait_signal(sig, -7, comparison="le")
        shmem.barrier()
        shmem.free(data)
        shmem.free(sig)
    return True


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("size", [2, 4, 8])
def test_set_add_and_every_comparison(pes, size, dtype):
    assert all(pes(size).run(_set_add_every_comparison, dtype))


def _put_signal(rank, size):
    with shmem.acquire_shmem():
        data = shmem.empty(4096, dtype=torch.int32)
        counter = shmem.empty(1, dtype=torch.int64)
        counter.zero_()
        shmem.barrier()
        nxt, prv = (rank + 1) % size, (rank - 1) % size
        for tile in range(1, 6):
            # Producer: write the tile and raise the consumer's counter in one call.
            shmem.put_signal(data, torch.full((4096,), tile * 100 + rank, dtype=torch.int32,
                                              device=device()),
                             counter, 1, nxt, operation="add")
            shmem.wait_signal(counter, tile, comparison="ge")
            assert data.eq(tile * 100 + prv).all(), f"tile {tile} complete when its signal is"
            shmem.barrier()
        with pytest.raises(ValueError, match="operation must be one of set, add"):
            shmem.put_signal(data, torch.zeros(4096, dtype=torch.int32, device=device()),
                             counter, 1, nxt, operation="xor")
        expect_shmem_error("INVALID_ARGUMENT", shmem.put_signal, data,
                           torch.zeros(8, dtype=torch.int32, device=device()), counter, 1, nxt)
        shmem.free(counter)
        shmem.free(data)
    return True


@pytest.mark.parametrize("size", [2, 4])
def test_put_signal_orders_data_before_the_signal(pes, size):
    assert all(pes(size).run(_put_signal))


def _rejections(rank, size):
    with shmem.acquire_shmem():
        sig32 = shmem.empty(1, dtype=torch.int32)
        sig64 = shmem.empty(1, dtype=torch.int64)
        wide = shmem.empty(2, dtype=torch.int64)
        floats = shmem.empty(1, dtype=torch.float32)
        before = state_without_failure()
        with pytest.raises(shmem.ShmemValueError, match="sig dtype must be torch.int32 or torch.int64, but got torch.float32"):
            shmem.signal(floats, 1, 0)
        with pytest.raises(shmem.ShmemValueError, match="sig dtype must be torch.int32 or torch.int64"):
            shmem.wait_signal(floats, 1)
        with pytest.raises(shmem.ShmemValueError, match="sig must be a one-element tensor, but got 2 elements"):
            shmem.signal(wide, 1, 0)
        with pytest.raises(shmem.ShmemValueError, match="sig must be a one-element tensor"):
            shmem.wait_signal(wide, 1)
        with pytest.raises(shmem.ShmemValueError, match="operation must be one of set, add, but got 'inc'"):
            shmem.signal(sig64, 1, 0, operation="inc")
        with pytest.raises(shmem.ShmemValueError, match="comparison must be one of eq, ne, gt, ge, lt, le, but got 'gte'"):
            shmem.wait_signal(sig64, 1, comparison="gte")
        with pytest.raises(shmem.ShmemTypeError, match="comparison must be a str, but got int"):
            shmem.wait_signal(sig64, 1, comparison=3)
        with pytest.raises(shmem.ShmemValueError, match="value must be representable as int64"):
            shmem.signal(sig64, 1 << 63, 0)
        with pytest.raises(shmem.ShmemTypeError, match="value must be an int, but got float"):
            shmem.signal(sig64, 1.0, 0)
        with pytest.raises(shmem.ShmemTypeError, match="value must be an int, but got bool"):
            shmem.wait_signal(sig64, True)
        with pytest.raises(shmem.ShmemTypeError, match="pe must be an int, but got bool"):
            shmem.signal(sig64, 1, False)
        error = expect_shmem_error("INVALID_ARGUMENT", shmem.signal, sig32, 1 << 31, 0)
        assert "signal value must be representable as int32, but got 2147483648" in str(error)
        expect_shmem_error("INVALID_ARGUMENT", shmem.wait_signal, sig32, -(1 << 31) - 1)
        error = expect_shmem_error("INVALID_ARGUMENT", shmem.signal, sig64, 1, size)
        assert f"pe must be in [0, {size}), but got {size}" in str(error)
        error = expect_shmem_error("INVALID_ARGUMENT", shmem.signal,
                                   torch.zeros(1, dtype=torch.int64, device=device()), 1, 0)
        assert "sig must be a symmetric tensor from shmem.empty" in str(error)
        assert state_without_failure() == before
        for t in (sig32, sig64, wide, floats):
            shmem.free(t)
    return True


def test_signal_rejections(pes):
    assert all(pes(2).run(_rejections))


def _timeout(rank, size):
    os.environ["HYPER_PARALLEL_SHMEM_TIMEOUT_SEC"] = "1"
    with shmem.acquire_shmem():
        sig = shmem.empty(1, dtype=torch.int64)
        sig.fill_(3)
        error = expect_shmem_error("TIMEOUT", shmem.wait_signal, sig, 4, comparison="ge")
        message = str(error)
        assert error.operation == "wait_signal" and error.phase == "execute"
        assert f"wait_signal timed out: pe={rank}, address={hex(shmem.debug_state()['live_allocations'][0]['base'])}" in message, message
        assert "comparison=ge, expected=4, observed=3, timeout_ms=1000" in message, message
        assert shmem.debug_state()["state"] == "ready", "a wait_signal timeout is local"
        shmem.barrier()  # still usable
        shmem.free(sig)
    return True


@pytest.mark.host_only("an NPU stream's wait fails at synchronisation, without these fields")
def test_wait_signal_timeout_names_pe_address_and_values(pes):
    assert all(pes(2).run(_timeout))
