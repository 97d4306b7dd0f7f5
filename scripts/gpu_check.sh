#!/usr/bin/env bash
# The CUDA backend's checks on a machine with a GPU (and a CUDA toolkit): builds the native core
# with CUDA forced on, then runs the CUDA layer's own test on the device (memory, IPC, stream
# writes, add and wait kernels, a wait that gives up) and the CUDA backend's Runtime tests. It
# writes the build and test logs and a summary to the folder given as its argument.
#
#   bash scripts/gpu_check.sh OUT_DIR
#
# Not yet here (see the README's CUDA section): the Runtime tests on the real CUDA layer with
# 2 and 4 PEs on one GPU, MegaMoE on CUDA, and the benchmark against cudaMemcpyAsync and NCCL.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu_check.sh OUT_DIR}
mkdir -p "$out"
started=$(date +%s)
command -v nvidia-smi >/dev/null && nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true
bash scripts/setup_deps.sh > "$out/setup.log" 2>&1
cmake -S ccsrc -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DHPS_CUDA=ON \
  > "$out/configure.log" 2>&1
cmake --build build-gpu > "$out/build.log" 2>&1
status=0
ctest --test-dir build-gpu -R "CudaRuntimeApi|CudaRuntime|FakeCuda" --output-on-failure \
  --timeout 300 > "$out/tests.log" 2>&1 || status=$?
{
  echo "gpu_check: $(date -u +%FT%TZ), $(( $(date +%s) - started )) s"
  grep -E "tests passed|tests failed" "$out/tests.log" || true
  echo "exit status: $status"
} | tee "$out/summary.txt"
exit "$status"
