"""The primitives as torch custom ops (docs/compile.md): torch.ops.hps.put, get, signal,
put_signal, wait_signal, barrier, all_gather and all_to_all, registered natively.

Every op takes the order token first and declares it mutated: the shared mutation keeps the ops
in program order under torch.compile. The token lives from init to shutdown; order_token()
returns it (also inside a compiled function, where it becomes a graph input) and the ops refuse
any other tensor, a stale token of an earlier lifecycle included. Under torch.compile the
public functions (_api.py) call these ops; in eager mode they keep the direct native path.
"""

from __future__ import annotations

import torch

from ._runtime import ShmemError, assertion, native

# The token outside a lifecycle: value 0, which no lifecycle's token holds, so every op
# refuses it with INVALID_STATE, also when a compiled function reads it as its graph input.
_NO_TOKEN = torch.zeros(1, dtype=torch.int64)
# The live lifecycle's token (the native one), kept here so that a compiled function reads it
# as a plain global.
_token: torch.Tensor = _NO_TOKEN


def order_token() -> torch.Tensor:
    """The live lifecycle's order token, which every torch.ops.hps op takes first; raises
    ShmemError INVALID_STATE outside a lifecycle. Inside a compiled function it raises
    nothing: the ops raise INVALID_STATE when they run outside a lifecycle, which is also
    what a function compiled during a lifecycle and called after it meets."""
    token = _token
    if token is _NO_TOKEN and not torch.compiler.is_compiling():
        raise ShmemError.make(
            "INVALID_STATE", "order_token", "validate",
            assertion("no live lifecycle: the order token exists from init to shutdown"))
    return token


def lifecycle_began() -> None:
    """Takes the new lifecycle's token (after a successful init)."""
    global _token
    _token = native.order_token()


def lifecycle_ended() -> None:
    """Drops the token (the lifecycle ended, or failed for good)."""
    global _token
    _token = _NO_TOKEN


def team_code(team: object) -> list:
    """The int list a team is in an op's schema: [] the world, [-1] the node team,
    [lifecycle, slot, id] a made team (read without native calls, so it traces)."""
    if team is None:
        return []
    return list(team._code)
