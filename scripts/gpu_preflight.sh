#!/usr/bin/env bash
# What this machine offers the CUDA checks, recorded and checked before anything is built: the
# GPUs and their compute modes, the driver and the CUDA version it supports against the
# toolkit whose static runtime the backend links, nvcc, whether torch has CUDA, and whether MPS
# is there. A GPU machine lent for a check has no network, so nothing can be installed there:
# what is missing is reported, never skipped in silence.
#
#   bash scripts/gpu_preflight.sh [OUT_DIR]
#
# Prints one "key: value" line per fact, a "missing: ..." line for each device check that cannot
# run here and why, and "coverage: full" or "coverage: none|partial (N missing)"; with OUT_DIR it
# also writes them to OUT_DIR/preflight.txt. Exit status 0 when every device check can run, 3
# when any cannot. scripts/gpu_check.sh runs it first; the test command runs it on the CPU
# machine and checks that it reports the missing coverage.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-}
PYTHON=${PYTHON:-python3}

lines=()
missing=()
fact() { lines+=("$1: $2"); }

# "13.0" from a version text such as "13.0" or "release 13.0, V13.0.88".
major_minor() { sed -n 's/[^0-9]*\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' <<<"$1" | head -n 1; }

# ---- GPUs and driver -------------------------------------------------------------------------
gpus=0
driver_cuda=""
if command -v nvidia-smi >/dev/null 2>&1; then
  smi=$(timeout 20 nvidia-smi 2>&1) || true
  gpus=$(timeout 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU [0-9]' || true)
  driver=$(timeout 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null |
    head -n 1)
  modes=$(timeout 20 nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null |
    sort -u | paste -sd, -)
  driver_cuda=$(sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' <<<"$smi" | head -n 1)
  fact gpus "$gpus"
  fact driver "${driver:-unknown}"
  fact driver_cuda "${driver_cuda:-unknown}"
  fact compute_mode "${modes:-unknown}"
  if ((gpus == 0)); then
    missing+=("no GPU: nvidia-smi lists none ($(head -n 1 <<<"$smi"))")
  fi
  case "$modes" in
    *Exclusive_Process*) missing+=("compute mode Exclusive_Process: the checks put 2 and 4 PEs on GPU 0 (set it to Default)") ;;
    *Prohibited*) missing+=("compute mode Prohibited: no process may use the GPU") ;;
  esac
else
  fact gpus 0
  fact driver "none (no nvidia-smi)"
  missing+=("no NVIDIA driver: nvidia-smi is not installed")
fi

# ---- toolkit ---------------------------------------------------------------------------------
nvcc=$(command -v nvcc || true)
[[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
toolkit=""
if [[ -n $nvcc ]]; then
  toolkit=$(major_minor "$("$nvcc" --version 2>/dev/null | grep -o 'release [0-9.]*')")
  fact nvcc "$nvcc (CUDA ${toolkit:-unknown})"
else
  fact nvcc none
  missing+=("no nvcc: the CUDA backend cannot be built")
fi
# The static runtime needs a driver of its major version or newer (minor versions of one major
# run on that major's drivers).
if [[ -n $toolkit && -n $driver_cuda ]]; then
  if ((${driver_cuda%%.*} < ${toolkit%%.*})); then
    missing+=("driver too old: it supports CUDA $driver_cuda, the backend links the CUDA $toolkit runtime (every device call would fail with cudaErrorInsufficientDriver)")
  fi
fi

# ---- torch -----------------------------------------------------------------------------------
torch_facts=$("$PYTHON" -c 'import torch
print(torch.__version__, torch.version.cuda, torch.cuda.is_available(),
      torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null || true)
if [[ -z $torch_facts ]]; then
  fact torch none
  missing+=("no torch: the Python CUDA tests cannot run")
else
  read -r torch_version torch_cuda torch_available torch_devices <<<"$torch_facts"
  fact torch "$torch_version (CUDA $torch_cuda, available $torch_available, $torch_devices devices)"
  if [[ $torch_cuda == None ]]; then
    missing+=("torch $torch_version has no CUDA (a CPU build): the Python CUDA tests cannot run")
  elif [[ $torch_available != True ]]; then
    missing+=("torch sees no CUDA device: the Python CUDA tests cannot run")
  fi
fi

# ---- MPS -------------------------------------------------------------------------------------
if command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
  fact mps "available (nvidia-cuda-mps-control)"
else
  fact mps "absent (several PEs on one GPU time-slice its contexts)"
fi

for gap in "${missing[@]}"; do lines+=("missing: $gap"); done
if ((${#missing[@]} == 0)); then
  lines+=("coverage: full")
elif ((gpus == 0)); then
  lines+=("coverage: none (${#missing[@]} missing)")
else
  lines+=("coverage: partial (${#missing[@]} missing)")
fi
printf '%s\n' "${lines[@]}"
if [[ -n $out ]]; then
  mkdir -p "$out"
  printf '%s\n' "${lines[@]}" > "$out/preflight.txt"
fi
((${#missing[@]} == 0)) || exit 3
