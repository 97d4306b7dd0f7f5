"""What the benchmarks' plots share: matplotlib without a display, or None where it is missing
(a benchmark still writes its JSON and prints its table), and saving a figure."""

from __future__ import annotations

import os
import sys


def pyplot(quiet: bool = False):
    """matplotlib.pyplot on the Agg backend, or None (saying so on stderr unless quiet)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        if not quiet:
            print("no matplotlib: no plot", file=sys.stderr)
        return None
    return plt


def save(plt, fig, path: str, dpi: int = 110) -> str:
    """Lays out, writes and closes the figure; returns path."""
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def bars(plt, labels: list, series: list, title: str, ylabel: str, path: str,
         size=(8, 3.8), fontsize: int | None = 8, log: bool = False, one: bool = True,
         dpi: int = 110) -> str:
    """Grouped bars, series [(label, values)] with one value per label, a line at 1 (ratios)
    unless not `one`, a log scale with `log`; returns the written path."""
    figure, axis = plt.subplots(figsize=size)
    width = 0.8 / len(series)
    xs = range(len(labels))
    for index, (name, values) in enumerate(series):
        axis.bar([x + (index - (len(series) - 1) / 2) * width for x in xs], values, width,
                 label=name)
    if one:
        axis.axhline(1.0, color="grey", linewidth=0.8)
    if log:
        axis.set_yscale("log")
    axis.set_xticks(list(xs), labels, **({"fontsize": fontsize} if fontsize else {}))
    axis.set_ylabel(ylabel)
    axis.set_title(title)
    axis.legend(fontsize=8)
    return save(plt, figure, path, dpi)
