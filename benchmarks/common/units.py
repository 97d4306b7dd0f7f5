"""Sizes as the reports print them, shared by run.py and the PE-side benchmarks."""

from __future__ import annotations

KIB, MIB = 1 << 10, 1 << 20


def human(size: int) -> str:
    """4096 -> '4 KiB', 1048576 -> '1 MiB', 100 -> '100 B'."""
    for unit, scale in (("MiB", MIB), ("KiB", KIB)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"
