#!/usr/bin/env bash
# Fuzzes configuration parsing and the heap/registry bookkeeping with libFuzzer under ASan +
# UBSan (ccsrc/fuzz/), installing clang and its libFuzzer runtime first when missing (as root).
# Each harness runs for HPS_FUZZ_SECONDS (default 60), side by side with the others (one per
# core), from a temporary copy of its committed seed corpus (ccsrc/fuzz/corpus/<harness>/), so
# the repository's corpus never grows. Prints
# one summary line per harness; exits non-zero if any harness crashed, keeping the input in
# build-fuzz/crashes/<harness>/ and the log in build-fuzz/<harness>.log.
#
#   bash scripts/fuzz.sh                          every harness (config, allocator)
#   bash scripts/fuzz.sh allocator                only the named ones
#   HPS_FUZZ_SECONDS=600 bash scripts/fuzz.sh     longer runs
# Reproduce a crash with: build-fuzz/fuzz/<harness>_fuzz build-fuzz/crashes/<harness>/<file>
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${HPS_FUZZ_SECONDS:-60}
BUILD=build-fuzz

harnesses=()
for arg in "$@"; do
  case "$arg" in
    config|allocator) harnesses+=("$arg") ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg (try --help)" >&2; exit 2 ;;
  esac
done
((${#harnesses[@]})) || harnesses=(config allocator)

# Links a trivial fuzz target: proves clang++ and its libFuzzer and sanitizer runtimes are there.
libfuzzer_works() {
  command -v clang++ >/dev/null || return 1
  local probe rc=0
  probe=$(mktemp -d)
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
    >"$probe/probe.cc"
  clang++ -fsanitize=fuzzer,address,undefined "$probe/probe.cc" -o "$probe/probe" \
    >/dev/null 2>&1 || rc=1
  rm -rf "$probe"
  return $rc
}

# Debian names the runtime after clang's major version (libclang-rt-14-dev on Debian 12).
runtime_package() {
  local major=14
  if command -v clang++ >/dev/null; then
    major=$(clang++ --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1)
  fi
  echo "libclang-rt-${major}-dev"
}

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "$@" >/dev/null 2>&1 || {
    apt-get update -qq
    apt-get install -y -qq "$@" >/dev/null
  }
}

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
[[ -f /usr/include/gtest/gtest.h ]] || missing+=(libgtest-dev)  # the test build needs it
command -v clang++ >/dev/null || missing+=(clang)
libfuzzer_works || missing+=("$(runtime_package)")
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "missing system packages for libFuzzer builds: ${missing[*]}" \
         "(run as root, or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "installing system packages: ${missing[*]}"
  apt_install "${missing[@]}"
  if ! libfuzzer_works; then
    # Installing clang just now may have fixed the version the runtime package needs.
    apt_install "$(runtime_package)"
    libfuzzer_works || { echo "clang++ -fsanitize=fuzzer still does not link" >&2; exit 1; }
  fi
fi

echo "== building the fuzz harnesses in $BUILD (clang, libFuzzer + ASan + UBSan)"
# Through ccache when it is there: a later run recompiles only what changed.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S ccsrc -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release \
  -DHPS_FUZZ=ON -DHPS_BUILD_TESTS=ON -DHPS_BUILD_DEMO=OFF -DHPS_CUDA=OFF "${launcher[@]}" >/dev/null
targets=()
for name in "${harnesses[@]}"; do targets+=("${name}_fuzz"); done
cmake --build "$BUILD" --target "${targets[@]}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One harness from a copy of its corpus; its exit code goes to $work/<name>.rc.
fuzz_one() {
  local name=$1 rc=0
  mkdir -p "$work/$name" "$BUILD/crashes/$name"
  cp -R "ccsrc/fuzz/corpus/$name/." "$work/$name/"
  # -timeout: an input that runs this long is a hang and is reported like a crash.
  "$BUILD/fuzz/${name}_fuzz" -max_total_time="$FUZZ_SECONDS" -timeout=30 \
    -print_final_stats=1 -artifact_prefix="$BUILD/crashes/$name/" "$work/$name" \
    >"$BUILD/$name.log" 2>&1 || rc=$?
  echo "$rc" >"$work/$name.rc"
}

# The harnesses run side by side, one per core (libFuzzer's run is single-threaded), so each
# still gets FUZZ_SECONDS of a core of its own while the whole step takes less.
cores=$(nproc)
running=0
for name in "${harnesses[@]}"; do
  echo "== fuzzing $name for ${FUZZ_SECONDS}s"
  fuzz_one "$name" &
  running=$((running + 1))
  if ((running >= cores)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

failed=0
summary=()
for name in "${harnesses[@]}"; do
  log="$BUILD/$name.log"
  rc=$(cat "$work/$name.rc" 2>/dev/null || echo 1)
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  per_second=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  if ((rc == 0)); then
    summary+=("$name: ${executions:-?} executions (${per_second:-?}/s), nothing found")
  else
    failed=1
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    found="FOUND A CRASH (exit $rc): input ${artifact:-not saved}, log $log"
    summary+=("$name: ${executions:-?} executions (${per_second:-?}/s), $found")
    # What broke: a harness property (and its detail line) or a sanitizer report.
    grep -A1 "fuzz property violated" "$log" | head -n 2 >&2 || true
    grep -E "^==[0-9]+==ERROR|^SUMMARY: " "$log" | head -n 4 >&2 || true
  fi
done

echo "== fuzz summary"
printf '%s\n' "${summary[@]}"
exit "$failed"
