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
