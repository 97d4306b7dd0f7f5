"""What the benchmarks' plots share: matplotlib without a display, or None where it is missing
(a benchmark still writes its JSON and prints its table)."""

from __future__ import annotations

import sys


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None (saying so on stderr)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: no plot", file=sys.stderr)
        return None
    return plt
