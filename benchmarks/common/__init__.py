"""What every benchmark shares (docs/benchmarks.md): where things are, and the modules beside
this file: launch (PEs, launchers, rounds), results (the line a PE prints and the driver
parses), stats, report (JSON, tables, targets), plots, units, progress, build (the native
programs and OSHMEM's) and hosts (the hosts made of network namespaces).

Every entry script puts benchmarks/ first on sys.path and imports these as `common.<module>`;
the folders beside it (one_host, moe, scale_out, openshmem, native) are packages the same way.
"""

from __future__ import annotations

import os

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(BENCH)
# Where the native programs are built, and where every benchmark writes its results by default
# (benchmarks/publish.py alone copies them into docs/benchmarks/).
BUILD = os.path.join(ROOT, "build", "bench")
RESULTS = os.path.join(ROOT, "bench-results")
