#!/usr/bin/env bash
# The main job: installs the package, then runs the demo of N PEs on the host backend.
#
#   bash scripts/demo.sh [--pes N]      (default 4)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/install.sh >&2
cd /  # import the installed package, not the source tree
exec "$PYTHON" -m hyper_parallel.core.multicore.shmem.demo "$@"
