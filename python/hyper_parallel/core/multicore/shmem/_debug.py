"""Diagnostics: debug_state() and the caller location in debug logs."""

from __future__ import annotations

import datetime
import os
import sys

from . import _lifecycle
from ._runtime import native

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_HEX_KEYS = frozenset({"base", "heap_base"})


def _format(key: str | None, value: object) -> str:
    if key in _HEX_KEYS and isinstance(value, int):
        return hex(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_format(k, v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_format(None, item) for item in value) + "]"
    return repr(value)


class DebugState(dict):
    """The Runtime's process-local state. A dict; its repr is one field per line, hex addresses."""

    def __repr__(self) -> str:
        lines = [f"  {key}={_format(key, value)}" for key, value in self.items()]
        return "DebugState(\n" + "\n".join(lines) + "\n)"

    __str__ = __repr__


def _blocked(entries: list) -> list:
    out = []
    for entry in entries:
        since = datetime.datetime.fromtimestamp(entry["since"], datetime.timezone.utc)
        out.append({"operation": entry["operation"], "stream": entry["stream"],
                    "since": since.isoformat(timespec="milliseconds"),
                    "waited_s": round(entry["waited_s"], 3),
                    "waiting_for": entry["waiting_for"]})
    return out


def debug_state() -> DebugState:
    """A read-only snapshot of this process's Runtime. Not collective; cheap; any time, also
    from another thread while calls of this PE are blocked (no entry waits holding the lock).

    Fields: state (uninitialized, initializing, ready, closing, failed), reference_count,
    lifecycle, root_rank, root_size, global_ranks, device, backend, config, heap_base, heap
    (heap_size, allocated, max_allocated, remaining, largest_free_block, quarantined,
    quarantined_blocks), live_allocations,
    leaks (id, base, bytes, alignment) and released (the same fields: allocations of torch's
    symm_mem whose tensors died on this PE, waiting for the agreed reclaim; docs/api.md), collectives (sequence: the number of this PE's latest
    collective; in_flight; stream: where they are queued), teams (the teams this PE is in, by
    slot, the world first: slot, pes in world numbering, my_pe in the team, predefined,
    handles this PE holds, sequence and first_sequence of its collectives, in_flight, stream),
    calls_in_flight (calls executing now), host_synchronizations (how many times the backend
    blocked the host until a device stream ran its work: 0 on the host backend; on CANN and
    CUDA only the calls docs/api.md says synchronise add to it; reading it never
    synchronises), wait (the wait policy in force: mode, spin_us,
    yield_us, sleeps, pinned: the core the initialising thread was pinned to, or why not),
    peers (every PE: pe, host (its hostname and network namespace), transport: "self",
    "shared memory" for a PE mapped on this host, the remote transport's name ("ucx") for one
    reached over the network, and path: for a remote PE, "messages" or "rma", else None;
    docs/scale-out.md), network (None without remote peers; else provider (the transport's
    name), version, endpoints, and ops: the remote puts, gets, atomics, bytes_put, bytes_got,
    messages, heartbeats, flushes, rejected, event_sleeps and reordered of this PE),
    blocked (each operation blocked now: operation, stream, since, waited_s, and
    waiting_for, e.g. the signal address, comparison, expected and observed value, or the
    collective and the PEs that have not arrived), recent_ops (the last 64 primitives that
    completed on this PE, oldest first: sequence, op, pe (the world PE of a one-sided op, -1
    otherwise) and path: "function" for a call of the public functions in eager mode,
    "custom_op" for torch.ops.hps, which a compiled function calls), latest_failure (the text
    of the latest native error, or None) and terminal_failure (why the runtime is failed, or
    None).
    """
    snapshot = native.snapshot()
    state = DebugState()
    state["state"] = snapshot["state"]
    state["reference_count"] = _lifecycle.reference_count()
    for key in ("lifecycle", "root_rank", "root_size", "global_ranks", "device", "backend",
                "config", "heap_base", "heap", "live_allocations", "leaks", "released", "collectives",
                "teams", "calls_in_flight", "host_synchronizations", "wait", "peers",
                "network"):
        state[key] = snapshot[key]
    state["blocked"] = _blocked(snapshot["blocked"])
    state["recent_ops"] = snapshot["recent_ops"]
    state["latest_failure"] = snapshot["latest_failure"]
    state["terminal_failure"] = snapshot["terminal_failure"]
    return state


def caller_stack(limit: int = 4) -> str:
    """'file:line in function' of the first frames outside this package, innermost first."""
    frames = []
    frame = sys._getframe(1)
    while frame is not None and len(frames) < limit:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_PACKAGE_DIR) and "contextlib" not in filename:
            frames.append(f"{filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        frame = frame.f_back
    return " <- ".join(frames) if frames else "<unknown>"


def allocation_note(tensor_shape: tuple, dtype: object) -> str:
    """What the debug log line of an Empty/Free adds: shape, dtype and where it was called."""
    if native.log_level() != 0:
        return ""
    return f"shape={tuple(tensor_shape)} dtype={dtype} caller={caller_stack()}"
