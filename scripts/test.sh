#!/usr/bin/env bash
# Runs every test, installing what it needs first:
#   1. C++ unit and multi-process tests (GoogleTest under ctest), release build (the fuzz
#      harnesses' committed corpus is replayed here too);
#   2. the same under AddressSanitizer + UndefinedBehaviorSanitizer, and under ThreadSanitizer;
#   3. the libFuzzer harnesses (scripts/fuzz.sh), each for HPS_FUZZ_SECONDS (default 60);
#   4. the Python system tests (pytest, PEs as processes, gloo on loopback) on the installed
#      package.
# Build trees go to build/, build-asan/, build-tsan/, build-fuzz/ and build/pip/.
#
#   bash scripts/test.sh                  everything
#   bash scripts/test.sh --no-sanitizers  skip step 2 (quicker, for development)
#   bash scripts/test.sh --no-fuzz        skip step 3
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

sanitizers=1
fuzz=1
for arg in "$@"; do
  case "$arg" in
    --no-sanitizers) sanitizers=0 ;;
    --no-fuzz) fuzz=0 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg (try --help)" >&2; exit 2 ;;
  esac
done

bash scripts/setup_deps.sh

run_ctest() {  # <build dir> <build type> <sanitizers>
  local dir=$1 type=$2 sanitize=$3
  echo "== C++ tests: $dir (${sanitize:-no sanitizers})"
  cmake -S ccsrc -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$type" -DHPS_SANITIZE="$sanitize" >/dev/null
  cmake --build "$dir"
  ctest --test-dir "$dir" -j2 --output-on-failure --timeout 300
}

run_ctest build Release ""
if ((sanitizers)); then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    run_ctest build-asan RelWithDebInfo "address,undefined"
  TSAN_OPTIONS=halt_on_error=1 run_ctest build-tsan RelWithDebInfo "thread"
fi
if ((fuzz)); then
  bash scripts/fuzz.sh
fi

bash scripts/install.sh
echo "== Python system tests"
"$PYTHON" -m pytest tests/python -q
echo "== all tests passed"
