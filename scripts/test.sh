#!/usr/bin/env bash
# Runs every test, installing what it needs first:
#   1. C++ unit and multi-process tests (GoogleTest under ctest; the OpenSHMEM C API's C
#      programs under hps-oshrun), release build (the fuzz
#      harnesses' committed corpus is replayed here too), then clang's thread-safety analysis
#      of the annotated sources (scripts/thread_safety.sh: -Wthread-safety -Werror);
#   2. the same tests under AddressSanitizer + UndefinedBehaviorSanitizer, and under
#      ThreadSanitizer;
#   3. the libFuzzer harnesses (scripts/fuzz.sh), each for HPS_FUZZ_SECONDS (default 30 here);
#   4. the Python system tests (pytest, PEs as processes, gloo on loopback) on the installed
#      package, then those marked cann_fake again on the CANN backend over the fake vendor
#      library, with NPU tensors on the fake NPU device (tests/fake_npu).
# Build trees go to build/, build-asan/, build-tsan/, build-fuzz/ and build/pip/.
#
#   bash scripts/test.sh                  everything (what CI runs)
#   bash scripts/test.sh --quick          the development tier: one release build and its
#                                         C++ tests, then the Python suite (no thread-safety
#                                         analysis, sanitizers, fuzzing or CANN-fake rerun)
#   bash scripts/test.sh --no-sanitizers  skip step 2
#   bash scripts/test.sh --no-fuzz        skip step 3
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

sanitizers=1
fuzz=1
quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 sanitizers=0 fuzz=0 ;;
    --no-sanitizers) sanitizers=0 ;;
    --no-fuzz) fuzz=0 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg (try --help)" >&2; exit 2 ;;
  esac
done

bash scripts/setup_deps.sh

# Every build goes through ccache when it is there: a later run on the same machine (a CI run
# after a developer's) recompiles only what changed, in the sanitizer and fuzz builds too. The
# package step (scripts/install.sh: scikit-build-core in build/pip/) compiles the native core
# again with the release build's flags, so it takes the release build's objects (a third of
# that step's compile; the misses cost the release build a preprocessor run per source, about
# 12 s of CPU). ccache hashes the compiler's name, so both builds get the same CXX
# (scikit-build-core would otherwise take Python's sysconfig CXX).
# Paths below the checkout are hashed relative to it (CCACHE_BASEDIR, and the working directory
# left out of the sanitizer builds' debug-info hash), so a clone elsewhere hits the same entries.
launcher=()
if command -v ccache >/dev/null; then
  export CXX=${CXX:-c++}
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi

run_ctest() {  # <build dir> <build type> <sanitizers> [ctest -E regex]
  local dir=$1 type=$2 sanitize=$3 exclude=${4:-}
  echo "== C++ tests: $dir (${sanitize:-no sanitizers})"
  # The sanitizer builds leave the CUDA runtime out (it cannot run here and is not built for
  # them); the release build compiles and links it whenever a CUDA toolkit is found.
  # The sanitizer builds compile at -O1, the level AddressSanitizer's manual suggests, with
  # line tables only (-g1: reports keep file:line): at -O2 -g, ASan + UBSan took twice as long
  # to compile.
  local cuda=AUTO flags=("${launcher[@]}")
  if [[ -n "$sanitize" ]]; then
    cuda=OFF
    flags+=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
            -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG")
  fi
  cmake -S ccsrc -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$type" -DHPS_SANITIZE="$sanitize" \
    -DHPS_CUDA="$cuda" "${flags[@]}" >/dev/null
  cmake --build "$dir"
  ctest --test-dir "$dir" -j2 --output-on-failure --timeout 300 ${exclude:+-E "$exclude"}
}

run_ctest build Release ""
if ((!quick)); then
  bash scripts/thread_safety.sh
fi
if ((sanitizers)); then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    run_ctest build-asan RelWithDebInfo "address,undefined"
  # Under TSan the 8-PE byte matrices of all_gather and all_to_all took 10-20 s each (a
  # minute of the step): they run in the release and ASan builds, and their 4-PE forms, with
  # the same threads per PE, run here.
  # UCX is not instrumented: reports through its libraries are suppressed (scripts/tsan.supp).
  TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/scripts/tsan.supp" \
    run_ctest build-tsan RelWithDebInfo "thread" \
    '^Pes/(AllGather|AllToAll)Test\..*/8$'
fi
if ((fuzz)); then
  # 30 s per harness here (scripts/fuzz.sh alone: 60), side by side: keeps the test command
  # under 25 minutes on a 2-core machine; the committed corpus is replayed by every ctest.
  HPS_FUZZ_SECONDS=${HPS_FUZZ_SECONDS:-30} bash scripts/fuzz.sh
fi

if ((${#launcher[@]})); then
  # CMake reads the launcher when build/pip/ is first configured (a fresh clone, as in CI).
  CMAKE_CXX_COMPILER_LAUNCHER=ccache bash scripts/install.sh
else
  bash scripts/install.sh
fi
echo "== Python system tests"
"$PYTHON" -m pytest tests/python -q
if ((quick)); then
  echo "== quick tier passed (CI also runs the thread-safety analysis, the sanitizers, the" \
       "fuzzers and the CANN-fake suite)"
  exit 0
fi

# The same package on the CANN backend, over the fake vendor library the C++ build made: the
# test files marked cann_fake (RMA, allocation, lifecycle, leaks, collectives, signals, teams,
# diagnostics, MegaMoE); tests of the host backend's own behaviour in them are marked host_only
# and skipped there. They run with NPU tensors: HPS_TEST_FAKE_NPU=1 makes every PE import the
# fake NPU device (tests/fake_npu, a stand-in torch_npu found through PYTHONPATH) and take NPU
# rank % device count, so shmem.empty returns NPU tensors, every operation is enqueued on the
# current NPU stream, and the tests' local operands go to the NPU too (helpers.device()). The
# fake device's C++ extension is built once first (its first import, about a minute, into
# tests/fake_npu/build/), not by eight PEs at once.
fake_cann="$PWD/build/backends/cann/fake_cann/libhps_fake_cann_v1_5.so"
fake_npu_env=(HPS_TEST_FAKE_NPU=1 PYTHONPATH="$PWD/tests/fake_npu${PYTHONPATH:+:$PYTHONPATH}"
              HYPER_PARALLEL_SHMEM_BACKEND=cann HYPER_PARALLEL_SHMEM_CANN_LIBRARY="$fake_cann"
              HYPER_PARALLEL_SHMEM_ACL_LIBRARY="$fake_cann")
echo "== building the fake NPU device's extension (tests/fake_npu)"
env "${fake_npu_env[@]}" "$PYTHON" -c "import torch_npu"
echo "== Python system tests on the CANN backend with NPU tensors (fake vendor library and" \
     "fake NPU device: no NPU here)"
env "${fake_npu_env[@]}" "$PYTHON" -m pytest -q -m cann_fake tests/python
echo "== all tests passed"
