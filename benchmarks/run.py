"""The benchmark suite: Hyper-Parallel SHMEM on the host backend beside its peers, in one run.

    python benchmarks/run.py [--quick] [--contended] [--moe | --moe-only] [--out DIR]
                             [--symm-mem | --symm-mem-only] [--no-oshmem] [--no-python]

Peers measured in the same run, reported as ratios:
  memcpy      a single-threaded local copy of the same size (the limit), interleaved with
              the native put/get repetitions so both see the same noise;
  hps_native  the runtime from C++ (benchmarks/native/shmem_bench.cc), no Python;
  hps_python  the runtime through the Python API (benchmarks/python_bench.py);
  hps_op      the same put through the custom op torch.ops.hps.put that a compiled function
              calls (put_overhead only: its cost beside the eager call's, as a ratio);
  gloo        torch.distributed over gloo: send/recv, barrier, all_gather_into_tensor,
              all_to_all_single;
  oshmem      OpenMPI's OSHMEM doing the same patterns (benchmarks/native/oshmem_bench.c),
              skipped with a message when OpenMPI is not installed.
Each figure is the median of the repetitions after warm-up (min and max kept as spread).
--contended adds a scenario: the latency patterns (ping-pong, barrier) again, each with one
CPU-bound process (a hog) running beside the job for its whole length, ours and OSHMEM's
alike; its rows carry scenario "contended".
--moe adds the MegaMoE suite (benchmarks/moe.py): the training step of a small MoE decoder on
SHMEM against all-to-all over gloo, dispatch + combine alone, a sweep of the expert size;
--moe-only runs just that suite.
--symm-mem adds torch's symmetric-memory API on the HPS CPU backend (benchmarks/symm_mem_bench.py):
torch.ops.symm_mem's all-reduces, reduce-scatter and all-to-alls against gloo's equivalents,
and a MoE layer written against that API beside MegaMoE and the all-to-all layer, at 2 and 4
PEs; --symm-mem-only runs just that (with --moe-only: both suites).
Output: a table and the targets on stdout, DIR/results.json (DIR/moe_results.json for the
MegaMoE suite, DIR/symm_mem_results.json for the symm_mem one), and PNG plots in DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

import moe
import symm_mem_report
from units import KIB, MIB, human

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.join(ROOT, "build", "bench")


# ---- what to run ---------------------------------------------------------------------------

def plan(quick: bool) -> dict:
    if quick:
        return {"rma": [8, 4 * KIB, MIB, 16 * MIB], "small": [8, 4 * KIB],
                "gather": [4 * KIB, MIB, 16 * MIB], "free": [4 * KIB, MIB, 16 * MIB], "reps": 5,
                "min_us": 4000, "gloo_min_us": 4000}
    return {"rma": [8, 64, 512, 4 * KIB, 32 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB, 64 * MIB],
            "small": [8, 64, 512, 4 * KIB],
            "gather": [4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB, 64 * MIB],
            "free": [4 * KIB, 256 * KIB, 4 * MIB, 64 * MIB],
            "reps": 7, "min_us": 30000, "gloo_min_us": 30000}


def sizes(values: list) -> str:
    return ",".join(str(v) for v in values)


def jobs(p: dict, oshmem: str | None, with_python: bool, contended: bool) -> list:
    """The measurements as (label, command, scenario), grouped by pattern so that each peer
    runs right beside ours."""
    native = os.path.join(BUILD, "shmem_bench")
    common = ["--reps", str(p["reps"]), "--min-time-us", str(p["min_us"])]
    osh = (["oshrun", "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
           if oshmem else None)
    launch = [sys.executable, "-m", "hyper_parallel.core.multicore.shmem.launch"]
    script = os.path.join(HERE, "python_bench.py")

    def hps(test, pes, values):
        return (f"native {test} x{pes}", [native, "--test", test, "--pes", str(pes), "--sizes",
                                          sizes(values)] + common)

    def peer(test, pes, values):
        return [(f"oshmem {test} x{pes}", osh + ["-np", str(pes), oshmem, "--test", test,
                                                 "--sizes", sizes(values)] + common)] if osh else []

    def python(test, pes, values, min_us=None):
        if not with_python:
            return []
        return [(f"python {test} x{pes}",
                 launch + ["--nproc", str(pes), "--timeout", "900", script, "--test", test,
                           "--sizes", sizes(values), "--reps", str(p["reps"]),
                           "--min-time-us", str(min_us or p["min_us"])])]

    cores = os.cpu_count() or 1
    out = [("memcpy", [native, "--test", "memcpy", "--pes", "1", "--sizes", sizes(p["rma"])] + common)]
    # Copies on every core at once: what the cores move together (all_gather's bound).
    if cores > 1:
        out.append((f"memcpy x{cores} at once", [native, "--test", "memcpy", "--pes", str(cores),
                                                 "--sizes", sizes(p["gather"])] + common))
    for test in ("put", "get"):
        out += [hps(test, 2, p["rma"])] + peer(test, 2, p["rma"]) + python(test, 2, p["rma"])
    out += python("gloo_sendrecv", 2, p["rma"], p["gloo_min_us"])
    out += [hps("pingpong", 2, p["small"]), hps("pingpong_fused", 2, p["small"])]
    out += peer("pingpong", 2, p["small"]) + python("pingpong", 2, p["small"])
    out += python("gloo_pingpong", 2, p["small"], p["gloo_min_us"])
    for pes in (2, 4):
        out += [hps("barrier", pes, [0])] + peer("barrier", pes, [0])
        out += python("barrier", pes, [0]) + python("gloo_barrier", pes, [0], p["gloo_min_us"])
    for pes in (2, 4):
        # Open MPI 4.1's shmem_malloc refuses the 256 MiB output of a 64 MiB x 4 fcollect,
        # whatever SHMEM_SYMMETRIC_SIZE says; the peer stops at 16 MiB per PE there.
        fcollect = [size for size in p["gather"] if pes * size <= 128 * MIB]
        out += [hps("allgather", pes, p["gather"])] + peer("fcollect", pes, fcollect)
        out += python("allgather", pes, p["gather"])
        out += python("gloo_allgather", pes, p["gather"], p["gloo_min_us"])
    for pes in (2, 4):
        out += python("alltoall", pes, p["gather"])
        out += python("gloo_alltoall", pes, p["gather"], p["gloo_min_us"])
    out += python("put_overhead", 2, [8]) + python("overlap", 2, [64 * MIB], 4 * p["min_us"])
    # What freeing costs now that free poisons the block: empty + free beside a fill.
    out += python("empty_free", 2, p["free"]) + python("fill", 2, p["free"])
    scenario = [(label, command, "idle") for label, command in out]
    if contended:
        busy = [hps("pingpong", 2, p["small"]), hps("pingpong_fused", 2, p["small"])]
        busy += peer("pingpong", 2, p["small"]) + python("pingpong", 2, p["small"])
        for pes in (2, 4):
            busy += [hps("barrier", pes, [0])] + peer("barrier", pes, [0])
        scenario += [(label + " (contended)", command, "contended") for label, command in busy]
    return scenario


# ---- running -------------------------------------------------------------------------------

def progress(done: int, total: int, label: str, started: float) -> None:
    """A progress bar on stderr: redrawn in place on a terminal, one line per step otherwise."""
    width = 30
    filled = int(width * done / max(total, 1))
    elapsed = time.monotonic() - started
    text = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {elapsed:5.0f}s {label[:40]:<40}"
    if sys.stderr.isatty():
        sys.stderr.write("\r" + text + ("\n" if done == total else ""))
    else:
        sys.stderr.write(text.rstrip() + "\n")
    sys.stderr.flush()


class CpuHog:
    """One CPU-bound process beside a job (like `yes > /dev/null`), for the contended scenario."""

    def __enter__(self) -> "CpuHog":
        self._process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        return self

    def __exit__(self, *exc) -> None:
        self._process.kill()
        self._process.wait()


def run_job(label: str, command: list, env: dict, scenario: str = "idle") -> tuple:
    """Returns (records, problem or None), the records tagged with the scenario. OSHMEM's crash
    after its final line is the known Open MPI 4.1.4 shmem_finalize bug and does not count as
    a failure."""
    try:
        if scenario == "contended":
            with CpuHog():
                done = subprocess.run(command, capture_output=True, text=True, timeout=1800,
                                      env=env, cwd=ROOT)
        else:
            done = subprocess.run(command, capture_output=True, text=True, timeout=1800, env=env,
                                  cwd=ROOT)
    except subprocess.TimeoutExpired:
        return [], f"{label}: timed out after 1800 s"
    records, finished = [], False
    for line in done.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        record = json.loads(line)
        if record.get("done"):
            finished = True
        elif "samples_us" in record:
            record["scenario"] = scenario
            records.append(record)
    if done.returncode != 0 and not (label.startswith("oshmem") and finished):
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        return records, f"{label}: exit code {done.returncode}: " + " | ".join(tail)
    return records, None


def build_native() -> None:
    subprocess.run(["cmake", "-S", os.path.join(HERE, "native"), "-B", BUILD, "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", BUILD, "--target", "shmem_bench"], check=True,
                   capture_output=True)


def build_oshmem() -> tuple:
    if shutil.which("oshcc") is None or shutil.which("oshrun") is None:
        return None, ("OpenMPI's OSHMEM is not installed (oshcc/oshrun missing): the OSHMEM "
                      "peer is skipped; install Debian's openmpi-bin and libopenmpi-dev for it")
    binary = os.path.join(BUILD, "oshmem_bench")
    built = subprocess.run(["oshcc", "-O2", "-o", binary,
                            os.path.join(HERE, "native", "oshmem_bench.c")],
                           capture_output=True, text=True)
    if built.returncode != 0:
        return None, "building the OSHMEM peer failed: " + built.stderr.strip()[-300:]
    return binary, None


# ---- results -------------------------------------------------------------------------------

def merge(records: list) -> list:
    """Joins the repetitions of one measurement taken in different rounds."""
    merged: dict = {}
    for r in records:
        key = (r["impl"], r["test"], r["pes"], r["bytes"], r.get("scenario", "idle"))
        if key not in merged:
            merged[key] = dict(r, samples_us=list(r["samples_us"]),
                               **({"memcpy_us": list(r["memcpy_us"])} if "memcpy_us" in r else {}))
            continue
        merged[key]["samples_us"] += r["samples_us"]
        if "memcpy_us" in r:
            merged[key]["memcpy_us"] += r["memcpy_us"]
    return list(merged.values())


def summarise(records: list) -> list:
    rows = []
    for r in merge(records):
        samples = r["samples_us"]
        row = {"impl": r["impl"], "test": r["test"], "pes": r["pes"], "bytes": r["bytes"],
               "scenario": r.get("scenario", "idle"),
               "iters": r["iters"], "median_us": statistics.median(samples),
               "min_us": min(samples), "max_us": max(samples), "samples_us": samples}
        if "memcpy_us" in r:
            row["memcpy_median_us"] = statistics.median(r["memcpy_us"])
            row["memcpy_samples_us"] = r["memcpy_us"]
        rows.append(row)
    return rows


def find(rows: list, impl: str, test: str, pes: int, size: int,
         scenario: str = "idle") -> dict | None:
    for row in rows:
        if (row["impl"], row["test"], row["pes"], row["bytes"], row["scenario"]) == (
                impl, test, pes, size, scenario):
            return row
    return None


def table(rows: list) -> str:
    impls = ["memcpy", "hps_native", "hps_python", "hps_op", "oshmem", "gloo"]
    keyed = {}
    for row in rows:
        test = {"fcollect": "allgather", "memcpy": "copy"}.get(row["test"], row["test"])
        if row["scenario"] != "idle":
            test += f" ({row['scenario']})"
        keyed.setdefault((test, row["pes"], row["bytes"]), {})[row["impl"]] = row["median_us"]
    lines = [f"{'test':<28}{'PEs':>4}{'size':>10}" + "".join(f"{impl:>13}" for impl in impls)]
    lines.append("-" * len(lines[0]))
    for (test, pes, size), values in sorted(keyed.items()):
        cells = "".join(f"{values[i]:>11.2f}us" if i in values else f"{'-':>13}" for i in impls)
        lines.append(f"{test:<28}{pes:>4}{human(size) if size else '-':>10}{cells}")
    return "\n".join(lines)


def targets(rows: list) -> list:
    """Each target of the benchmark plan: (name, measured, goal, met)."""
    out = []

    def ratio_row(name, measured, goal, met):
        out.append({"target": name, "measured": measured, "goal": goal, "met": bool(met)})

    for test in ("put", "get"):
        for size in (16 * MIB, 64 * MIB):
            mine = find(rows, "hps_native", test, 2, size)
            if mine and "memcpy_median_us" in mine:
                ratio = mine["memcpy_median_us"] / mine["median_us"]
                ratio_row(f"{test} {human(size)}: bandwidth vs local copy", f"{ratio:.2f}x",
                          ">= 0.90x", ratio >= 0.9)
            peer = find(rows, "oshmem", test, 2, size)
            if mine and peer:
                ratio = peer["median_us"] / mine["median_us"]
                ratio_row(f"{test} {human(size)}: bandwidth vs OSHMEM {test}mem", f"{ratio:.2f}x",
                          ">= 1.00x", ratio >= 1.0)
    for size in (8, 64, 512, 4 * KIB):
        peer = find(rows, "oshmem", "pingpong", 2, size)
        for test, how in (("pingpong", "put; signal"), ("pingpong_fused", "put_signal")):
            mine = find(rows, "hps_native", test, 2, size)
            if mine and peer:
                py = find(rows, "hps_python", "pingpong", 2, size) if test == "pingpong" else None
                extra = f" (Python path {py['median_us']:.2f} us)" if py else ""
                ratio_row(f"ping-pong {human(size)} ({how}): half round trip vs OSHMEM put+fence+flag",
                          f"{mine['median_us']:.3f} us vs {peer['median_us']:.3f} us{extra}",
                          "<= OSHMEM", mine["median_us"] <= peer["median_us"])
    for size in (8, 4 * KIB):
        mine = find(rows, "hps_native", "pingpong", 2, size, "contended")
        peer = find(rows, "oshmem", "pingpong", 2, size, "contended")
        if mine and peer:
            ratio = mine["median_us"] / peer["median_us"]
            ratio_row(f"ping-pong {human(size)} under one CPU hog: vs OSHMEM under the same hog",
                      f"{mine['median_us']:.3f} us vs {peer['median_us']:.3f} us ({ratio:.2f}x)",
                      "<= 2x OSHMEM", ratio <= 2)
        py = find(rows, "hps_python", "pingpong", 2, size, "contended")
        if py:
            ratio_row(f"ping-pong {human(size)} under one CPU hog, from Python: half round trip",
                      f"{py['median_us']:.2f} us", "<= 5 us", py["median_us"] <= 5)
    for pes in (2, 4):
        for scenario, how in (("idle", ""), ("contended", " under one CPU hog")):
            mine = find(rows, "hps_native", "barrier", pes, 0, scenario)
            peer = find(rows, "oshmem", "barrier", pes, 0, scenario)
            if mine and peer:
                ratio_row(f"barrier x{pes}{how}: vs shmem_barrier_all",
                          f"{mine['median_us']:.2f} us vs {peer['median_us']:.2f} us", "<= OSHMEM",
                          mine["median_us"] <= peer["median_us"])
    for pes in (2, 4):
        for size in (MIB, 16 * MIB):
            py, gloo = find(rows, "hps_python", "allgather", pes, size), find(rows, "gloo", "allgather", pes, size)
            if py and gloo:
                ratio = gloo["median_us"] / py["median_us"]
                ratio_row(f"all_gather x{pes} {human(size)}/PE: vs gloo all_gather_into_tensor",
                          f"{ratio:.1f}x faster", ">= 10x", ratio >= 10)
            mine, peer = find(rows, "hps_native", "allgather", pes, size), find(rows, "oshmem", "fcollect", pes, size)
            if mine and peer:
                ratio = peer["median_us"] / mine["median_us"]
                ratio_row(f"all_gather x{pes} {human(size)}/PE: vs OSHMEM fcollect",
                          f"{ratio:.2f}x faster", "> 1x", ratio > 1)
            copy = find(rows, "memcpy", "memcpy", 1, size)
            if mine and copy:
                busbw = size * (pes - 1) / mine["median_us"]
                copybw = size / copy["median_us"]
                bound = all_gather_bound(rows, pes, size)
                ratio_row(f"all_gather x{pes} {human(size)}/PE: bus bandwidth vs local copy",
                          f"{busbw / copybw:.2f}x = {busbw / copybw / bound:.2f} of the "
                          f"machine bound {bound:.2f}x", ">= 0.8 bound",
                          busbw / copybw >= 0.8 * bound)
    for pes in (2, 4):
        for size in (MIB, 16 * MIB):
            py, gloo = find(rows, "hps_python", "alltoall", pes, size), find(rows, "gloo", "alltoall", pes, size)
            bound = all_to_all_bound_us(rows, pes, size)
            if py and gloo:
                ratio = gloo["median_us"] / py["median_us"]
                best = f" (the copies alone allow {gloo['median_us'] / bound:.1f}x)" if bound else ""
                ratio_row(f"all_to_all x{pes} {human(size)}/PE: vs gloo all_to_all_single",
                          f"{ratio:.1f}x faster{best}", ">= 10x", ratio >= 10)
            if py and bound:
                ratio_row(f"all_to_all x{pes} {human(size)}/PE: time vs the machine bound",
                          f"{bound / py['median_us']:.2f} of it ({py['median_us']:.0f} us vs "
                          f"{bound:.0f} us)", ">= 0.8", bound / py["median_us"] >= 0.8)
    overhead = find(rows, "hps_python", "put_overhead", 2, 8)
    if overhead:
        ratio_row("8-byte put from Python: per-call overhead", f"{overhead['median_us']:.2f} us",
                  "<= 1 us", overhead["median_us"] <= 1)
    op_overhead = find(rows, "hps_op", "put_overhead", 2, 8)
    if overhead and op_overhead:
        ratio_row("8-byte put through torch.ops.hps.put (compiled path) vs the eager call",
                  f"{op_overhead['median_us'] / overhead['median_us']:.1f}x "
                  f"({op_overhead['median_us']:.2f} us vs {overhead['median_us']:.2f} us)",
                  "reported", True)
    seq = find(rows, "hps_python", "overlap_sequential", 2, 64 * MIB)
    ovl = find(rows, "hps_python", "overlap_overlapped", 2, 64 * MIB)
    if seq and ovl:
        ratio_row("64 MiB put on a stream while computing: speed-up over one after the other",
                  f"{seq['median_us'] / ovl['median_us']:.2f}x", "> 1x (reported)",
                  seq["median_us"] > ovl["median_us"])
    return out


def all_to_all_bound_us(rows: list, pes: int, size: int) -> float | None:
    """The least time an all_to_all of `size` bytes per PE can take here: every PE copies its
    `size` bytes (a block to each PE, its own included), and the PEs share the cores. Copies of
    `size` on every core at once take `together`; with more PEs than cores, each core copies
    for pes / cores PEs in turn."""
    cores = os.cpu_count() or 1
    together = find(rows, "memcpy", "memcpy", cores, size) if cores > 1 else None
    together = together or find(rows, "memcpy", "memcpy", 1, size)
    if together is None:
        return None
    return together["median_us"] * max(1.0, pes / cores)


def all_gather_bound(rows: list, pes: int, size: int) -> float:
    """The best bus bandwidth an all_gather of `size` bytes per PE can reach here, as a
    fraction of one local copy's bandwidth. Every PE copies pes * size bytes (its own slot
    too), and the PEs share min(cores, pes) cores, which together copy `together` times as fast
    as one: measured by copies on every core at once where the run has them (memory bandwidth
    makes it less than the core count for large sizes), else assumed linear. So
    bus bandwidth <= (pes - 1) * size / (pes^2 * size / (together * copy bandwidth))."""
    cores = os.cpu_count() or 1
    busy = min(cores, pes)
    together = float(busy)
    one, all_cores = find(rows, "memcpy", "memcpy", 1, size), find(rows, "memcpy", "memcpy", cores, size)
    if busy == cores and cores > 1 and one and all_cores:
        together = min(float(cores), cores * one["median_us"] / all_cores["median_us"])
    return (pes - 1) * together / pes ** 2


def plots(rows: list, out_dir: str) -> list:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written = []
    styles = {"memcpy": ("local copy (limit)", "k", "--"), "hps_native": ("hps C++", "tab:blue", "-"),
              "hps_python": ("hps Python", "tab:cyan", "-"), "oshmem": ("OSHMEM", "tab:red", "-"),
              "gloo": ("gloo", "tab:green", "-")}

    def series(impl, test, pes, scenario="idle"):
        points = sorted((r["bytes"], r) for r in rows
                        if r["impl"] == impl and r["test"] == test and r["pes"] == pes
                        and r["bytes"] > 0 and r["scenario"] == scenario)
        return [p[0] for p in points], [p[1] for p in points]

    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    for column, test in enumerate(("put", "get")):
        bw, lat = axes[0][column], axes[1][column]
        for impl, label_test, pes in (("memcpy", "memcpy", 1), ("hps_native", test, 2), ("hps_python", test, 2),
                                      ("oshmem", test, 2), ("gloo", "sendrecv", 2)):
            xs, rs = series(impl, label_test, pes)
            if not xs:
                continue
            label, color, style = styles[impl]
            if impl == "gloo":
                label += " send/recv"
            bw.plot(xs, [x / r["median_us"] / 1e3 for x, r in zip(xs, rs)], style, color=color,
                    marker="o", label=label)
            lat.plot(xs, [r["median_us"] for r in rs], style, color=color, marker="o", label=label)
        bw.set(title=f"{test}: bandwidth (GB/s)", xscale="log", yscale="log", xlabel="bytes")
        lat.set(title=f"{test}: time per call (us)", xscale="log", yscale="log", xlabel="bytes")
        bw.legend(fontsize=8)
        lat.legend(fontsize=8)
        bw.grid(True, which="both", alpha=0.3)
        lat.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out_dir, "put_get.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for column, pes in enumerate((2, 4)):
        ax = axes[column]
        for impl, test in (("hps_native", "allgather"), ("hps_python", "allgather"),
                           ("oshmem", "fcollect"), ("gloo", "allgather")):
            xs, rs = series(impl, test, pes)
            if xs:
                label, color, style = styles[impl]
                ax.plot(xs, [r["median_us"] for r in rs], style, color=color, marker="o", label=label)
        ax.set(title=f"all_gather, {pes} PEs: time per call (us)", xscale="log", yscale="log",
               xlabel="bytes per PE")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    ax = axes[2]
    for impl, test, pes in (("hps_native", "pingpong", 2), ("hps_native", "pingpong_fused", 2),
                            ("hps_python", "pingpong", 2), ("oshmem", "pingpong", 2),
                            ("gloo", "pingpong", 2)):
        xs, rs = series(impl, test, pes)
        if xs:
            label, color, style = styles[impl]
            if test == "pingpong_fused":
                label, style = label + " put_signal", ":"
            ax.plot(xs, [r["median_us"] for r in rs], style, color=color, marker="o", label=label)
    for impl in ("hps_native", "hps_python", "oshmem"):
        xs, rs = series(impl, "pingpong", 2, "contended")
        if xs:
            label, color, _ = styles[impl]
            ax.plot(xs, [r["median_us"] for r in rs], "--", color=color, marker="x",
                    label=label + " under a CPU hog")
    ax.set(title="ping-pong: half round trip (us)", xscale="log", yscale="log", xlabel="bytes")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out_dir, "all_gather_pingpong.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8))
    for column, pes in enumerate((2, 4)):
        ax = axes[column]
        for impl in ("hps_python", "gloo"):
            xs, rs = series(impl, "alltoall", pes)
            if xs:
                label, color, style = styles[impl]
                ax.plot(xs, [r["median_us"] for r in rs], style, color=color, marker="o",
                        label=label + (" all_to_all_single" if impl == "gloo" else ""))
        xs, _ = series("hps_python", "alltoall", pes)
        bounds = [(x, all_to_all_bound_us(rows, pes, x)) for x in xs]
        bounds = [(x, b) for x, b in bounds if b]
        if bounds:
            label, color, style = styles["memcpy"]
            ax.plot([x for x, _ in bounds], [b for _, b in bounds], style, color=color,
                    marker="o", label="the copies alone (bound)")
        ax.set(title=f"all_to_all, {pes} PEs: time per call (us)", xscale="log", yscale="log",
               xlabel="bytes per PE")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out_dir, "all_to_all.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer sizes and repetitions (about three minutes)")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench-results"),
                        help="folder for results.json and the plots (default: bench-results/)")
    parser.add_argument("--no-oshmem", action="store_true", help="skip the OSHMEM peer")
    parser.add_argument("--no-python", action="store_true", help="skip the Python and gloo runs")
    parser.add_argument("--contended", action="store_true",
                        help="also run the latency patterns (ping-pong, barrier) with one "
                             "CPU-bound process beside the job, ours and OSHMEM's alike")
    parser.add_argument("--rounds", type=int, default=None,
                        help="run every measurement this many times, alternating the order, and "
                             "pool the repetitions (default: 1 with --quick, else 3)")
    parser.add_argument("--moe", action="store_true",
                        help="also run the MegaMoE suite (training step, dispatch + combine, "
                             "expert-size sweep; about 6 minutes, 1 with --quick)")
    parser.add_argument("--moe-only", action="store_true", help="run only the MegaMoE suite")
    parser.add_argument("--symm-mem", action="store_true",
                        help="also run torch's symm_mem API on the HPS CPU backend against gloo, "
                             "and a MoE layer on it beside MegaMoE (about a minute)")
    parser.add_argument("--symm-mem-only", action="store_true",
                        help="run only the symm_mem suite (with --moe-only: both)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.moe_only or args.symm_mem_only:
        code = run_moe(args) if args.moe_only else 0
        if args.symm_mem or args.symm_mem_only:
            code = run_symm_mem(args) or code
        return code
    p = plan(args.quick)

    notes = []
    build_native()
    oshmem = None
    if not args.no_oshmem:
        oshmem, problem = build_oshmem()
        if problem:
            notes.append(problem)
            print(problem, file=sys.stderr)
    env = dict(os.environ)
    largest = max(p["gather"]) * 4 + max(p["rma"]) * 2
    env.setdefault("HYPER_PARALLEL_SHMEM_HEAP_SIZE", str(max(largest + 64 * MIB, 256 * MIB)))
    # OSHMEM keeps its own bookkeeping in the heap: give it twice what the data needs.
    env.setdefault("SHMEM_SYMMETRIC_SIZE", str(2 * max(largest + 64 * MIB, 256 * MIB)))
    env.setdefault("OMP_NUM_THREADS", "1")
    env.pop("HYPER_PARALLEL_SHMEM_LOG_LEVEL", None)

    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    if rounds < 1:
        parser.error(f"--rounds must be at least 1, but got {rounds}")
    base = jobs(p, oshmem, not args.no_python, args.contended)
    # Alternate the order so each peer's repetitions come from different moments of the run.
    work = [job for r in range(rounds) for job in (base if r % 2 == 0 else base[::-1])]
    records, started = [], time.monotonic()
    for index, (label, command, scenario) in enumerate(work):
        progress(index, len(work), label, started)
        got, problem = run_job(label, command, env, scenario)
        records += got
        if problem:
            notes.append(problem)
    progress(len(work), len(work), "done", started)

    rows = summarise(records)
    goals = targets(rows)
    machine = {"machine": platform.machine(), "cpus": os.cpu_count(), "system": platform.platform(),
               "processor": _cpu_model(), "python": platform.python_version(),
               "quick": args.quick, "contended": args.contended, "rounds": rounds,
               "seconds": round(time.monotonic() - started, 1)}
    with open(os.path.join(args.out, "results.json"), "w") as sink:
        json.dump({"machine": machine, "rows": rows, "targets": goals, "notes": notes}, sink, indent=1)
    written = plots(rows, args.out)

    print(table(rows))
    print()
    print(f"{'target':<78}{'measured':>48}  {'goal':<14}met")
    for goal in goals:
        print(f"{goal['target']:<78}{goal['measured']:>48}  {goal['goal']:<14}{'yes' if goal['met'] else 'NO'}")
    print()
    print(f"machine: {machine['processor']}, {machine['cpus']} CPUs; took {machine['seconds']} s")
    for note in notes:
        print(f"note: {note}")
    print(f"wrote {os.path.join(args.out, 'results.json')}" + "".join(f", {w}" for w in written))
    if not written:
        print("no plots: matplotlib is not installed (pip install matplotlib)")
    code = run_moe(args) if args.moe else 0
    return (run_symm_mem(args) or code) if args.symm_mem else code


def _run_suite(base: list, rounds: int, key: str, timeout_s: int) -> tuple:
    """Runs a PE-side suite's launches (label, command) `rounds` times in alternating order,
    pooled (each figure comes from several moments of the run), with a progress bar; returns
    (records: its JSON lines holding `key`, notes: what failed, started: monotonic time)."""
    if rounds < 1:
        raise SystemExit(f"--rounds must be at least 1, but got {rounds}")
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.pop("HYPER_PARALLEL_SHMEM_LOG_LEVEL", None)
    work = [job for r in range(rounds) for job in (base if r % 2 == 0 else base[::-1])]
    records, notes, started = [], [], time.monotonic()
    for index, (label, command) in enumerate(work):
        progress(index, len(work), label, started)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                                  env=env, cwd=ROOT)
        except subprocess.TimeoutExpired:
            notes.append(f"{label}: timed out after {timeout_s} s")
            continue
        got, finished = moe.parse(done.stdout, key=key)
        records += got
        if done.returncode != 0 or not finished:
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            notes.append(f"{label}: exit code {done.returncode}: " + " | ".join(tail))
    progress(len(work), len(work), "done", started)
    return records, notes, started


def run_moe(args) -> int:
    """The MegaMoE suite: runs, prints its tables and targets, writes moe_results.json and
    moe.png into args.out."""
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    records, notes, started = _run_suite(moe.jobs(args.quick), rounds, "moe", 1800)
    rows = moe.summarise(records)
    goals = moe.targets(rows)
    machine = {"machine": platform.machine(), "cpus": os.cpu_count(), "processor": _cpu_model(),
               "python": platform.python_version(), "quick": args.quick, "rounds": rounds,
               "seconds": round(time.monotonic() - started, 1)}
    path = os.path.join(args.out, "moe_results.json")
    with open(path, "w") as sink:
        json.dump({"machine": machine, "rows": rows, "targets": goals, "notes": notes}, sink,
                  indent=1)
    figure = moe.plot(rows, args.out)
    print(moe.table(rows))
    print()
    print(f"{'target':<78}{'measured':>22}  {'goal':<10}met")
    for goal in goals:
        print(f"{goal['target']:<78}{goal['measured']:>22}  {goal['goal']:<10}"
              f"{'yes' if goal['met'] else 'NO'}")
    print()
    print(f"machine: {machine['processor']}, {machine['cpus']} CPUs; took {machine['seconds']} s")
    for note in notes:
        print(f"note: {note}")
    print(f"wrote {path}" + (f", {figure}" if figure else " (no plot: matplotlib is missing)"))
    return 1 if notes and not rows else 0


def run_symm_mem(args) -> int:
    """The symm_mem suite: runs, prints its tables, writes symm_mem_results.json into
    args.out."""
    rounds = args.rounds if args.rounds is not None else 1
    records, notes, started = _run_suite(symm_mem_report.jobs(args.quick), rounds, "symm", 900)
    backends = sorted({str(r.get("backend")) for r in records if r["symm"] == "backend"})
    rows = symm_mem_report.summarise([r for r in records if r["symm"] != "backend"])
    machine = {"machine": platform.machine(), "cpus": os.cpu_count(), "processor": _cpu_model(),
               "python": platform.python_version(), "quick": args.quick, "rounds": rounds,
               "symm_mem_backend": backends, "seconds": round(time.monotonic() - started, 1),
               "load_average_1min": sorted({round(r["load"], 2) for r in records if "load" in r})}
    if backends != ["HPS"]:
        notes.append(f"symm_mem.get_backend('cpu') was {', '.join(backends)}, not HPS: the "
                     "symm_mem paths were skipped (is the package with the backend installed?)")
    failed = [row for row in rows if row.get("errors")] if backends == ["HPS"] else []
    for row in failed:  # a wrong result or a raised error: the row was not timed
        where = f"{row.get('op') or row.get('config')} x{row['pes']}" + (
            f" {row['bytes']} B" if row.get("bytes") else "")
        notes.append(f"FAILED {where}: " + "; ".join(row["errors"]))
    path = os.path.join(args.out, "symm_mem_results.json")
    with open(path, "w") as sink:
        json.dump({"machine": machine, "rows": rows, "notes": notes}, sink, indent=1)
    print(symm_mem_report.table(rows))
    print()
    print(f"machine: {machine['processor']}, {machine['cpus']} CPUs; took {machine['seconds']} s")
    for note in notes:
        print(f"note: {note}")
    print(f"wrote {path}")
    return 1 if failed or (notes and not rows) else 0


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    sys.exit(main())
