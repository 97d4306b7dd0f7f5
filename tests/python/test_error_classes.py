"""The error classes (docs/api.md, "Errors and logs"): a bad argument is a ShmemError and the
built-in Python raises for it at once (ShmemTypeError is a TypeError, ShmemValueError a
ValueError), so `except shmem.ShmemError` and `except ValueError` / `except TypeError` both
catch it, whether Python, the binding or the Runtime refused it; an error of state (the call
cannot run now) is a plain ShmemError, neither.
"""

from __future__ import annotations

import pytest
import torch

from hyper_parallel.core.multicore import shmem
from hyper_parallel.core.multicore.shmem import errors, launch

PREFIX = "[HYPER_PARALLEL_SHMEM_ERROR] error_code="


def test_the_classes_are_both_shmem_errors_and_built_ins():
    assert issubclass(shmem.ShmemError, RuntimeError)
    assert issubclass(shmem.ShmemValueError, shmem.ShmemError)
    assert issubclass(shmem.ShmemValueError, ValueError)
    assert issubclass(shmem.ShmemTypeError, shmem.ShmemError)
    assert issubclass(shmem.ShmemTypeError, TypeError)
    assert not issubclass(shmem.ShmemTypeError, ValueError)
    assert not issubclass(shmem.ShmemValueError, TypeError)
    for name in ("ShmemError", "ShmemValueError", "ShmemTypeError"):
        assert name in shmem.__all__ and getattr(errors, name) is getattr(shmem, name)


def test_codes_map_to_classes():
    for code in ("INVALID_ARGUMENT", "USE_AFTER_FREE", "DOUBLE_FREE", "STALE_LIFECYCLE"):
        assert errors.error_class(code) is shmem.ShmemValueError, code
        assert type(shmem.ShmemError.make(code, "put", "validate", "m")) is shmem.ShmemValueError
    assert errors.error_class("INVALID_ARGUMENT", type_mistake=True) is shmem.ShmemTypeError
    for code in ("INVALID_STATE", "INVALID_CONFIG", "DEVICE_MISMATCH", "OUT_OF_MEMORY",
                 "COLLECTIVE_MISMATCH", "UNSUPPORTED_CAPABILITY", "BACKEND_ERROR", "TIMEOUT",
                 "PEER_LOST"):
        assert errors.error_class(code) is shmem.ShmemError, code
        assert type(shmem.ShmemError.make(code, "put", "execute", "m")) is shmem.ShmemError
    # A subclass's make keeps the subclass; the helpers build the contract shape.
    assert type(shmem.ShmemTypeError.make("INVALID_ARGUMENT", "x", "validate", "m")) \
        is shmem.ShmemTypeError
    error = errors.type_error("empty", "dtype", "a torch.dtype or None", "str")
    assert type(error) is shmem.ShmemTypeError
    assert str(error) == (f"{PREFIX}INVALID_ARGUMENT operation=empty phase=validate dtype must "
                          "be a torch.dtype or None, but got str")
    assert (error.error_code, error.operation, error.phase) == ("INVALID_ARGUMENT", "empty",
                                                                "validate")
    assert type(errors.value_error("empty", "size", "non-negative", -1)) is shmem.ShmemValueError


def test_a_launcher_argument_is_a_value_error():
    with pytest.raises(ValueError) as caught:
        launch.run_pes(0, ["true"])
    assert type(caught.value) is shmem.ShmemValueError
    assert "nproc must be at least 1, but got 0" in str(caught.value)


def test_mega_moe_raises_the_same_classes():
    """A layer built on shmem raises shmem's classes (docs/mega_moe.md), operation=mega_moe."""
    from hyper_parallel.core.multicore import mega_moe

    _expect(VALUE, "INVALID_ARGUMENT", "mega_moe", "normalize must be 'top_k' or 'one', but "
            "got 'x'", mega_moe.switch_aux_loss, torch.zeros(4, 2), 1, normalize="x")
    _expect(TYPE, "INVALID_ARGUMENT", "mega_moe", "state_dict must be a dict, but got str",
            mega_moe.from_qwen2_moe, "x")
    # Refused before anything collective: no process group, no runtime needed.
    _expect(VALUE, "INVALID_ARGUMENT", "mega_moe", "hidden_size must be positive, but got 0",
            mega_moe.MegaMoEResources, 0, 2, 1)
    _expect(TYPE, "INVALID_ARGUMENT", "mega_moe", "overlap_combine must be True, False or None",
            mega_moe.MegaMoEResources, 4, 2, 1, overlap_combine="yes")
    # A dtype the layer cannot compute in is a TypeError, as nn.Module.to's own refusal is.
    _expect(TYPE, "INVALID_ARGUMENT", "mega_moe", "dtype must be one of torch.float64",
            mega_moe.MegaMoE, 4, 4, 2, 1, dtype=torch.int32)


def _expect(kind: type, code: str, operation: str | None, text: str, fn, *args, **kwargs):
    """fn raises exactly `kind` with `code` (and `operation` when given), caught both as a
    ShmemError and as the built-in it also is."""
    builtin = {shmem.ShmemTypeError: TypeError, shmem.ShmemValueError: ValueError,
               shmem.ShmemError: shmem.ShmemError}[kind]
    with pytest.raises(builtin) as caught:
        fn(*args, **kwargs)
    error = caught.value
    message = str(error)
    assert type(error) is kind, (type(error), kind, message)
    assert isinstance(error, shmem.ShmemError), message
    if kind is shmem.ShmemError:
        assert not isinstance(error, (ValueError, TypeError)), message
    assert error.error_code == code, message
    assert message.startswith(f"{PREFIX}{code} "), message
    if operation is not None:
        assert error.operation == operation, message
        assert f" operation={operation} " in message, message
    assert text in message, (text, message)
    return error


TYPE, VALUE, STATE = shmem.ShmemTypeError, shmem.ShmemValueError, shmem.ShmemError


def _representative_calls(rank, size):
    _expect(STATE, "INVALID_STATE", "my_pe", "runtime is not initialised", shmem.my_pe)
    _expect(STATE, "INVALID_STATE", "empty", "runtime is not initialised", shmem.empty, 4)
    with shmem.acquire_shmem():
        old = shmem.empty(4)
        shmem.free(old)
    with shmem.acquire_shmem():
        t = shmem.empty(16)
        sig = shmem.empty(1, dtype=torch.int64)
        sigs = shmem.empty(4, dtype=torch.int64)
        word = shmem.empty((), dtype=torch.int64)
        freed = shmem.empty(16)
        for tensor in (t, sig, sigs, word):
            tensor.zero_()
        shmem.free(freed)
        shmem.barrier()
        peer = (rank + 1) % size
        # A type mistake, raised by Python, by the binding and by an atomic's conversion.
        _expect(TYPE, "INVALID_ARGUMENT", "empty", "dtype must be a torch.dtype or None, but "
                "got str", shmem.empty, 4, dtype="float32")
        _expect(TYPE, "INVALID_ARGUMENT", "empty", "alignment must be an int, but got float",
                shmem.empty, 4, alignment=64.0)
        _expect(TYPE, "INVALID_ARGUMENT", None, "pe must be an int, but got float 1.0",
                shmem.put, t, torch.ones(16), 1.0)
        _expect(TYPE, "INVALID_ARGUMENT", None, "dst must be a torch.Tensor, but got int",
                shmem.put, 3, torch.ones(16), peer)
        _expect(TYPE, "INVALID_ARGUMENT", "atomic_set", "value must be an int or a float, but "
                "got str 'x'", shmem.atomic_set, word, "x", peer)
        _expect(TYPE, "INVALID_ARGUMENT", "free", "tensor must be a torch.Tensor, but got "
                "NoneType", shmem.free, None)
        # A value mistake in Python, and the native INVALID_ARGUMENT of the protection chain.
        _expect(VALUE, "INVALID_ARGUMENT", "empty", "size must be non-negative, but got -1",
                shmem.empty, 4, -1)
        _expect(VALUE, "INVALID_ARGUMENT", "put", "pe must be in [0, 2), but got 2",
                shmem.put, t, torch.ones(16), size)
        _expect(VALUE, "INVALID_ARGUMENT", "put", "dst must be a symmetric tensor",
                shmem.put, torch.zeros(16), torch.ones(16), peer)
        # Alignment in empty: not an int, not positive, not a power of two (the Runtime's).
        _expect(VALUE, "INVALID_ARGUMENT", "empty", "alignment must be a positive power of "
                "two, but got 0", shmem.empty, 4, alignment=0)
        _expect(VALUE, "INVALID_ARGUMENT", "empty", "alignment must be a power of two no "
                "greater than 2097152, but got 3", shmem.empty, 4, alignment=3)
        # A mask of the wrong length (the Runtime's), of the wrong type, of the wrong dtype.
        _expect(VALUE, "INVALID_ARGUMENT", None, "mask length must be 4",
                shmem.wait_signal_any, sigs, 0, mask=[True] * 3)
        _expect(VALUE, "INVALID_ARGUMENT", "wait_signal_all", "mask dtype must be torch.bool",
                shmem.wait_signal_all, sigs, 0, mask=torch.ones(4, dtype=torch.int64))
        _expect(TYPE, "INVALID_ARGUMENT", "wait_signal_some", "mask must be None, a bool "
                "tensor or a sequence of bools, but got str", shmem.wait_signal_some, sigs, 0,
                mask="all")
        # A bad dtype is a value mistake wherever it is found.
        _expect(VALUE, "INVALID_ARGUMENT", None, "sig dtype must be torch.int32 or "
                "torch.int64, but got torch.float32", shmem.signal, t[:1], 1, peer)
        _expect(VALUE, "INVALID_ARGUMENT", "atomic_add", "dest dtype must be an integer dtype",
                shmem.atomic_add, t[0], 1, peer)
        _expect(VALUE, "INVALID_ARGUMENT", "wait_signal_any", "signals dtype must be "
                "torch.int32 or torch.int64", shmem.wait_signal_any, t, 0)
        # A comparison string not among the choices, and one that is no string.
        _expect(VALUE, "INVALID_ARGUMENT", None, "comparison must be one of eq, ne, gt, ge, "
                "lt, le, but got 'gte'", shmem.wait_signal, sig, 0, comparison="gte")
        _expect(VALUE, "INVALID_ARGUMENT", "test_signal", "comparison must be one of eq, ne, "
                "gt, ge, lt, le, but got 'gte'", shmem.test_signal, sig, 0, comparison="gte")
        _expect(TYPE, "INVALID_ARGUMENT", "wait_signal_any", "comparison must be a str, but "
                "got int", shmem.wait_signal_any, sigs, 0, comparison=0)
        # A bad team argument: not a Team, a predefined team destroyed, a PE outside the team.
        _expect(TYPE, "INVALID_ARGUMENT", None, "team must be a shmem.Team or None, but got "
                "int", shmem.barrier, 3)
        _expect(TYPE, "INVALID_ARGUMENT", "team_split_strided", "parent must be a shmem.Team "
                "or None, but got int", shmem.team_split_strided, 3, 0, 1, 1)
        _expect(TYPE, "INVALID_ARGUMENT", "team_split_2d", "xrange must be an int, but got "
                "str", shmem.team_split_2d, None, "2")
        _expect(TYPE, "INVALID_ARGUMENT", "translate_pe", "other_team must be a shmem.Team or "
                "None, but got int", shmem.TEAM_WORLD.translate_pe, 0, 3)
        _expect(VALUE, "INVALID_ARGUMENT", "team_destroy", "team must be a team made by a "
                "split", shmem.TEAM_WORLD.destroy)
        _expect(VALUE, "INVALID_ARGUMENT", "put", "pe must be in [0, 2), but got 2",
                shmem.put, t, torch.ones(16), size, team=shmem.TEAM_WORLD)
        # An operand freed, freed twice, of an earlier lifecycle; an export of the heap.
        _expect(VALUE, "USE_AFTER_FREE", "put", "", shmem.put, freed, torch.ones(16), peer)
        _expect(VALUE, "DOUBLE_FREE", "free", "allocation was already freed", shmem.free, freed)
        _expect(VALUE, "STALE_LIFECYCLE", "put", "", shmem.put, old, torch.ones(4), peer)
        _expect(VALUE, "INVALID_ARGUMENT", "numpy", "call .clone() first", t.numpy)
        # Errors of state are plain ShmemErrors, on every PE alike for a collective's.
        _expect(STATE, "OUT_OF_MEMORY", "empty", "symmetric heap exhausted", shmem.empty,
                1 << 40, dtype=torch.uint8)
        _expect(STATE, "COLLECTIVE_MISMATCH", "empty", "collective calls differ across PEs",
                shmem.empty, 16 + (rank == size - 1))
        assert shmem.debug_state()["state"] == "ready"
        shmem.barrier()
        for tensor in (word, sigs, sig, t):
            shmem.free(tensor)
    return True


def test_representative_calls_raise_their_class(pes):
    assert all(pes(2).run(_representative_calls))


def _operations_named(rank, size):
    """operation= names the call the user made (docs/api.md, "Errors and logs")."""
    with shmem.acquire_shmem():
        word = shmem.empty(1, dtype=torch.int64)
        rows = shmem.empty(2 * size, 1)
        with pytest.raises(shmem.ShmemValueError) as caught:
            shmem.atomic_fetch_add(word, 1, size)  # no such PE
        assert caught.value.operation == "atomic_fetch_add", str(caught.value)
        with pytest.raises(shmem.ShmemValueError) as caught:
            shmem.atomic_add(word, 1, size)
        assert caught.value.operation == "atomic_add", str(caught.value)
        s = shmem.Stream()
        with shmem.stream(s):  # every PE refuses alike: they agree, each raises its own
            with pytest.raises(shmem.ShmemError) as caught:
                shmem.all_gather_v(rows, torch.ones(1, 1))
        s.synchronize()
        assert caught.value.operation == "all_gather_v", str(caught.value)
        assert caught.value.error_code == "INVALID_STATE", str(caught.value)
        shmem.free(rows)
        shmem.free(word)
    return True


@pytest.mark.host_only("a queued stream of the host backend's own")
def test_errors_name_the_call_the_user_made(pes):
    assert all(pes(2).run(_operations_named))
