"""The one report writer: every benchmark's results file (JSON), the machine it ran on, the
targets table, the notes and the closing `wrote ...` line on stdout, and the text tables
(fixed-width columns or markdown). Results go to the results folder (bench-results/ by
default); benchmarks/publish.py alone copies them into docs/benchmarks/.
"""

from __future__ import annotations

import json
import os
import platform
import time


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine(started: float | None = None, **extra) -> dict:
    """The machine a run took place on; with `started` (monotonic), its length in seconds last."""
    info = {"machine": platform.machine(), "cpus": os.cpu_count(), "system": platform.platform(),
            "processor": cpu_model(), "python": platform.python_version(), **extra}
    if started is not None:
        info["seconds"] = round(time.monotonic() - started, 1)
    return info


def when() -> str:
    return time.strftime("%Y-%m-%d %H:%M")


def write_json(path: str, payload: dict) -> str:
    """Writes payload to path (its folder made first); returns path."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as sink:
        json.dump(payload, sink, indent=1)
    return path


def failure(system: str, test: str, sizes: list, code: str, message: str) -> dict:
    """A measurement that did not complete, as a row of the results."""
    return {"system": system, "test": test, "sizes": sizes, "error": code,
            "message": message.strip()[-600:]}


def targets_table(goals: list, measured: int, goal: int) -> str:
    """The targets ({target, measured, goal, met}) as a table, `measured` and `goal` the
    widths of those columns."""
    lines = [f"{'target':<78}{'measured':>{measured}}  {'goal':<{goal}}met"]
    lines += [f"{g['target']:<78}{g['measured']:>{measured}}  {g['goal']:<{goal}}"
              f"{'yes' if g['met'] else 'NO'}" for g in goals]
    return "\n".join(lines)


def closing(info: dict, notes: list) -> str:
    """The lines after a suite's tables: the machine, the time taken and every note."""
    lines = [f"machine: {info['processor']}, {info['cpus']} CPUs; took {info['seconds']} s"]
    lines += [f"note: {note}" for note in notes]
    return "\n".join(lines)


def wrote(path: str, figures) -> str:
    """`wrote PATH, FIGURE...`; figures is a list of written plots, one path or None (no plot
    because matplotlib is missing)."""
    if isinstance(figures, (list, tuple)):
        return f"wrote {path}" + "".join(f", {f}" for f in figures)
    return f"wrote {path}" + (f", {figures}" if figures else " (no plot: matplotlib is missing)")


def markdown(header: list, rows: list, align: str = "") -> str:
    """A markdown table: header cells, rows of cells, `align` one letter a column (l or r;
    left where not given)."""
    marks = ["---:" if (align[i:i + 1] == "r") else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def print_report(tables: str, info: dict, notes: list, path: str, figures=(),
                 goals: list | None = None, widths: tuple = (48, 14)) -> None:
    """A suite's report on stdout: its tables, the targets (when it has goals), the machine
    and the notes, then what it wrote (`figures` as wrote() takes them)."""
    print(tables)
    print()
    if goals is not None:
        print(targets_table(goals, *widths))
        print()
    print(closing(info, notes))
    print(wrote(path, figures))


def header(*cells) -> str:
    """A fixed-width table's header: cells (title, width), right-aligned, left-aligned where
    the width is negative; the rows below use the same widths."""
    return "".join(f"{title:<{-width}}" if width < 0 else f"{title:>{width}}"
                   for title, width in cells)
