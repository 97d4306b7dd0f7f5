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


def shape_text(name: str, shape) -> str:
    """('tiny', (64, 64)) -> 'tiny:64:64': one --configs entry of the PE-side benchmarks."""
    return ":".join([name] + [str(v) for v in shape])


def shapes(text: str, form: str) -> list:
    """--configs, entries of `form` (e.g. NAME:H:I:E:K:T) separated by commas ->
    [(name, (int, ...))]."""
    count = len(form.split(":"))
    out = []
    for entry in text.split(","):
        fields = entry.split(":")
        if len(fields) != count:
            raise SystemExit(f"--configs entry {entry!r}: expected {form}")
        out.append((fields[0], tuple(int(v) for v in fields[1:])))
    return out
