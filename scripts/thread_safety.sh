#!/usr/bin/env bash
# Clang's thread-safety analysis over the native sources: every member a mutex guards is
# GUARDED_BY it and every function that needs it REQUIRES it (base/mutex.h), and this build
# fails on any access the annotations do not allow. Only the analysis runs (-fsyntax-only: no
# objects, no link), over every product source that has annotations to check: base/,
# backends/ (the CUDA runtime layer too where the CUDA headers are found), runtime/, ops/,
# data_plane/, tools/ and the OpenSHMEM C library (bindings/openshmem/). First it proves the
# analysis is on: ccsrc/base/mutex_misuse.cc must be refused. Installs clang first when
# missing (as root).
#
#   bash scripts/thread_safety.sh
set -euo pipefail
cd "$(dirname "$0")/../ccsrc"

if ! command -v clang++ >/dev/null; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "clang++ is missing (run as root, or: sudo apt-get install clang)" >&2
    exit 1
  fi
  echo "installing clang for the thread-safety analysis"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq clang >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq clang >/dev/null; }
fi

flags=(-std=c++20 -fsyntax-only -Wthread-safety -Werror -I.)
echo "== thread-safety analysis ($(clang++ --version | head -n 1))"

# The analysis must refuse a guarded member written without its mutex.
if misuse=$(clang++ "${flags[@]}" base/mutex_misuse.cc 2>&1); then
  echo "clang accepted base/mutex_misuse.cc: the thread-safety analysis is not working" >&2
  exit 1
fi
if ! grep -q "requires holding mutex" <<<"$misuse"; then
  echo "clang refused base/mutex_misuse.cc, but not for the unguarded write:" >&2
  echo "$misuse" >&2
  exit 1
fi

sources=$(find base backends runtime ops data_plane tools bindings/openshmem \
  -name '*.cc' ! -name '*_test.cc' \
  ! -name 'mutex_misuse.cc' ! -name 'call_sites_forbidden.cc' ! -name 'real_headers_check.cc' \
  ! -name 'cuda_runtime_api.cc' | sort)
cuda_include=""
for root in "${CUDA_HOME:-}" /usr/local/cuda; do
  if [[ -n "$root" && -f "$root/include/cuda_runtime.h" ]]; then
    cuda_include="$root/include"
    break
  fi
done
if [[ -n "$cuda_include" ]]; then
  sources+=$'\n'backends/cuda/cuda_runtime_api.cc
else
  echo "(no CUDA headers: backends/cuda/cuda_runtime_api.cc is left out)"
fi
count=$(wc -l <<<"$sources")
# Two at a time; any diagnostic fails the step (xargs exits non-zero when a compile does).
[[ -n "$cuda_include" ]] && flags+=(-isystem "$cuda_include")
if ! printf '%s\n' $sources | xargs -P 2 -I{} clang++ "${flags[@]}" {}; then
  echo "the thread-safety analysis failed (see above)" >&2
  exit 1
fi
echo "== thread-safety analysis: $count sources clean"
