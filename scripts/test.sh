#!/usr/bin/env bash
# Runs every test: the C++ unit and multi-process tests (GoogleTest under ctest) in a release
# build, then again under AddressSanitizer + UndefinedBehaviorSanitizer and under
# ThreadSanitizer. Installs what it needs first. Build trees go to build/, build-asan/ and
# build-tsan/ in the repository.
#
#   bash scripts/test.sh                  everything
#   bash scripts/test.sh --no-sanitizers  the release build only (quicker, for development)
set -euo pipefail
cd "$(dirname "$0")/.."

sanitizers=1
for arg in "$@"; do
  case "$arg" in
    --no-sanitizers) sanitizers=0 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
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
echo "== all tests passed"
