#!/usr/bin/env python3
"""Runs hps_cuda_bench and checks what it prints (ctest).

Usage: check_cuda_bench.py BENCH [ARGS...]

Passes when the benchmark exits 0 and its stdout is JSON objects, one a line, each with the
fields of a measurement, and holds every measurement it promises: memcpy_d2d and put for every
put size, pingpong and pingpong_stream, all_gather for every gather size. Exit 77 (no usable
device; only without --fake) passes through, after checking that the reason is one line: ctest
reports the test as skipped.
"""
import json
import math
import subprocess
import sys

FIELDS = {"bench": str, "layer": str, "pes": int, "name": str, "size": int, "value": float,
          "unit": str, "median_us": float, "min_us": float, "max_us": float, "iters": int,
          "reps": int}
UNITS = {"memcpy_d2d": "GB/s", "put": "GB/s", "pingpong": "us", "pingpong_stream": "us",
         "all_gather": "GB/s"}
WITH_RATIO = {"put", "all_gather"}


def option(args, name, default):
    return args[args.index(name) + 1] if name in args else default


def fail(problem, output=""):
    print(f"check_cuda_bench: {problem}\n{output}", file=sys.stderr)
    return 1


def main() -> int:
    bench, args = sys.argv[1], sys.argv[2:]
    run = subprocess.run([bench] + args, capture_output=True, text=True, timeout=300)
    sys.stderr.write(run.stderr)
    if run.returncode == 77:
        lines = run.stderr.strip().splitlines()
        if "--fake" in args or len(lines) != 1:
            return fail("exit 77 must come without --fake and with a one-line reason", run.stderr)
        print(lines[0])
        return 77
    if run.returncode != 0:
        return fail(f"exit status {run.returncode}", run.stdout)
    pes = int(option(args, "--pes", "2"))
    layer = "fake" if "--fake" in args else "real"
    seen = set()
    for number, line in enumerate(run.stdout.splitlines(), 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            return fail(f"line {number} is not JSON ({error}): {line}")
        if not isinstance(record, dict):
            return fail(f"line {number} is not an object: {line}")
        for field, kind in FIELDS.items():
            value = record.get(field)
            ok = isinstance(value, (int, float)) if kind is float else isinstance(value, kind)
            if not ok or isinstance(value, bool):
                return fail(f"line {number}: {field} must be a {kind.__name__}: {line}")
        name = record["name"]
        if record["bench"] != "cuda_bench" or record["layer"] != layer or record["pes"] != pes:
            return fail(f"line {number}: bench, layer or pes wrong: {line}")
        if UNITS.get(name) != record["unit"]:
            return fail(f"line {number}: unknown measurement or unit: {line}")
        if not (record["value"] > 0 and math.isfinite(record["value"]) and
                0 < record["min_us"] <= record["median_us"] <= record["max_us"]):
            return fail(f"line {number}: the figures are not positive and ordered: {line}")
        ratio = record.get("ratio", "missing")
        if name in WITH_RATIO and not (isinstance(ratio, (int, float)) and ratio > 0):
            return fail(f"line {number}: {name} needs a positive ratio: {line}")
        if name not in WITH_RATIO and ratio is not None:
            return fail(f"line {number}: {name} has no baseline, so its ratio is null: {line}")
        seen.add((name, record["size"]))
    put_sizes = [int(s) for s in option(args, "--put-sizes", "65536,1048576,16777216,67108864").split(",")]
    gather_sizes = [int(s) for s in option(args, "--gather-sizes", "1048576,16777216").split(",")]
    expected = {("put", s) for s in put_sizes} | {("memcpy_d2d", s) for s in put_sizes + gather_sizes}
    expected |= {("all_gather", s) for s in gather_sizes}
    expected |= {("pingpong", 8), ("pingpong_stream", 8)}
    if seen != expected:
        return fail(f"missing {sorted(expected - seen)}, unexpected {sorted(seen - expected)}",
                    run.stdout)
    print(f"check_cuda_bench: {len(run.stdout.splitlines())} valid JSON lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
