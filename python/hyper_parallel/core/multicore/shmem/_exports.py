"""Exports that would alias the symmetric heap outside torch are refused.

A tensor that `empty` returned (or any view of it) lives in the symmetric heap. torch views share
its storage, so `free` invalidates them; an export does not: a numpy array (`.numpy()`,
`np.asarray`, `__array__`) or a DLPack capsule (`__dlpack__`, `torch.utils.dlpack.to_dlpack`,
`torch.from_dlpack`) keeps a raw pointer that `free` cannot reach, and would read whatever the
heap holds next. These entry points are wrapped once, at import, to raise INVALID_ARGUMENT
naming `.clone()` for a tensor whose storage is on the heap; any other tensor passes through
unchanged (one native check of its storage's owner). Re-sharing the storage itself
(`untyped_storage()`, `set_`) stays a torch alias and is invalidated at free like a view. What
no library can see is a raw `data_ptr()` handed to C code: the quarantine and the poison of
freed memory, and the zero pages left after shutdown, are the defence there.
"""

from __future__ import annotations

import functools

import torch
import torch.utils.dlpack

from ._runtime import native, value_error

_GUARDED = object()  # marks a wrapper, so installing twice changes nothing


def _refuse(tensor: torch.Tensor, export: str) -> None:
    if isinstance(tensor, torch.Tensor) and native.is_symmetric(tensor):
        raise value_error(export, "tensor", "not in the symmetric heap: call .clone() first (an "
                          "export would alias memory that shmem.free hands out again)",
                          "a symmetric tensor")


def _guarded(original, export: str, copy_passes: bool = False):
    """`original` (a method or function whose first argument is the tensor) behind the check;
    with `copy_passes`, a call asking for a copy (`copy=True`) aliases nothing and passes."""
    if getattr(original, "_hps_guard", None) is _GUARDED:
        return original

    @functools.wraps(original)
    def guarded(tensor, *args, **kwargs):
        if not (copy_passes and kwargs.get("copy")):
            _refuse(tensor, export)
        return original(tensor, *args, **kwargs)

    guarded._hps_guard = _GUARDED
    return guarded


def install() -> None:
    """Wraps the export entry points (idempotent)."""
    for name in ("numpy", "__array__", "__dlpack__"):
        setattr(torch.Tensor, name,
                _guarded(getattr(torch.Tensor, name), name, copy_passes=name == "__dlpack__"))
    original = torch.utils.dlpack.to_dlpack
    torch.utils.dlpack.to_dlpack = _guarded(original, "to_dlpack")
    if getattr(torch, "to_dlpack", None) is original:
        torch.to_dlpack = torch.utils.dlpack.to_dlpack
