"""Handles, reference counts, root identity and lifecycles."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
import torch.distributed as dist

from helpers import ON_NPU, device, expect_shmem_error
from hyper_parallel.core.multicore import shmem
from hyper_parallel.core.multicore.shmem import _lifecycle
from pe_pool import FAKE_NPU

pytestmark = pytest.mark.cann_fake  # also run on the CANN fake (scripts/test.sh)


def _reference_counts(rank, size):
    first = shmem.acquire_shmem()
    second = shmem.acquire_shmem()
    state = shmem.debug_state()
    assert state["state"] == "ready" and state["reference_count"] == 2
    assert state["root_rank"] == rank and state["root_size"] == size
    assert state["global_ranks"] == list(range(size))
    lifecycle = state["lifecycle"]
    first.close()
    assert first.closed and not second.closed
    state = shmem.debug_state()
    assert state["state"] == "ready" and state["reference_count"] == 1, "non-last close kept it"
    assert state["lifecycle"] == lifecycle
    first.close()  # idempotent: does not release the second handle's reference
    assert shmem.debug_state()["reference_count"] == 1
    second.close()
    assert shmem.debug_state()["state"] == "uninitialized"
    assert shmem.debug_state()["reference_count"] == 0
    second.close()
    return lifecycle


@pytest.mark.parametrize("size", [1, 2, 4, 8])
def test_reference_counts_and_idempotent_close(pes, size):
    lifecycles = pes(size).run(_reference_counts)
    assert len(set(lifecycles)) == 1


def _equivalent_groups_share(rank, size):
    same_members = dist.new_group(ranks=list(range(size)))
    with shmem.acquire_shmem() as world_handle:
        lifecycle = shmem.debug_state()["lifecycle"]
        with shmem.acquire_shmem(same_members) as group_handle:
            state = shmem.debug_state()
            assert state["reference_count"] == 2
            assert state["lifecycle"] == lifecycle, "an equivalent group shares the Runtime"
            t = shmem.empty(4, dtype=torch.int32)
            shmem.free(t)
        assert group_handle.closed and not world_handle.closed
        assert shmem.debug_state()["state"] == "ready"
    assert world_handle.closed
    return True


@pytest.mark.parametrize("size", [2, 4])
def test_equivalent_groups_share_the_runtime(pes, size):
    assert all(pes(size).run(_equivalent_groups_share))


def _subgroup_rejected(rank, size):
    subgroup = dist.new_group(ranks=[0])
    before = shmem.debug_state()
    error = expect_shmem_error("INVALID_ARGUMENT", shmem.acquire_shmem, subgroup)
    assert "root group must be the whole WORLD" in str(error), str(error)
    assert error.operation == "acquire_shmem"
    assert shmem.debug_state() == before
    # The process stays usable.
    with shmem.acquire_shmem():
        shmem.barrier()
    return True


@pytest.mark.parametrize("call", ["my_pe", "n_pes", "backend_info", "empty"])
def test_a_call_before_acquire_names_itself_in_its_error(call):
    # In this (the test runner's) process no lifecycle is open.
    assert shmem.debug_state()["state"] == "uninitialized"
    body = {"my_pe": shmem.my_pe, "n_pes": shmem.n_pes, "backend_info": shmem.backend_info,
            "empty": lambda: shmem.empty(4)}[call]
    with pytest.raises(shmem.ShmemError) as caught:
        body()
    error = caught.value
    assert error.error_code == "INVALID_STATE", str(error)
    assert (error.operation, error.phase) == (call, "state"), str(error)
    assert f"operation={call} phase=state runtime is not initialised" in str(error), str(error)


def test_root_not_covering_world_is_rejected(pes):
    assert all(pes(2).run(_subgroup_rejected))


def test_root_out_of_order_is_rejected():
    with pytest.raises(shmem.ShmemError) as caught:
        _lifecycle.check_root_ranks((1, 0, 2), 3)
    assert "root group ranks must be in global-rank order, but got [1, 0, 2]" in str(caught.value)
    assert caught.value.error_code == "INVALID_ARGUMENT"
    _lifecycle.check_root_ranks((0, 1, 2), 3)  # in order: accepted


def _root_group_type(rank, size):
    with pytest.raises(TypeError, match="root_group must be a torch.distributed ProcessGroup"):
        shmem.acquire_shmem("world")
    return True


def test_root_group_of_wrong_type(pes):
    assert all(pes(2).run(_root_group_type))


def _new_lifecycle_rejects_old_tensors(rank, size):
    with shmem.acquire_shmem():
        first_lifecycle = shmem.debug_state()["lifecycle"]
        old = shmem.empty(8, dtype=torch.int64)
        old_view = old[2:4]
        shmem.free(old)
    with shmem.acquire_shmem():
        state = shmem.debug_state()
        assert state["lifecycle"] == first_lifecycle + 1
        fresh = shmem.empty(8, dtype=torch.int64)
        for stale in (old, old_view):
            expect_shmem_error("STALE_LIFECYCLE", shmem.put, stale, torch.zeros_like(stale), 0)
            expect_shmem_error("STALE_LIFECYCLE", shmem.get, torch.zeros_like(stale), stale, 0)
        expect_shmem_error("STALE_LIFECYCLE", shmem.free, old)
        assert len(shmem.debug_state()["live_allocations"]) == 1, "stale calls changed nothing"
        shmem.put(fresh, torch.full((8,), rank, dtype=torch.int64, device=device()),
                  (rank + 1) % size)
        shmem.barrier()
        assert fresh.tolist() == [(rank - 1) % size] * 8
        shmem.free(fresh)
    return True


@pytest.mark.parametrize("size", [1, 2, 4])
def test_reacquire_after_close_is_a_new_lifecycle(pes, size):
    assert all(pes(size).run(_new_lifecycle_rejects_old_tensors))


def test_without_torch_distributed_a_process_is_a_one_pe_root():
    # On the fake NPU (HPS_TEST_FAKE_NPU=1) the process takes NPU 0 first, as a PE does.
    npu = (f"import sys; sys.path.insert(0, {FAKE_NPU!r}); import torch_npu; "
           "torch.npu.set_device(0)") if ON_NPU else "pass"
    where = "npu:0" if ON_NPU else "cpu"
    script = textwrap.dedent("""
        import torch
        import torch.distributed as dist
        NPU_PRELUDE
        from hyper_parallel.core.multicore import shmem
        assert not dist.is_initialized()
        try:
            shmem.acquire_shmem(object())
        except ValueError as error:
            assert "root_group must be None when torch.distributed is not initialised" in str(error)
        else:
            raise AssertionError("a root group without torch.distributed was accepted")
        with shmem.acquire_shmem():
            state = shmem.debug_state()
            assert state["root_size"] == 1 and state["root_rank"] == 0, state
            t = shmem.empty(3, dtype=torch.float32)
            assert t.device == torch.device("WHERE"), t.device
            shmem.put(t, torch.tensor([1.0, 2.0, 3.0], device="WHERE"), 0)
            shmem.barrier()
            assert t.tolist() == [1.0, 2.0, 3.0]
            shmem.free(t)
            # While it is live, a root with another identity is refused.
            from hyper_parallel.core.multicore.shmem import _lifecycle
            real = _lifecycle._resolve_root
            _lifecycle._resolve_root = lambda group: (
                _lifecycle.RootIdentity((0, 1), "cpu:0"), None, 0, 2)
            try:
                shmem.acquire_shmem()
            except shmem.ShmemError as error:
                assert error.error_code == "INVALID_STATE", error
                assert "a live runtime already serves another root" in str(error), error
            else:
                raise AssertionError("a different root was accepted")
            finally:
                _lifecycle._resolve_root = real
            assert shmem.debug_state()["reference_count"] == 1
        print("one-pe-ok")
    """).replace("NPU_PRELUDE", npu).replace("WHERE", where)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "one-pe-ok" in done.stdout
