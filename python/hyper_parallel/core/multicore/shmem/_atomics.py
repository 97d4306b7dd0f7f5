"""Atomics, ordering, non-blocking RMA and waits on several signals (docs/atomics.md).

Each function passes its arguments to the native module, which checks them in C++ (dtype,
one element, symmetric, the value's range, the mask's length): INVALID_ARGUMENT, raised as
ShmemTypeError for an argument of the wrong type and ShmemValueError otherwise (docs/api.md,
"Errors and logs"). Under
torch.compile each calls its custom op (torch.ops.hps.<op>.default) with the order token
first: the fetching atomics return their 0-dim tensor there too, and wait_signal_any /
wait_signal_some / test_signal return tensors (docs/compile.md): an int64 0-dim index, a 1-D
bool tensor of the words that satisfy, a 0-dim bool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from . import _ops
from ._api import current_stream
from ._runtime import native, type_error, value_error

if TYPE_CHECKING:
    from ._teams import Team

_compiling = torch.compiler.is_compiling
_hps = torch.ops.hps


def _atomic(op: str, dest, value, cond, pe, team, fetch: bool):
    if _compiling():
        if fetch:
            return _hps.atomic_fetch.default(_ops.order_token(), dest, op, value, cond, pe,
                                             _ops.team_code(team))
        _hps.atomic.default(_ops.order_token(), dest, op, value, cond, pe, _ops.team_code(team))
        return None
    return native.atomic(op, dest, value, cond, pe, team, fetch)


# ---- atomics: dest is a one-element symmetric tensor; pe a PE (of team, with team=) --------

def atomic_fetch(dest: torch.Tensor, pe: int, *, team: Team | None = None) -> torch.Tensor:
    """The value of dest on PE pe, read atomically, as a 0-dim tensor of dest's dtype."""
    return _atomic("fetch", dest, 0, 0, pe, team, True)


def atomic_set(dest: torch.Tensor, value, pe: int, *, team: Team | None = None) -> None:
    """Writes value into dest on PE pe atomically."""
    _atomic("set", dest, value, 0, pe, team, False)


def atomic_swap(dest: torch.Tensor, value, pe: int, *, team: Team | None = None) -> torch.Tensor:
    """Writes value into dest on PE pe and returns the old value."""
    return _atomic("swap", dest, value, 0, pe, team, True)


def atomic_compare_swap(dest: torch.Tensor, cond, value, pe: int, *,
                        team: Team | None = None) -> torch.Tensor:
    """Writes value into dest on PE pe where it holds cond; returns the old value either way."""
    return _atomic("compare_swap", dest, value, cond, pe, team, True)


def atomic_fetch_add(dest: torch.Tensor, value, pe: int, *,
                     team: Team | None = None) -> torch.Tensor:
    """Adds value to dest on PE pe (wrapping around, as C's integers) and returns the old
    value."""
    return _atomic("add", dest, value, 0, pe, team, True)


def atomic_add(dest: torch.Tensor, value, pe: int, *, team: Team | None = None) -> None:
    """Adds value to dest on PE pe."""
    _atomic("add", dest, value, 0, pe, team, False)


def atomic_fetch_inc(dest: torch.Tensor, pe: int, *, team: Team | None = None) -> torch.Tensor:
    """Adds 1 to dest on PE pe and returns the old value."""
    return _atomic("add", dest, 1, 0, pe, team, True)


def atomic_inc(dest: torch.Tensor, pe: int, *, team: Team | None = None) -> None:
    """Adds 1 to dest on PE pe."""
    _atomic("add", dest, 1, 0, pe, team, False)


def atomic_fetch_and(dest: torch.Tensor, value, pe: int, *,
                     team: Team | None = None) -> torch.Tensor:
    """dest &= value on PE pe; returns the old value."""
    return _atomic("and", dest, value, 0, pe, team, True)


def atomic_fetch_or(dest: torch.Tensor, value, pe: int, *,
                    team: Team | None = None) -> torch.Tensor:
    """dest |= value on PE pe; returns the old value."""
    return _atomic("or", dest, value, 0, pe, team, True)


def atomic_fetch_xor(dest: torch.Tensor, value, pe: int, *,
                     team: Team | None = None) -> torch.Tensor:
    """dest ^= value on PE pe; returns the old value."""
    return _atomic("xor", dest, value, 0, pe, team, True)


def atomic_and(dest: torch.Tensor, value, pe: int, *, team: Team | None = None) -> None:
    """dest &= value on PE pe."""
    _atomic("and", dest, value, 0, pe, team, False)


def atomic_or(dest: torch.Tensor, value, pe: int, *, team: Team | None = None) -> None:
    """dest |= value on PE pe."""
    _atomic("or", dest, value, 0, pe, team, False)


def atomic_xor(dest: torch.Tensor, value, pe: int, *, team: Team | None = None) -> None:
    """dest ^= value on PE pe."""
    _atomic("xor", dest, value, 0, pe, team, False)


# ---- ordering and non-blocking RMA ----------------------------------------------------------

def fence() -> None:
    """On the current stream: this PE's later puts, signals and atomics to a PE land after its
    earlier ones to that PE."""
    if _compiling():
        _hps.fence.default(_ops.order_token())
        return
    native.fence()


def quiet() -> None:
    """On the current stream: everything this PE issued before (put_nbi and get_nbi included)
    is complete and visible at its target."""
    if _compiling():
        _hps.quiet.default(_ops.order_token())
        return
    native.quiet()


def put_nbi(dst: torch.Tensor, src: torch.Tensor, pe: int, *, team: Team | None = None) -> None:
    """put that may return before the copy completed: quiet(), a collective or a stream
    synchronisation completes it. src must not change and dst on pe not be read before then
    (the runtime keeps src alive: a temporary is fine)."""
    if _compiling():
        _hps.put_nbi.default(_ops.order_token(), dst, src, pe, _ops.team_code(team))
        return
    native.put_nbi(dst, src, pe, team)


def get_nbi(dst: torch.Tensor, src: torch.Tensor, pe: int, *, team: Team | None = None) -> None:
    """get that may return before the copy completed: dst holds the data after quiet(), a
    collective or a stream synchronisation."""
    if _compiling():
        _hps.get_nbi.default(_ops.order_token(), dst, src, pe, _ops.team_code(team))
        return
    native.get_nbi(dst, src, pe, team)


# ---- waits on several signals -----------------------------------------------------------------

def _mask(operation: str, mask) -> list:
    if mask is None:
        return []
    if isinstance(mask, torch.Tensor):
        # A tensor of another dtype is a value mistake, as every dtype mistake is.
        if mask.dtype != torch.bool:
            raise value_error(operation, "mask dtype", "torch.bool", mask.dtype)
        flags = [bool(x) for x in mask.reshape(-1).tolist()]
    elif isinstance(mask, (list, tuple)):
        flags = []
        for item in mask:
            if not isinstance(item, (bool, int)):
                raise type_error(operation, "mask item", "a bool", type(item).__name__)
            flags.append(bool(item))
    else:
        raise type_error(operation, "mask", "None, a bool tensor or a sequence of bools",
                         type(mask).__name__)
    # Its length, and a True for any and some, are the Runtime's to check (INVALID_ARGUMENT).
    return flags


def _wait(signals, value, comparison, mask, wait: str, guarded=()):
    flags = _mask("wait_signal_" + wait, mask)
    if _compiling():
        return _hps.wait_signals.default(_ops.order_token(), signals, list(guarded), value,
                                         comparison, wait, flags)
    satisfied = native.wait_signals(signals, value, comparison, wait, flags)
    stream = current_stream()
    if not stream.is_default:
        stream.synchronize()  # the answer is written in stream order
    return satisfied


def wait_signal_any(signals: torch.Tensor, value: int, *, comparison: str = "ge",
                    mask=None, guarded: "list | tuple" = ()):
    """Waits until one of the taking-part words of the 1-D symmetric int32/int64 signals
    compares true against value; returns the least such index (under torch.compile, as an
    int64 0-dim tensor). mask: None (every word) or one bool per word. Bounded by the
    timeout."""
    satisfied = _wait(signals, value, comparison, mask, "any", guarded)
    if _compiling():
        return torch.argmax(satisfied.to(torch.int64))
    return int(torch.argmax(satisfied.to(torch.int64)).item())


def wait_signal_all(signals: torch.Tensor, value: int, *, comparison: str = "ge",
                    mask=None, guarded: "list | tuple" = ()) -> None:
    """Waits until every taking-part word of signals compares true against value."""
    _wait(signals, value, comparison, mask, "all", guarded)


def wait_signal_some(signals: torch.Tensor, value: int, *, comparison: str = "ge",
                     mask=None, guarded: "list | tuple" = ()):
    """Waits until at least one taking-part word compares true; returns every index that
    does at that moment, ascending (under torch.compile, the 1-D bool tensor of them)."""
    satisfied = _wait(signals, value, comparison, mask, "some", guarded)
    if _compiling():
        return satisfied
    return [int(i) for i in satisfied.nonzero().reshape(-1).tolist()]


def test_signal(signal: torch.Tensor, value: int, *, comparison: str = "ge"):
    """Whether the one-element local signal compares true against value now; never waits
    (under torch.compile, a 0-dim bool tensor)."""
    if _compiling():
        return _hps.test_signal.default(_ops.order_token(), signal, value, comparison)
    return native.test_signal(signal, value, comparison)


@torch.library.register_fake("hps::atomic_fetch")
def _atomic_fetch_fake(order, dest, op, value, cond, pe, team=()):
    return dest.new_empty(())


@torch.library.register_fake("hps::wait_signals")
def _wait_signals_fake(order, signals, guarded, value, comparison, wait, mask):
    return signals.new_empty(signals.shape, dtype=torch.bool)


@torch.library.register_fake("hps::test_signal")
def _test_signal_fake(order, sig, value, comparison):
    return sig.new_empty((), dtype=torch.bool)
