#!/usr/bin/env bash
# The CUDA backend's checks on a machine with a GPU (and a CUDA toolkit), in under 8 minutes:
# records and checks what the machine offers first (scripts/gpu_preflight.sh: any gap fails the
# check), builds the native core with CUDA forced on, then runs
#   - the CUDA layer's own test on the device (memory, IPC, the multi-block copy kernel over
#     device, pinned and pageable memory, stream writes, add and wait kernels, a wait that gives
#     up) and the where-callable table's tests;
#   - the Runtime on the CUDA backend, over the fake CUDA layer and over the real one with 2 and
#     4 PEs sharing GPU 0 (RMA, signals, all_gather through the copy kernel, MegaMoE's kernels, a
#     wait that times out);
#   - the native benchmark's checks (over the fake layer, and a tiny run on the device);
# then the native benchmark (benchmarks/cuda/cuda_bench.cc) with 2 and 4 PEs on GPU 0: put
# against cudaMemcpyAsync device to device on the same stream, put + signal ping-pong, and
# all_gather (and, last of all, again under MPS where the machine has it: cuda_bench_mps.jsonl).
# Then it builds the Python package with CUDA against the machine's torch into build-gpu/py, in the same
# build tree (the core is compiled once), and runs tests/python/test_cuda.py with it: CUDA tensors
# on 2 and 4 PEs sharing GPU 0, operations on torch's current stream, the protection chain on
# GPU tensors, MegaMoE on CUDA against the dense layer. Then, when `nvidia-smi -L` lists at
# least 2 GPUs, MegaMoE against all_to_all_single over NCCL with 2 PEs, one GPU each
# (benchmarks/moe/moe_bench.py --device cuda: dispatch + combine alone, then the training step of a
# small decoder); with fewer it says it skipped that, since NCCL refuses two ranks on one GPU
# ("Duplicate GPU detected"). Every step is time-boxed within one deadline. The device tests
# run with HPS_TEST_REQUIRE_CUDA=1: one that cannot reach a GPU fails rather than skips. It
# writes the logs, the benchmarks' JSON lines (cuda_bench.jsonl, moe_cuda.jsonl) and a summary
# to the folder given as its argument.
#
#   bash scripts/gpu_check.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu_check.sh OUT_DIR}
# Every test of the real CUDA layer (C++ and Python) fails, instead of skipping, where it cannot
# reach a usable GPU: a check that ran no device test must not pass.
export HPS_TEST_REQUIRE_CUDA=1
mkdir -p "$out"
started=$(date +%s)
budget=450  # seconds for every step together; timeout's kill grace keeps the rest under 8 min

# Runs "$@" under a timeout of $1 seconds or the time left, whichever is shorter (exit 124 when
# cut off, or at once when no time is left).
boxed() {
  local limit=$1 left
  shift
  left=$((started + budget - $(date +%s)))
  ((left < limit)) && limit=$left
  if ((limit < 5)); then
    echo "gpu_check: no time left for: $*" >&2
    return 124
  fi
  timeout --kill-after=5 "$limit" "$@"
}

# Writes the summary and ends with `status` (and the reason given, if any).
finish() {
  if [[ -f "$out/tests.log" ]] && grep -q "(Skipped)" "$out/tests.log"; then
    if ((status == 0)); then status=1; fi  # a device test that did not run is a failure
  fi
  {
    echo "gpu_check: $(date -u +%FT%TZ), $(($(date +%s) - started)) s"
    if [[ -n ${1:-} ]]; then echo "$1"; fi
    if [[ -f "$out/preflight.txt" ]]; then cat "$out/preflight.txt"; fi
    if [[ -f "$out/tests.log" ]]; then
      grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(Skipped\)" "$out/tests.log" \
        || true
    fi
    if [[ -f "$out/cuda_bench.jsonl" ]]; then
      echo "cuda_bench: $(wc -l < "$out/cuda_bench.jsonl") JSON lines in cuda_bench.jsonl"
      cat "$out/cuda_bench.jsonl"
      grep -E "exit [0-9]+" "$out/cuda_bench.log" || true
    fi
    if [[ -n ${mps_note:-} ]]; then echo "$mps_note"; fi
    if [[ -f "$out/cuda_bench_mps.jsonl" ]]; then cat "$out/cuda_bench_mps.jsonl"; fi
    if [[ -f "$out/python-tests.log" ]]; then
      echo "python CUDA tests: $(tail -n 1 "$out/python-tests.log")"
    elif [[ -f "$out/python-build.status" ]]; then
      echo "python package build: exit $(cat "$out/python-build.status") (python-build.log)"
    fi
    if [[ -n ${moe_note:-} ]]; then echo "$moe_note"; fi
    if [[ -f "$out/moe_cuda.jsonl" ]]; then
      echo "MegaMoE vs NCCL all_to_all_single, 2 PEs on 2 GPUs:" \
        "$(grep -c '"moe"' "$out/moe_cuda.jsonl" || true) records in moe_cuda.jsonl"
      python3 - "$out/moe_cuda.jsonl" <<'PY' || true
import json, statistics, sys
def med(values):
    return statistics.median(values) if values else float("nan")
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if r.get("moe") == "comm":
        s, a = (med(r["samples_us"][p]) for p in ("shmem", "a2a"))
        c = med(r["samples_us"].get("shmem_copy", []))
        print(f"  comm {r['config']} x{r['pes']}, {r['bytes_per_pe'] // 1024} KiB/PE: SHMEM "
              f"{s:.0f} us ({c:.0f} us copied out), NCCL {a:.0f} us (rank-max median of "
              f"{len(r['samples_us']['shmem'])})")
    elif r.get("moe") == "step":
        s, a = (med(r["steps_us"][p]) / 1e3 for p in ("shmem", "a2a"))
        c = med(r["comm_us"]["a2a"] or []) / 1e3
        print(f"  step {r['config']} x{r['pes']}: SHMEM {s:.2f} ms, NCCL {a:.2f} ms, of which "
              f"its dispatch + combine {c:.2f} ms (rank-max median of {len(r['steps_us']['a2a'])})")
PY
      cat "$out/moe_cuda.jsonl"
      grep -E "exit [0-9]+|skipped" "$out/moe_cuda.log" || true
    fi
    echo "exit status: $status"
  } | tee "$out/summary.txt"
  exit "$status"
}

# The native benchmark with 2 and 4 PEs on GPU 0: JSON lines appended to $1, its stderr to $2;
# a failure (named with the words $3) is logged and sets the status.
run_cuda_bench() {
  local jsonl=$1 log=$2 how=$3 pes code
  for pes in 2 4; do
    code=0
    boxed 120 build-gpu/hps_cuda_bench --pes "$pes" >> "$jsonl" 2>> "$log" || code=$?
    if ((code != 0)); then
      echo "hps_cuda_bench --pes $pes$how: exit $code" >> "$log"
      if ((status == 0)); then status=$code; fi
    fi
  done
}

rm -f "$out/tests.log" "$out/cuda_bench.jsonl" "$out/cuda_bench.log" "$out/python-tests.log" \
  "$out/python-build.status" "$out/moe_cuda.jsonl" "$out/moe_cuda.log" "$out/preflight.txt" \
  "$out/cuda_bench_mps.jsonl" "$out/cuda_bench_mps.log"
status=0
moe_note=""
# What the machine offers, first (preflight.txt): a gap (no driver, a driver older than the
# CUDA runtime, an exclusive GPU, torch without CUDA) makes the whole check fail, whatever
# else passes; the rest still runs, for what it can show.
boxed 120 bash scripts/gpu_preflight.sh "$out" > /dev/null 2>&1 || status=$?
command -v nvidia-smi >/dev/null && boxed 20 nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true
gpus=0  # as `nvidia-smi -L` lists them (the MegaMoE vs NCCL benchmark needs 2)
if command -v nvidia-smi >/dev/null; then
  gpus=$(boxed 20 nvidia-smi -L 2>/dev/null | grep -c "^GPU [0-9]" || true)
fi
# The C++ checks need only the compiler, CMake, Ninja and GoogleTest: a setup that fails (no
# network for the Python packages) is logged, and the build says what is really missing.
boxed 90 bash scripts/setup_deps.sh > "$out/setup.log" 2>&1 \
  || echo "gpu_check: setup_deps.sh failed (see setup.log); going on with what is installed" >&2
boxed 60 cmake -S ccsrc -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DHPS_CUDA=ON \
  > "$out/configure.log" 2>&1 || { status=$?; finish "configure failed (configure.log)"; }
boxed 200 cmake --build build-gpu --target hps_cuda_api_tests hps_fake_cuda_tests \
  hps_unit_tests hps_multiprocess_tests hps_cuda_bench > "$out/build.log" 2>&1 \
  || { status=$?; finish "build failed (build.log)"; }

boxed 150 ctest --test-dir build-gpu --output-on-failure --timeout 120 \
  -R "CudaRuntimeApi|CudaRuntime|FakeCuda|CudaCallSites|cuda_bench" > "$out/tests.log" 2>&1 \
  || status=$?

: > "$out/cuda_bench.jsonl"
: > "$out/cuda_bench.log"
run_cuda_bench "$out/cuda_bench.jsonl" "$out/cuda_bench.log" ""

# The Python package with CUDA, against the installed torch, in the same build tree: pip's
# build reuses every object the C++ build made and adds the binding (the core is built once).
code=0
boxed 300 python3 -m pip install -q --no-build-isolation --no-deps --upgrade \
  --target build-gpu/py --config-settings=build-dir=build-gpu \
  --config-settings=cmake.define.HPS_CUDA=ON --config-settings=cmake.define.HPS_BUILD_TESTS=ON \
  . > "$out/python-build.log" 2>&1 || code=$?
echo "$code" > "$out/python-build.status"
if [[ $(cat "$out/python-build.status" 2>/dev/null) == 0 ]]; then
  code=0
  PYTHONPATH="$PWD/build-gpu/py" boxed 150 python3 -m pytest -q -rs -p no:cacheprovider \
    tests/python/test_cuda.py > "$out/python-tests.log" 2>&1 || code=$?
  if ((status == 0)); then status=$code; fi
elif ((status == 0)); then
  status=1
fi

# MegaMoE against all_to_all_single over NCCL: NCCL needs a GPU per PE, so 2 PEs need 2 GPUs.
if ((gpus < 2)); then
  moe_note="MegaMoE vs NCCL: skipped, $gpus GPU(s): NCCL needs a GPU per PE"
elif [[ $(cat "$out/python-build.status" 2>/dev/null) != 0 ]]; then
  moe_note="MegaMoE vs NCCL: not run, the Python package with CUDA did not build"
else
  : > "$out/moe_cuda.jsonl"
  : > "$out/moe_cuda.log"
  # NAME:H:I:IS:E:K:LAYERS:SEQ:BATCH: benchmarks/moe.py's "tiny" and "small".
  tiny=tiny:64:64:32:8:2:2:32:2
  small=small:64:128:64:8:2:2:128:4
  for moe_test in comm step; do
    if [[ $moe_test == comm ]]; then
      moe_args=(--test comm --configs "$tiny,$small" --reps 20)
    else
      moe_args=(--test step --configs "$small" --warmup 3 --steps 5)
    fi
    code=0
    PYTHONPATH="$PWD/build-gpu/py" boxed 60 python3 -m hyper_parallel.core.multicore.shmem.launch \
      --nproc 2 --timeout 55 benchmarks/moe/moe_bench.py --device cuda "${moe_args[@]}" \
      >> "$out/moe_cuda.jsonl" 2>> "$out/moe_cuda.log" || code=$?
    if ((code == 77)); then  # the benchmark's reason is in moe_cuda.log
      moe_note="MegaMoE vs NCCL: skipped by moe_bench (see moe_cuda.log)"
      break
    elif ((code != 0)); then
      echo "moe_bench --device cuda --test $moe_test: exit $code" >> "$out/moe_cuda.log"
      if ((status == 0)); then status=$code; fi
    fi
  done
fi

# Once more under MPS, where the machine has it: without MPS the PEs' contexts on one GPU
# time-slice, so a handoff between two PEs' kernels may wait for a slice. The daemon is stopped
# again at once. Last, so that it cannot take time from the checks above.
mps_note="MPS: not on this machine (cuda_bench ran without it only)"
if command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
  export CUDA_MPS_PIPE_DIRECTORY="$out/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$out/mps/log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  : > "$out/cuda_bench_mps.log"
  if boxed 20 nvidia-cuda-mps-control -d >> "$out/cuda_bench_mps.log" 2>&1; then
    : > "$out/cuda_bench_mps.jsonl"
    run_cuda_bench "$out/cuda_bench_mps.jsonl" "$out/cuda_bench_mps.log" " under MPS"
    echo quit | boxed 20 nvidia-cuda-mps-control >> "$out/cuda_bench_mps.log" 2>&1 || true
    mps_note="MPS: cuda_bench again under MPS: $(wc -l < "$out/cuda_bench_mps.jsonl") JSON lines in cuda_bench_mps.jsonl"
  else
    mps_note="MPS: the daemon did not start (cuda_bench_mps.log)"
  fi
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi

finish
