#!/usr/bin/env bash
# Builds and installs the package (native core + torch bindings) into the current Python
# environment, against the torch already installed there (no build isolation: an isolated
# build would fetch its own torch). Incremental: the build tree stays in build/pip/.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/setup_deps.sh
echo "== building and installing hyper-parallel-shmem"
"$PYTHON" -m pip install -q --no-build-isolation . 2>&1 | grep -v "Running pip as the 'root' user" || true
# Both extension modules: MegaMoE's (mega_moe/_native.py) imports the shmem package first.
"$PYTHON" -c "import hyper_parallel.core.multicore.mega_moe._native" \
  || { echo "the package does not import after installing" >&2; exit 1; }
