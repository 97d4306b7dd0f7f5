#!/usr/bin/env bash
# Installs what building and testing need on a fresh Debian/Ubuntu machine, skipping what is
# already there: a C++20 compiler, CMake, Ninja, GoogleTest (Debian's libgtest-dev),
# iproute2 (the namespace hosts of the tests) and UCX (libucx-dev: its headers; ucx-utils:
# ucx_info and ucx_perftest; the runtime loads UCX at run time for PEs on other hosts, and the
# tests of several hosts and the benchmarks need it) and ccache (scripts/test.sh's package step
# takes the native core's objects from its release build through it; optional without root), then
# torch 2.13.0 (pinned: a looser spec could fetch a multi-GB CUDA build), scikit-build-core,
# pytest and transformers 5.23.0 (the tests of mega_moe.hf build tiny models from their configs;
# pinned: the block layouts they swap are this version's). System packages need root;
# otherwise the script says what is missing.
set -euo pipefail
PYTHON=${PYTHON:-python3}

missing=()
command -v g++ >/dev/null || missing+=(g++)
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
[[ -f /usr/include/gtest/gtest.h ]] || missing+=(libgtest-dev)
# The tests of several hosts make hosts of namespaces (ip netns, unshare, nsenter).
command -v ip >/dev/null || missing+=(iproute2)
command -v nsenter >/dev/null || missing+=(util-linux)
# PEs on other hosts reach each other over UCX (loaded at run time).
[[ -f /usr/include/ucp/api/ucp.h ]] || missing+=(libucx-dev)
command -v ucx_perftest >/dev/null || missing+=(ucx-utils)
# ccache only saves time: without root its absence is a note, not a failure.
if ! command -v ccache >/dev/null; then
  if [[ $(id -u) -eq 0 ]]; then
    missing+=(ccache)
  else
    echo "note: ccache is missing: scripts/test.sh's package step will compile the native core" \
         "again (sudo apt-get install ccache)" >&2
  fi
fi
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "missing system packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "installing system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python_missing=()
"$PYTHON" -c "import torch" 2>/dev/null || python_missing+=("torch==2.13.0")
"$PYTHON" -c "import scikit_build_core" 2>/dev/null || python_missing+=("scikit-build-core>=0.10")
"$PYTHON" -c "import pytest" 2>/dev/null || python_missing+=("pytest")
"$PYTHON" -c "import sys, transformers; sys.exit(transformers.__version__ != '5.23.0')" \
  2>/dev/null || python_missing+=("transformers==5.23.0")
if ((${#python_missing[@]})); then
  echo "installing Python packages: ${python_missing[*]}"
  "$PYTHON" -m pip install -q "${python_missing[@]}"
fi

# torch_npu's own files for tests/python/test_torch_npu_names.py, which checks the torch.npu /
# torch_npu names our sources touch against them without importing torch_npu (that needs CANN).
# Pinned: 2.13.0 is the torch-npu release for torch 2.13 (it requires torch==2.13.0.*, the torch
# pinned above) and has a cp311 manylinux x86_64 wheel (about 42 MB, 126 MB unpacked). Kept
# outside the checkout and fetched once; without it the test skips.
TORCH_NPU_VERSION=2.13.0
torch_npu_dir="${XDG_CACHE_HOME:-$HOME/.cache}/hyper_parallel_shmem/torch_npu/$TORCH_NPU_VERSION"
fetch_torch_npu() {
  local tmp rc=0
  mkdir -p "${torch_npu_dir%/*}" && tmp=$(mktemp -d "${torch_npu_dir%/*}/.fetch.XXXXXX") || return 1
  "$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --dest "$tmp" "torch-npu==$TORCH_NPU_VERSION" >"$tmp/log" 2>&1 \
    && "$PYTHON" -m zipfile -e "$tmp"/torch_npu-*.whl "$tmp/unpacked" \
    && touch "$tmp/unpacked/.complete" \
    && rm -rf "$torch_npu_dir" && mv "$tmp/unpacked" "$torch_npu_dir" || rc=1
  ((rc == 0)) || tail -n 1 "$tmp/log" >&2 2>/dev/null || true
  rm -rf "$tmp"
  return $rc
}
if [[ ! -f "$torch_npu_dir/.complete" ]]; then
  echo "fetching the torch-npu $TORCH_NPU_VERSION wheel into $torch_npu_dir"
  fetch_torch_npu || echo "note: could not fetch torch-npu $TORCH_NPU_VERSION:" \
    "tests/python/test_torch_npu_names.py will skip" >&2
fi
