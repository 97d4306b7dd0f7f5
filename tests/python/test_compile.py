"""The primitives under torch.compile (docs/compile.md): the custom ops' schemas and tags,
opcheck, compiled functions against eager on every PE (inductor and the eager backend), program
order from inductor's code and from the runtime's record, reads after a wait, aot_eager's
copies refused, the profiler, and bad input under compile as in eager.

The PEs of this file share one pool (its warm-up: imports, inductor's first compile) and one
inductor cache of their own, made for this session, so no graph cached by an earlier build
(with other schemas) is reused; both PEs compile the same kernels and share them there.
"""

from __future__ import annotations

import re
import shutil
import tempfile

import pytest
import torch

from helpers import expect_shmem_error
from hyper_parallel.core.multicore import shmem
from hyper_parallel.core.multicore.shmem import _ops
from pe_pool import PePool

OPS = ("put", "get", "signal", "put_signal", "wait_signal", "barrier", "all_gather", "all_to_all")
HOST_BLOCKING = ("barrier", "all_gather", "all_to_all")


@pytest.fixture(scope="module")
def pool():
    cache = tempfile.mkdtemp(prefix="hps-inductor-")
    pes = PePool(2, env={"TORCHINDUCTOR_CACHE_DIR": cache})
    yield pes
    pes.close()
    shutil.rmtree(cache, ignore_errors=True)


def _run(pool: PePool, fn, *args):
    # Compiling on two PEs that share two cores takes a while: a bound against hangs only.
    return pool.run(fn, *args, timeout=300)


def _hps_calls(code: list) -> list:
    """The custom ops inductor's generated code calls, in its order."""
    return re.findall(r"torch\.ops\.hps\.(\w+)\.default\(", "\n".join(code))


def _recorded_since(mark: int) -> list:
    """(op, path) of the runtime's record after sequence `mark`."""
    return [(row["op"], row["path"]) for row in shmem.debug_state()["recent_ops"]
            if row["sequence"] > mark]


def _mark() -> int:
    rows = shmem.debug_state()["recent_ops"]
    return rows[-1]["sequence"] if rows else 0


# ---- schemas, tags, registrations (no PE needed) ------------------------------------------

def test_schemas_tags_and_keys():
    for name in OPS:
        overload = getattr(torch.ops.hps, name).default
        schema = str(overload._schema)
        assert schema.startswith(f"hps::{name}(Tensor(t!) order, "), schema
        assert schema.endswith("-> ()"), schema
        assert torch.Tag.pt2_compliant_tag in overload.tags, name
        assert (torch.Tag.cudagraph_unsafe in overload.tags) == (name in HOST_BLOCKING), name
        qualified = f"hps::{name}"
        for key in ("CPU", "CUDA"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key), (name, key)
        # A kernel under a composite or catch-all key would run while tracing.
        for key in ("CompositeImplicitAutograd", "CompositeExplicitAutograd", "Meta"):
            assert not torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key), (name, key)
        assert "catchall" not in torch._C._dispatch_dump(qualified).lower(), name
    declared = {name: str(getattr(torch.ops.hps, name).default._schema) for name in OPS}
    assert "Tensor(a!) dst" in declared["get"]
    assert "Tensor(a!) sig, Tensor(b!)[] guarded" in declared["wait_signal"]
    assert "Tensor(b!)[] published" in declared["barrier"]
    assert "Tensor(a!) output" in declared["all_gather"]
    assert "Tensor(a!) output" in declared["all_to_all"]
    assert "str operation=\"set\"" in declared["signal"]
    assert "str comparison=\"eq\"" in declared["wait_signal"]


def test_order_token_outside_a_lifecycle():
    expect_shmem_error("INVALID_STATE", _ops.order_token)


# ---- opcheck and the profiler, eager op calls --------------------------------------------

_CHECKS = ("test_schema", "test_autograd_registration", "test_faketensor",
           "test_aot_dispatch_dynamic")


def _shmem_cause(error: BaseException):
    while error is not None and not isinstance(error, shmem.ShmemError):
        error = error.__cause__ or error.__context__
    return error


def _opcheck_every_op(rank, size):
    from torch.library import opcheck
    from torch.testing._internal.optests.generate_tests import safe_fake_check, safe_schema_check

    with shmem.acquire_shmem():
        token = _ops.order_token()
        data = shmem.empty(4, dtype=torch.float32)
        data.copy_(torch.arange(4.0) + rank)
        sig = shmem.empty(1, dtype=torch.int64)
        sig.fill_(5)
        gathered = shmem.empty(4 * size, dtype=torch.float32)
        exchanged = shmem.empty(4 * size, dtype=torch.float32)
        shmem.barrier()
        # Puts to this PE itself of what is already there, and signals of the value there;
        # collectives are called alike on every PE.
        same = data.clone()
        cases = [
            (torch.ops.hps.put.default, (token, data, same, rank)),
            (torch.ops.hps.put.default, (token, data, same, rank, [-1])),  # the node team
            (torch.ops.hps.get.default, (token, torch.empty(4), data, rank)),
            (torch.ops.hps.signal.default, (token, sig, 5, rank, "set")),
            (torch.ops.hps.put_signal.default, (token, data, same, sig, 5, rank, "set")),
            (torch.ops.hps.wait_signal.default, (token, sig, [data], 5, "eq")),
            (torch.ops.hps.barrier.default, (token, [data])),
            (torch.ops.hps.all_gather.default, (token, gathered, data)),
            (torch.ops.hps.all_to_all.default, (token, exchanged, torch.arange(4.0 * size))),
        ]
        with torch.profiler.profile() as profile:
            opcheck(torch.ops.hps.barrier.default, (token, []))  # no tensor but the token
            for op, args in cases:
                # The schema and fake checks on the tensors themselves (opcheck's own copies
                # them): the declared writes cover the kernel's, and no fake is needed.
                safe_schema_check(op, args, {}, copy_inputs=False)
                safe_fake_check(op, args, {}, copy_inputs=False)
                opcheck(op, args, test_utils="test_autograd_registration")
                # opcheck runs the other checks on copies of every tensor: the op refuses
                # them (a copy is outside the symmetric heap), never waits on or writes one.
                for check in _CHECKS[:1] + _CHECKS[2:]:
                    with pytest.raises(Exception) as caught:
                        opcheck(op, args, test_utils=check)
                    refusal = _shmem_cause(caught.value)
                    assert refusal is not None, (op, check, caught.value)
                    assert refusal.error_code == "INVALID_ARGUMENT", refusal
                    assert "outside the symmetric heap" in str(refusal), refusal
        profiled = {event.name for event in profile.events() if event.name.startswith("hps::")}
        assert profiled == {f"hps::{name}" for name in OPS}, profiled
        assert int(sig.item()) == 5
        shmem.barrier()
        for tensor in (exchanged, gathered, sig, data):
            shmem.free(tensor)
    return True


def test_opcheck_every_op_and_the_profiler(pool):
    """opcheck's checks pass on the tensors themselves; where opcheck hands an op copies of
    symmetric tensors, the op refuses them."""
    assert all(_run(pool, _opcheck_every_op))


# ---- compiled against eager ---------------------------------------------------------------

EXPECTED = ["put", "barrier", "all_gather", "all_to_all", "get", "put_signal", "wait_signal",
            "barrier", "all_gather", "barrier"]


def _mixed(rank, size):
    """A step mixing every kind of primitive with compute; with its buffers."""
    n = 4
    box = shmem.empty(size, n, dtype=torch.float32)
    gathered = shmem.empty(size * n, dtype=torch.float32)
    exchanged = shmem.empty(size * n, dtype=torch.float32)
    inbox = shmem.empty(n, dtype=torch.float32)
    by_team = shmem.empty(size * n, dtype=torch.float32)
    sig = shmem.empty(1, dtype=torch.int64)
    team = shmem.team_split_strided(shmem.TEAM_WORLD, 0, 1, size)  # a made team: its code
    nxt, prev = (rank + 1) % size, (rank - 1) % size
    buffers = (box, gathered, exchanged, inbox, by_team, sig)

    def step(x):
        y = torch.sin(x) * 2 + rank
        shmem.put(box[rank], y, nxt)
        shmem.barrier(published=[box])
        z = box.sum(0) + 1  # read after the barrier: PE prev's y
        shmem.all_gather(gathered, z)
        shmem.all_to_all(exchanged, gathered * 3)
        fetched = torch.empty(size * n)
        shmem.get(fetched, exchanged, prev)
        shmem.put_signal(inbox, fetched[:n] + z, sig, 1, nxt)
        shmem.wait_signal(sig, 1, guarded=[inbox])
        w = inbox * 2  # read after the wait: what PE prev put
        shmem.barrier(team=team)
        shmem.all_gather(by_team, w, team=team)
        shmem.barrier(published=[by_team])
        return z, gathered.clone(), exchanged.clone(), fetched, w, by_team.clone()

    return step, buffers, team


def _reset(buffers) -> None:
    shmem.barrier()
    for tensor in buffers:
        tensor.zero_()
    shmem.barrier()


def _compiled_equals_eager(rank, size, backend, reorder):
    import torch._inductor.config as inductor_config
    from torch._inductor.utils import run_and_get_code

    with shmem.acquire_shmem():
        step, buffers, team = _mixed(rank, size)
        x = torch.linspace(-1.0, 1.0, 4) * (rank + 1)
        _reset(buffers)
        mark = _mark()
        expected = step(x)
        assert _recorded_since(mark) == [(op, "function") for op in EXPECTED]
        _reset(buffers)
        torch._dynamo.reset()
        compiled = torch.compile(step, fullgraph=True, backend=backend)
        mark = _mark()
        code = None
        with inductor_config.patch(reorder_for_peak_memory=reorder), \
                torch.profiler.profile() as profile:
            if backend == "inductor":
                got, code = run_and_get_code(compiled, x)
            else:
                got = compiled(x)
        recorded = _recorded_since(mark)
        profiled = [e.name for e in profile.events() if e.name.startswith("hps::")]
        for mine, theirs in zip(got, expected):
            torch.testing.assert_close(mine, theirs, rtol=1e-6, atol=1e-6)
        assert recorded == [(op, "custom_op") for op in EXPECTED], recorded
        assert sorted(set(profiled)) == sorted({f"hps::{op}" for op in EXPECTED}), profiled
        if code is not None:
            assert _hps_calls(code) == EXPECTED, _hps_calls(code)
        shmem.barrier()
        team.destroy()
        for tensor in buffers:
            shmem.free(tensor)
    return True


@pytest.mark.parametrize("backend, reorder", [("eager", True), ("inductor", True),
                                              ("inductor", False)],
                         ids=["eager", "inductor", "inductor-no-peak-memory-reorder"])
def test_compiled_equals_eager_in_program_order(pool, backend, reorder):
    # reorder_for_peak_memory moved effectful ops on torch 2.13 unless they share a mutated
    # token: both settings must keep program order.
    assert all(_run(pool, _compiled_equals_eager, backend, reorder))


def _no_graph_breaks(rank, size):
    with shmem.acquire_shmem():
        step, buffers, team = _mixed(rank, size)
        _reset(buffers)
        torch._dynamo.reset()
        explained = torch._dynamo.explain(step)(torch.ones(4))
        shmem.barrier()
        team.destroy()
        for tensor in buffers:
            shmem.free(tensor)
    return explained.graph_break_count, explained.graph_count


def test_no_graph_breaks(pool):
    assert _run(pool, _no_graph_breaks) == [(0, 1), (0, 1)]


# ---- a read after a wait sees the arrived data ---------------------------------------------

def _read_after_wait(rank, size):
    from torch._inductor.utils import run_and_get_code

    with shmem.acquire_shmem():
        data = shmem.empty(8, dtype=torch.float32)
        seen = shmem.empty(1, dtype=torch.float32)
        go = shmem.empty(1, dtype=torch.int64)
        sig = shmem.empty(1, dtype=torch.int64)
        for tensor in (data, seen, go, sig):
            tensor.zero_()
        shmem.barrier()

        def receiver(x):
            before = data.sum()  # nothing has come yet: PE 1 waits for what follows
            shmem.put_signal(seen, before.reshape(1), go, 1, 1)
            shmem.wait_signal(sig, 1, guarded=[data])
            after = data.sum()
            return before, after + x.sum()

        def sender(x):
            shmem.wait_signal(go, 1, guarded=[seen])
            shmem.put_signal(data, torch.arange(8.0) + x, sig, 1, 0)
            return seen.clone()

        torch._dynamo.reset()
        fn = torch.compile(receiver if rank == 0 else sender, fullgraph=True)
        result, code = run_and_get_code(fn, torch.zeros(8) if rank else torch.zeros(1))
        # Read now: on torch 2.13 inductor may hand back `seen.clone()` as `seen` itself
        # (docs/compile.md, What is not supported).
        values = tuple(float(value) for value in result)
        shmem.barrier()
        for tensor in (sig, go, seen, data):
            shmem.free(tensor)
    calls = _hps_calls(code)
    if rank == 0:
        assert calls == ["put_signal", "wait_signal"], calls
        return values
    assert calls == ["wait_signal", "put_signal"], calls
    return values[0]


def test_a_read_after_a_wait_sees_the_arrived_data(pool):
    receiver, sender = _run(pool, _read_after_wait)
    assert receiver == (0.0, 28.0)  # before: nothing; after: 0 + 1 + ... + 7
    assert sender == 0.0  # what the receiver read before it let the sender go


# ---- aot_eager hands the ops copies: refused --------------------------------------------

def _aot_eager_copies_refused(rank, size):
    with shmem.acquire_shmem():
        data = shmem.empty(4, dtype=torch.float32)
        data.zero_()
        sig = shmem.empty(1, dtype=torch.int64)
        sig.zero_()
        gathered = shmem.empty(4 * size, dtype=torch.float32)
        shmem.barrier()

        def put_then_barrier(x):  # writes nothing local but the token's copy: it runs
            shmem.put(data, x + 1, rank)
            shmem.barrier()
            return x

        def wait(x):
            shmem.wait_signal(sig, 0, guarded=[data])  # would return at once on sig itself
            return data.sum() + x

        def gather(x):
            shmem.all_gather(gathered, x)
            return gathered.sum()

        torch._dynamo.reset()
        torch.compile(put_then_barrier, fullgraph=True, backend="aot_eager")(torch.ones(4))
        assert data.tolist() == [2.0] * 4
        for fn in (wait, gather):
            error = expect_shmem_error(
                "INVALID_ARGUMENT", torch.compile(fn, fullgraph=True, backend="aot_eager"),
                torch.ones(4))
            assert "outside the symmetric heap" in str(error) and "itself" in str(error)
        assert _recorded_since(0)[-2:] == [("put", "custom_op"), ("barrier", "custom_op")]
        shmem.barrier()
        for tensor in (gathered, sig, data):
            shmem.free(tensor)
    return True


def test_aot_eager_copies_are_refused(pool):
    assert all(_run(pool, _aot_eager_copies_refused))


# ---- bad input, under compile as in eager ---------------------------------------------------

def _bad_input(rank, size):
    import torch.distributed as dist

    barrier_op = torch.ops.hps.barrier.default

    def barrier_with(token):
        barrier_op(token, [])

    # A stale token: kept across shutdown and init.
    with shmem.acquire_shmem():
        stale = _ops.order_token()
        old = shmem.empty(4, dtype=torch.float32)
        old.zero_()
        shmem.barrier()
        shmem.free(old)
    with shmem.acquire_shmem():
        # The token the compiled function was called with belongs to an earlier lifecycle.
        expect_shmem_error("STALE_LIFECYCLE", barrier_with, stale)
        torch._dynamo.reset()
        compiled = torch.compile(barrier_with, fullgraph=True, backend="inductor")
        expect_shmem_error("STALE_LIFECYCLE", compiled, stale)
        compiled(_ops.order_token())  # the live one: a barrier

        # A tensor of a closed lifecycle.
        def put_old(x):
            shmem.put(old, x, rank)

        eager_error = expect_shmem_error("STALE_LIFECYCLE", put_old, torch.ones(4))
        compiled_error = expect_shmem_error(
            "STALE_LIFECYCLE", torch.compile(put_old, fullgraph=True, backend="eager"),
            torch.ones(4))
        assert str(eager_error).split("phase=")[1] == str(compiled_error).split("phase=")[1]

        # A team this PE is not in: PE 1's one-PE team, used on PE 0.
        solo = shmem.team_split_strided(shmem.TEAM_WORLD, 1, 1, 1)
        codes = [None, None]
        dist.all_gather_object(codes, None if solo is None else list(solo._code))
        if rank == 0:
            def barrier_on(x):
                barrier_op(_ops.order_token(), [], codes[1])
                return x

            eager_error = expect_shmem_error("INVALID_ARGUMENT", barrier_on, torch.ones(1))
            error = expect_shmem_error(
                "INVALID_ARGUMENT", torch.compile(barrier_on, fullgraph=True, backend="eager"),
                torch.ones(1))
            assert "a team this PE is in" in str(error), error
            assert str(error) == str(eager_error)
        else:
            solo.destroy()

        # Allocation inside a compiled function: refused with the reason under fullgraph;
        # otherwise a graph break, and the allocation runs in eager mode.
        def allocates(x):
            tensor = shmem.empty(4)
            tensor.fill_(2.0)
            y = tensor + x
            shmem.free(tensor)
            return y

        torch._dynamo.reset()
        with pytest.raises(torch._dynamo.exc.Unsupported, match="collective allocations"):
            torch.compile(allocates, fullgraph=True, backend="eager")(torch.ones(4))
        torch._dynamo.reset()
        assert torch.compile(allocates, backend="eager")(torch.ones(4)).tolist() == [3.0] * 4
        shmem.barrier()
        compiled_token = torch.compile(lambda: barrier_op(_ops.order_token(), []),
                                       fullgraph=True, backend="eager")
        compiled_token()  # compiled in this lifecycle
    # Outside any lifecycle: the ops refuse, compiled as called directly.
    expect_shmem_error("INVALID_STATE", compiled_token)
    expect_shmem_error("INVALID_STATE", barrier_with, stale)
    return True


def test_bad_input_under_compile_as_in_eager(pool):
    assert all(_run(pool, _bad_input))
