"""The public functions.

A bad argument raises INVALID_ARGUMENT in the contract shape, at the function the user called:
a type mistake as ShmemTypeError (also a TypeError), a wrong value as ShmemValueError (also a
ValueError); what the protection chain decides (symmetric operand, live allocation of this
lifecycle, byte range, PE range, alignment) raises ShmemValueError with the native error code
too, and a call that cannot run now a plain ShmemError (docs/api.md, "Errors and logs"). The data-path
functions (put, get, signal, put_signal, wait_signal, and the collectives barrier, all_gather and
all_to_all) pass their arguments straight to the native module, which checks them in C++: one
crossing per call is what keeps the Python path of a ping-pong short. empty and free check
theirs here. `team=` (a shmem.Team, _teams.py) runs a collective over the team and makes a `pe`
a team PE number; None, the default, is the world, with no lookup of its own.

Under torch.compile (docs/compile.md) the data-path functions call the torch custom ops
instead (torch.ops.hps.<op>.default, the overload: the packet would be dropped by inductor),
with the order token first; in eager mode they keep the direct path, which costs a quarter of a
dispatcher call. empty and free allocate collectively and stay outside compiled regions.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import TYPE_CHECKING

import torch

from . import _debug, _ops
from ._runtime import ShmemError, assertion, native, type_error, value_error
from ._runtime import require_int as _require_int, type_name as _type_name

if TYPE_CHECKING:
    from ._teams import Team


def _require_tensor(operation: str, name: str, value: object) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise type_error(operation, name, "a torch.Tensor", _type_name(value))
    return value


_compiling = torch.compiler.is_compiling
_hps = torch.ops.hps


@torch.compiler.disable(reason="shmem.empty and shmem.free are collective allocations of "
                        "symmetric memory, which a compiled function cannot make: call them "
                        "outside the compiled region (docs/compile.md)")
def _refuse_in_compiled_region(operation: str) -> None:
    raise ShmemError.make(
        "INVALID_STATE", operation, "validate",
        assertion(f"{operation} is a collective allocation of symmetric memory, which a "
                  "compiled function cannot make: call it outside the compiled region "
                  "(docs/compile.md)"))


def _outside_compile(operation: str) -> None:
    """empty and free under torch.compile: with fullgraph=True dynamo refuses the call with
    the reason above; otherwise the graph breaks there and the call raises INVALID_STATE."""
    if _compiling():
        _refuse_in_compiled_region(operation)


def _sizes(size: tuple) -> list:
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    sizes = []
    for item in size:
        if isinstance(item, bool) or not isinstance(item, int):
            raise type_error("empty", "size", "a sequence of ints", f"{_type_name(item)} {item!r}")
        if item < 0:
            raise value_error("empty", "size", "non-negative", item)
        sizes.append(item)
    return sizes


def empty(*size, dtype: torch.dtype | None = None, alignment: int | None = None) -> torch.Tensor:
    """Collective: a new uninitialised symmetric tensor on the Runtime's device.

    Every PE must call it with the same size, dtype and alignment, in the same order; PEs that
    disagree all get COLLECTIVE_MISMATCH. alignment is a power of two in bytes (default 64).
    A zero-element tensor is a real allocation (one 64-byte granule) that must be freed too.
    Not inside a compiled function (INVALID_STATE).
    """
    _outside_compile("empty")
    try:
        sizes = _sizes(size)
        if dtype is None:
            dtype = torch.get_default_dtype()
        if not isinstance(dtype, torch.dtype):
            raise type_error("empty", "dtype", "a torch.dtype or None", _type_name(dtype))
        if alignment is None:
            alignment = native.default_alignment()
        alignment = _require_int("empty", "alignment", alignment)
        if alignment <= 0:
            raise value_error("empty", "alignment", "a positive power of two", alignment)
    except ShmemError as error:
        _refuse("empty", None, error)
        raise
    return native.empty(sizes, dtype, alignment, _debug.allocation_note(tuple(sizes), dtype))


def free(tensor: torch.Tensor) -> None:
    """Collective: frees the whole allocation of a tensor from empty() on every PE.

    Afterwards the tensor and every view of it raise on any use, in SHMEM and in plain torch.
    A view, slice or reshape is rejected; a second free raises DOUBLE_FREE. Not inside a
    compiled function (INVALID_STATE).
    """
    _outside_compile("free")
    try:
        tensor = _require_tensor("free", "tensor", tensor)
    except ShmemError as error:
        _refuse("free", None, error)
        raise
    native.free(tensor, _debug.allocation_note(tuple(tensor.shape), tensor.dtype))


def put(dst: torch.Tensor, src: torch.Tensor, pe: int, *, team: Team | None = None) -> None:
    """Copies local src into dst (symmetric) on PE pe, on the current stream. With a team, pe
    is a PE number of that team."""
    native.put(dst, src, pe, team)


def get(dst: torch.Tensor, src: torch.Tensor, pe: int, *, team: Team | None = None) -> None:
    """Copies src (symmetric) on PE pe into local dst, on the current stream. With a team, pe
    is a PE number of that team."""
    native.get(dst, src, pe, team)


def signal(sig: torch.Tensor, value: int, pe: int, *, operation: str = "set",
           team: Team | None = None) -> None:
    """Sets or adds value to the one-element int32/int64 symmetric sig on PE pe, after every
    earlier write of this stream (data before signal). operation is "set" or "add". With a
    team, pe is a PE number of that team."""
    native.signal(sig, value, pe, operation, team)


def put_signal(dst: torch.Tensor, src: torch.Tensor, sig: torch.Tensor, value: int, pe: int, *,
               operation: str = "set", team: Team | None = None) -> None:
    """put(dst, src, pe) then signal(sig, value, pe, operation=...) as one call: the data is
    visible on PE pe before the signal is (what a producer writing a tile and raising its
    consumer's counter needs), for one validation and one enqueue. With a team, pe is a PE
    number of that team."""
    native.put_signal(dst, src, sig, value, pe, operation, team)


def wait_signal(sig: torch.Tensor, value: int, *, comparison: str = "eq",
                guarded: "list | tuple" = ()) -> None:
    """Waits until the local sig compares true against value (eq, ne, gt, ge, lt, le); bounded
    by the timeout.

    guarded: the symmetric tensors the signal announces (what peers put before signalling),
    which the caller reads after the wait. Under torch.compile they must be listed: the op
    then declares them written, so no read of them moves before the wait or reuses a value
    read earlier (docs/compile.md). Ignored in eager mode.
    """
    native.wait_signal(sig, value, comparison)


def barrier(team: Team | None = None, *, published: "list | tuple" = ()) -> None:
    """Collective: afterwards every PE's earlier puts are visible everywhere.

    With a team (a shmem.Team), collective over the team's PEs only: afterwards the earlier
    puts of every team PE are visible on every team PE.

    published: the symmetric tensors peers wrote before the barrier that the caller reads
    after it. Under torch.compile they must be listed, as wait_signal's guarded (docs/
    compile.md). Ignored in eager mode.
    """
    native.collective("barrier", None, None, team)


def all_gather(output: torch.Tensor, input: torch.Tensor,  # noqa: A002 (torch's name)
               team: Team | None = None) -> None:
    """Collective: every PE's input lands in slot root_rank of every PE's output.

    The contract of torch.distributed.all_gather_into_tensor: output is symmetric and
    contiguous with output.numel() == input.numel() * root size and the same dtype; input is
    any contiguous CPU tensor that does not overlap output. When it has completed on the
    stream, the local output holds every input in rank order and input may be reused. Zero
    elements: validated, then nothing.

    With a team, collective over the team's PEs: the group size is the team's, and the output
    holds the team PEs' inputs in team-PE order.
    """
    native.collective("all_gather", output, input, team)


def all_to_all(output: torch.Tensor, input: torch.Tensor,  # noqa: A002 (torch's name)
               output_split_sizes: "list | None" = None,
               input_split_sizes: "list | None" = None, *,
               team: Team | None = None) -> None:
    """Collective: block j of PE i's input lands as block i of PE j's output.

    The contract of torch.distributed.all_to_all_single: output is symmetric and contiguous;
    input is any contiguous tensor of its dtype (and, with split sizes, its shape past dim 0)
    that does not overlap it. Without split sizes both are cut, flattened, into team-size equal
    blocks (OpenSHMEM's alltoallmem). With them, input_split_sizes[j] rows of dim 0 go to PE j
    and output_split_sizes[i] rows come from PE i, packed in PE order; a list not given cuts
    its tensor's rows equally. Sizes that do not match across a pair of PEs (what i sends j is
    not what j expects from i) raise COLLECTIVE_MISMATCH on every PE, naming the pair, before
    any byte moves. team is keyword-only: a Team where a split list goes is refused.
    """
    if output_split_sizes is None and input_split_sizes is None:
        native.collective("all_to_all", output, input, team)
        return
    try:
        if _is_team(output_split_sizes) or _is_team(input_split_sizes):
            # The team meant is most likely the one passed there: the refusal goes to it.
            team = team or next(v for v in (output_split_sizes, input_split_sizes) if _is_team(v))
            raise type_error("all_to_all", "the third and fourth arguments",
                             "output_split_sizes and input_split_sizes (pass the team by "
                             "keyword, team=...)", "a shmem.Team")
        output_splits = _split_list(output_split_sizes)
        input_splits = _split_list(input_split_sizes)
    except ShmemError as error:
        _refuse("all_to_all_v", team, error)
        raise
    native.all_to_all(output, input, output_splits, input_splits, team)


def _refuse(kind: str, team, error: Exception) -> None:
    """Publishes this PE's refusal of a collective of kind `kind` in the call's place, so the
    peers' call fails naming it and the PEs stay in step (docs/architecture.md, "A refused call
    keeps its place"); then the caller raises `error`."""
    text = str(error)
    if isinstance(error, ShmemError):
        text = text.split(f"phase={error.phase} ", 1)[-1]
    try:
        native.refuse_collective(kind, team, text)
    except ShmemError:
        pass  # a team argument that is none: `error` says why


def _is_team(value) -> bool:
    if value is None or isinstance(value, (list, tuple, torch.Tensor)):
        return False
    from ._teams import Team  # here: _teams imports this module
    return isinstance(value, Team)


def _split_list(sizes):
    """A split list as ints (a tensor's elements included), or None."""
    if sizes is None:
        return None
    if isinstance(sizes, torch.Tensor):
        return [int(v) for v in sizes.tolist()]
    try:
        return list(sizes)
    except TypeError:
        raise type_error("all_to_all", "split sizes", "a sequence of ints, a tensor or None",
                         _type_name(sizes)) from None


# ---- the same functions inside a compiled function ----------------------------------------
# What dynamo traces in place of each primitive above (torch._dynamo.substitute_in_graph, same
# signature): the custom op torch.ops.hps.<op>.default with the order token (docs/compile.md).
# Eager calls run the functions above, with no check of their own for compilation (such a
# check cost 0.15 µs per call, half of the eager put's Python cost).

_substitute = torch._dynamo.substitute_in_graph


@_substitute(put)
def _put_compiled(dst: torch.Tensor, src: torch.Tensor, pe: int, *,
                  team: Team | None = None) -> None:
    _hps.put.default(_ops.order_token(), dst, src, pe, _ops.team_code(team))


@_substitute(get)
def _get_compiled(dst: torch.Tensor, src: torch.Tensor, pe: int, *,
                  team: Team | None = None) -> None:
    _hps.get.default(_ops.order_token(), dst, src, pe, _ops.team_code(team))


@_substitute(signal)
def _signal_compiled(sig: torch.Tensor, value: int, pe: int, *, operation: str = "set",
                     team: Team | None = None) -> None:
    _hps.signal.default(_ops.order_token(), sig, value, pe, operation, _ops.team_code(team))


@_substitute(put_signal)
def _put_signal_compiled(dst: torch.Tensor, src: torch.Tensor, sig: torch.Tensor, value: int,
                         pe: int, *, operation: str = "set", team: Team | None = None) -> None:
    _hps.put_signal.default(_ops.order_token(), dst, src, sig, value, pe, operation,
                            _ops.team_code(team))


@_substitute(wait_signal)
def _wait_signal_compiled(sig: torch.Tensor, value: int, *, comparison: str = "eq",
                          guarded: "list | tuple" = ()) -> None:
    _hps.wait_signal.default(_ops.order_token(), sig, list(guarded), value, comparison)


@_substitute(barrier)
def _barrier_compiled(team: Team | None = None, *, published: "list | tuple" = ()) -> None:
    _hps.barrier.default(_ops.order_token(), list(published), _ops.team_code(team))


@_substitute(all_gather)
def _all_gather_compiled(output: torch.Tensor, input: torch.Tensor,  # noqa: A002
                         team: Team | None = None) -> None:
    _hps.all_gather.default(_ops.order_token(), output, input, _ops.team_code(team))


@_substitute(all_to_all)
def _all_to_all_compiled(output: torch.Tensor, input: torch.Tensor,  # noqa: A002
                         output_split_sizes: "list | None" = None,
                         input_split_sizes: "list | None" = None, *,
                         team: Team | None = None) -> None:
    _hps.all_to_all.default(_ops.order_token(), output, input, _ops.team_code(team),
                            _split_list(output_split_sizes), _split_list(input_split_sizes))


# ---- host streams -------------------------------------------------------------------------

_DEFAULT_TIMEOUT_S = 120.0
_streams: "weakref.WeakSet[Stream]" = weakref.WeakSet()
_current = threading.local()


def _timeout_s() -> float:
    """Bound on waiting for a stream or event. Each queued operation is bounded by the
    Runtime's timeout and the first failure makes the rest of the stream skip, so twice that
    plus slack is enough for a stream to drain or fail; it never waits forever."""
    timeout = native.timeout_seconds() if native.state() == "ready" else _DEFAULT_TIMEOUT_S
    return 2 * timeout + 5.0


class Stream:
    """An asynchronous host stream: operations enqueued on it run in order on its own thread.

    Stream(default=True) is not for users; current_stream() returns the default stream, which
    is the calling thread itself (an operation on it has run when the call returns).
    """

    def __init__(self, *, default: bool = False) -> None:
        self._native = None if default else native.Stream()
        if not default:
            _streams.add(self)

    @property
    def is_default(self) -> bool:
        return self._native is None

    def synchronize(self) -> None:
        """Waits until everything queued has run; raises the first failure of queued work."""
        if self._native is not None:
            self._native.synchronize(_timeout_s())

    def query(self) -> bool:
        """True when nothing queued is still pending."""
        return True if self._native is None else self._native.query()

    def __repr__(self) -> str:
        return "Stream(default)" if self._native is None else f"Stream(id={self._native.id})"


_DEFAULT_STREAM = Stream(default=True)


def current_stream() -> Stream:
    """The stream this thread enqueues on."""
    return getattr(_current, "stream", _DEFAULT_STREAM)


@contextlib.contextmanager
def stream(s: Stream | None):
    """Makes s the current stream of this thread inside the block (None: the default)."""
    target = _DEFAULT_STREAM if s is None else s
    if not isinstance(target, Stream):
        raise type_error("stream", "stream", "a shmem.Stream or None", _type_name(s))
    previous = current_stream()
    native.set_current_stream(target._native)
    _current.stream = target
    try:
        yield target
    finally:
        native.set_current_stream(previous._native)
        _current.stream = previous


def synchronize() -> None:
    """Waits for every host stream of this process; raises the first failure found."""
    for s in list(_streams):
        s.synchronize()


class Event:
    """A point in a stream, to order work across streams and with the caller."""

    def __init__(self) -> None:
        self._native = native.Event()

    def record(self, stream: Stream | None = None) -> None:
        """Marks the current end of stream (default: the current stream)."""
        self._native.record(self._stream("Event.record", stream)._native)

    def wait(self, stream: Stream | None = None) -> None:
        """Makes stream (default: the current one) wait for the recorded point; on the default
        stream the caller blocks, bounded by the timeout."""
        self._native.wait(self._stream("Event.wait", stream)._native, _timeout_s())

    def synchronize(self) -> None:
        """Blocks until the recorded point completed; raises a failure queued before it."""
        self._native.synchronize(_timeout_s())

    def query(self) -> bool:
        return self._native.query()

    @staticmethod
    def _stream(operation: str, stream: Stream | None) -> Stream:
        if stream is None:
            return current_stream()
        if not isinstance(stream, Stream):
            raise type_error(operation, "stream", "a shmem.Stream or None", _type_name(stream))
        return stream
