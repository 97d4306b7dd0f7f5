#!/usr/bin/env bash
# Builds and runs the OpenSHMEM community's own suites, unchanged, against this project's C API
# and against Open MPI's OSHMEM, and prints one table of both (docs/openshmem.md, "The
# community's suites"):
#   - OSU micro-benchmarks 7.4, OpenSHMEM part: the 14 programs at 2 PEs, the collectives also
#     at 4 (a run passes when it exits 0);
#   - tests-uh, C feature tests, under its own test runner (common/testrunner.pl);
#   - tests-sos: unit, spec-example, performance and apps, every program at 2 PEs (exit 0 pass,
#     77 skip, anything else fail; 60 s each).
#
# The suites' sources are not part of the project: they are read from the folder
# $HPS_PEER_SUITES (default: the suites' folder beside the checkout, docs/openshmem.md),
# copied to a scratch folder and built there. Without that folder the script says so and exits 0. The suites'
# runners call oshcc and oshrun: each implementation gets a private PATH folder where those names
# are its own tools (hps-oshcc and hps-oshrun for the project), never the system's.
#
# Usage: bash scripts/peer_suites.sh [--only hps|oshmem] [--keep]
#   HPS_PEER_SUITES       the suites' folder
#   HPS_PEER_SUITES_WORK  the scratch folder (default: a new temporary one, removed unless --keep)
# Exit status: 1 when the project misses a bar the README states (OSU 14 of 14 and the
# collectives at 4 PEs, tests-uh 19 of 19, tests-sos at least 160 passing), else 0.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SUITES=${HPS_PEER_SUITES:-$(dirname "$ROOT")/shared/peer-suites}
ONLY=""
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --only) ONLY=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "peer_suites.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

if [ ! -d "$SUITES/osu-micro-benchmarks-7.4" ] || [ ! -d "$SUITES/tests-uh" ] || [ ! -d "$SUITES/tests-sos" ]; then
  echo "peer suites: no suites at $SUITES (set HPS_PEER_SUITES); nothing to run, skipping"
  exit 0
fi
SUITES=$(cd "$SUITES" && pwd)

# What the suites need: autotools for tests-sos, perl for tests-uh's runner, Open MPI's OSHMEM.
need=()
for tool in autoconf:autoconf automake:automake libtoolize:libtool perl:perl make:make; do
  command -v "${tool%%:*}" > /dev/null || need+=("${tool#*:}")
done
if [ "$ONLY" != hps ] && ! command -v oshcc > /dev/null; then need+=(openmpi-bin libopenmpi-dev); fi
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]}"
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}") > /dev/null \
      || { echo "peer suites: could not install ${need[*]}" >&2; exit 1; }
  else
    echo "peer suites: ${need[*]} missing and not root to install them" >&2; exit 1
  fi
fi
SCRIPTS=$(python3 -c "import sysconfig; print(sysconfig.get_path('scripts'))")
if [ "$ONLY" != oshmem ] && [ ! -x "$SCRIPTS/hps-oshcc" ]; then
  bash scripts/install.sh || exit 1
fi

WORK=${HPS_PEER_SUITES_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/hps-peer-suites.XXXXXX")}
mkdir -p "$WORK"
[ "$KEEP" = 1 ] || [ -n "${HPS_PEER_SUITES_WORK:-}" ] || trap 'rm -rf "$WORK"' EXIT
RESULTS=$WORK/results.tsv
: > "$RESULTS"
echo "== peer suites from $SUITES, built in $WORK"

# A private bin folder whose oshcc, oshc++ and oshrun are implementation $1's.
make_bin() {
  local impl=$1 bin=$WORK/$1/bin
  mkdir -p "$bin"
  if [ "$impl" = hps ]; then
    for pair in oshcc:hps-oshcc oshc++:hps-oshc++ oshrun:hps-oshrun; do
      printf '#!/bin/sh\nexec "%s/%s" "$@"\n' "$SCRIPTS" "${pair#*:}" > "$bin/${pair%%:*}"
    done
  else
    # Open MPI 4.1 as root, with the workaround for its crash at exit (open-mpi/ompi#11604) and
    # the heap size variable it reads.
    for tool in oshcc oshc++; do printf '#!/bin/sh\nexec /usr/bin/%s "$@"\n' "$tool" > "$bin/$tool"; done
    cat > "$bin/oshrun" <<'EOF'
#!/bin/sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_osc=^rdma
export SHMEM_SYMMETRIC_HEAP_SIZE=${SHMEM_SYMMETRIC_HEAP_SIZE:-1G}
exec /usr/bin/oshrun --oversubscribe "$@"
EOF
  fi
  chmod +x "$bin"/*
  echo "$bin"
}

# record SUITE IMPL PROGRAM STATUS DETAIL
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >> "$RESULTS"; }
status_of() {  # exit code -> pass | skip | timeout | fail
  case "$1" in 0) echo pass ;; 77) echo skip ;; 124|137) echo timeout ;; *) echo fail ;; esac
}
last_line() { grep -v '^\s*$' "$1" 2> /dev/null | tail -1 | cut -c1-160 | tr '\t' ' '; }

run_osu() {
  local impl=$1 bin=$2 dir=$WORK/$1/osu src=$SUITES/osu-micro-benchmarks-7.4/c
  mkdir -p "$dir"
  local p2p="put get put_nb get_nb put_overlap put_mr put_mr_nb get_mr_nb atomics"
  local coll="barrier broadcast collect fcollect reduce"
  for prog in $p2p $coll; do
    if ! PATH=$bin:$PATH oshcc -O2 -DOSHM_1_3 -I"$src/util" "$src/openshmem/osu_oshm_$prog.c" \
         "$src/util/osu_util.c" "$src/util/osu_util_pgas.c" -lm -o "$dir/osu_oshm_$prog" \
         > "$dir/$prog.build.log" 2>&1; then
      record osu "$impl" "osu_oshm_$prog" "not built" "$(last_line "$dir/$prog.build.log")"
      continue
    fi
    local runs="2"
    case " $coll " in *" $prog "*) runs="2 4" ;; esac
    for np in $runs; do
      local args=""
      case " $p2p " in *" $prog "*) args=heap ;; esac
      (cd "$dir" && PATH=$bin:$PATH timeout -k 5 300 oshrun -np "$np" ./osu_oshm_$prog $args \
         > "$dir/$prog.$np.log" 2>&1)
      local rc=$?
      record osu "$impl" "osu_oshm_$prog@${np}" "$(status_of $rc)" "exit $rc: $(last_line "$dir/$prog.$np.log")"
    done
  done
}

run_uh() {
  local impl=$1 bin=$2 dir=$WORK/$1/tests-uh
  cp -r "$SUITES/tests-uh" "$dir"
  (cd "$dir/feature_tests/C" && PATH=$bin:$PATH make -k CC=oshcc > build.log 2>&1)
  (cd "$dir/feature_tests/C" && PATH=$bin:$PATH timeout -k 5 900 ../../common/testrunner.pl \
     > run.log 2>&1)
  # The runner prints "(test_NNN) Running X.x: <what it tests>... OK" (or "Failed") per test.
  grep -E '^\(test_[0-9]+\) Running ' "$dir/feature_tests/C/run.log" | while read -r line; do
    local name verdict
    name=$(echo "$line" | sed -E 's/^\(test_[0-9]+\) Running ([^:]+):.*/\1/')
    verdict=$(echo "$line" | awk '{print $NF}')
    if [ "$verdict" = OK ]; then record tests-uh "$impl" "$name" pass ""; else
      record tests-uh "$impl" "$name" fail "$verdict"; fi
  done
}

run_sos() {
  local impl=$1 bin=$2 dir=$WORK/$1/tests-sos
  cp -r "$SUITES/tests-sos" "$dir"
  (cd "$dir" && ./autogen.sh > autogen.log 2>&1 \
     && PATH=$bin:$PATH ./configure CC=oshcc CXX=oshc++ --disable-fortran --enable-threads \
          --enable-lengthy-tests --enable-deprecated-tests > configure.log 2>&1) \
    || { record tests-sos "$impl" configure fail "$(last_line "$dir/configure.log")"; return; }
  (cd "$dir" && PATH=$bin:$PATH make -k -j2 check TESTS= > build.log 2>&1)
  # Every program of the four parts, run one by one so that those that did not build are counted.
  local part
  for part in unit spec-example performance/tests performance/shmem_perf_suite apps; do
    local tests
    tests=$(make -s -C "$dir/test/$part" -f Makefile -f - print-tests <<< 'print-tests: ; @echo $(TESTS)' 2> /dev/null)
    for prog in $tests; do
      if [ ! -x "$dir/test/$part/$prog" ]; then
        record tests-sos "$impl" "$part/$prog" "not built" "$(grep -m1 -E "$prog\.(c|cpp|cxx):[0-9]+:[0-9]+: error" "$dir/build.log" | cut -c1-160)"
        continue
      fi
      (cd "$dir/test/$part" && PATH=$bin:$PATH timeout -k 5 60 oshrun -np 2 "./$prog" > "$prog.out" 2>&1)
      local rc=$?
      record tests-sos "$impl" "$part/$prog" "$(status_of $rc)" "exit $rc: $(last_line "$dir/test/$part/$prog.out")"
    done
  done
}

for impl in hps oshmem; do
  [ -n "$ONLY" ] && [ "$ONLY" != "$impl" ] && continue
  bin=$(make_bin "$impl")
  start=$(date +%s)
  echo "== $impl: OSU"; run_osu "$impl" "$bin"
  echo "== $impl: tests-uh"; run_uh "$impl" "$bin"
  echo "== $impl: tests-sos"; run_sos "$impl" "$bin"
  echo "== $impl: done in $(( $(date +%s) - start )) s"
done

python3 - "$RESULTS" "$ONLY" <<'EOF'
import collections, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
impls = [i for i in ("hps", "oshmem") if not sys.argv[2] or sys.argv[2] == i]
names = {"hps": "Hyper-Parallel SHMEM", "oshmem": "Open MPI OSHMEM"}
count = collections.defaultdict(collections.Counter)
for suite, impl, prog, status, detail in rows:
    count[(suite, impl)][status] += 1
print("\n| suite | " + " | ".join(names[i] for i in impls) + " |")
print("|---|" + "---|" * len(impls))
for suite in ("osu", "tests-uh", "tests-sos"):
    cells = []
    for impl in impls:
        c = count[(suite, impl)]
        total = sum(c.values())
        extra = ", ".join(f"{c[k]} {k}" for k in ("fail", "timeout", "not built", "skip") if c[k])
        cells.append(f"{c['pass']}/{total} pass" + (f" ({extra})" if extra else ""))
    print(f"| {suite} | " + " | ".join(cells) + " |")
for impl in impls:
    bad = [r for r in rows if r[1] == impl and r[3] not in ("pass",)]
    if bad:
        print(f"\n{names[impl]}: what did not pass")
        for suite, _, prog, status, detail in bad:
            print(f"  {suite:9} {prog:45} {status:9} {detail}")
if "hps" in impls:
    c = {s: count[(s, "hps")] for s in ("osu", "tests-uh", "tests-sos")}
    misses = []
    if c["osu"]["pass"] < 19: misses.append(f"OSU runs {c['osu']['pass']}/19")
    if c["tests-uh"]["pass"] < 19: misses.append(f"tests-uh {c['tests-uh']['pass']}/19")
    if c["tests-sos"]["pass"] < 160: misses.append(f"tests-sos {c['tests-sos']['pass']} < 160")
    if misses:
        print("\npeer suites: below the bar: " + "; ".join(misses))
        sys.exit(1)
    print("\npeer suites: the project meets its bars (OSU 19 runs, tests-uh 19, tests-sos >= 160)")
EOF
