"""Sizes as the reports print them, and as the benchmark programs take them."""

from __future__ import annotations

KIB, MIB = 1 << 10, 1 << 20


def human(size: int) -> str:
    """4096 -> '4 KiB', 1048576 -> '1 MiB', 100 -> '100 B'."""
    for unit, scale in (("MiB", MIB), ("KiB", KIB)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def csv(values) -> str:
    """[8, 4096] -> '8,4096': the --sizes of the benchmark programs."""
    return ",".join(str(v) for v in values)


def ints(text: str) -> list:
    """'8,4096' -> [8, 4096]: --sizes as the programs read it."""
    return [int(v) for v in str(text).split(",") if v]
