#!/usr/bin/env bash
# The main job: builds the native core and runs the demo of N PEs on the host backend.
#
#   bash scripts/demo.sh [--pes N]      (default 4)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_deps.sh
cmake -S ccsrc -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target hyper_parallel_shmem_demo >/dev/null
exec build/hyper_parallel_shmem_demo "$@"
