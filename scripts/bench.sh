#!/usr/bin/env bash
# Runs the benchmark suite (benchmarks/run.py): installs the package, matplotlib for the plots,
# and (as root, when missing) Debian's OpenMPI with OSHMEM for the OSHMEM peer.
#
#   bash scripts/bench.sh                full run (about 13 minutes), results in bench-results/
#   bash scripts/bench.sh --contended    the same plus ping-pong and barrier beside a CPU hog
#                                        (about 14 minutes)
#   bash scripts/bench.sh --quick        about 3 minutes (about 3.5 with --contended)
#   bash scripts/bench.sh --moe-only     the MegaMoE suite alone: training step on SHMEM against
#                                        all-to-all, dispatch + combine, expert-size sweep
#                                        (about 6 minutes; --moe adds it to a full run)
# Other arguments go to benchmarks/run.py (--help lists them). Results go to bench-results/;
# python3 benchmarks/publish.py copies a run to record into docs/benchmarks/.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/install.sh >&2
"$PYTHON" -c "import matplotlib" 2>/dev/null || "$PYTHON" -m pip install -q matplotlib
if ! command -v oshrun >/dev/null && [[ $(id -u) -eq 0 ]]; then
  echo "installing OpenMPI with OSHMEM for the OSHMEM peer" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null; } \
    || echo "could not install OpenMPI; the OSHMEM peer will be skipped" >&2
fi
exec "$PYTHON" benchmarks/run.py "$@"
