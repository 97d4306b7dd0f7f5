#!/usr/bin/env bash
# The main job: installs the package, then runs
#   1. the SHMEM demo: N PEs on the host backend exchange data one-sidedly;
#   2. the MegaMoE demo: a small MoE decoder trained on M PEs, the SHMEM path's losses printed
#      beside the all-to-all path's (python -m hyper_parallel.core.multicore.mega_moe.demo).
#
#   bash scripts/demo.sh [--pes N] [--moe-pes M] [--moe-steps S]   (defaults 4, 2, 8)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
pes=4
moe_pes=2
moe_steps=8
while (($#)); do
  case "$1" in
    --pes) pes=${2:?--pes needs a value}; shift 2 ;;
    --moe-pes) moe_pes=${2:?--moe-pes needs a value}; shift 2 ;;
    --moe-steps) moe_steps=${2:?--moe-steps needs a value}; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (try --help)" >&2; exit 2 ;;
  esac
done
bash scripts/install.sh >&2
cd /  # import the installed package, not the source tree
"$PYTHON" -m hyper_parallel.core.multicore.shmem.demo --pes "$pes"
echo
exec "$PYTHON" -m hyper_parallel.core.multicore.mega_moe.demo --pes "$moe_pes" --steps "$moe_steps"
