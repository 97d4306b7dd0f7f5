"""The drivers' progress bar."""

from __future__ import annotations

import sys
import time


def progress(done: int, total: int, label: str, started: float) -> None:
    """A progress bar on stderr: redrawn in place on a terminal, one line per step otherwise."""
    width = 30
    filled = int(width * done / max(total, 1))
    elapsed = time.monotonic() - started
    text = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {elapsed:5.0f}s {label[:40]:<40}"
    if sys.stderr.isatty():
        sys.stderr.write("\r" + text + ("\n" if done == total else ""))
    else:
        sys.stderr.write(text.rstrip() + "\n")
    sys.stderr.flush()


def step(index: int, total: int, what: str) -> None:
    """One line on stderr per part of a driver's run: `[2/3] what ...`."""
    print(f"[{index}/{total}] {what} ...", file=sys.stderr, flush=True)
