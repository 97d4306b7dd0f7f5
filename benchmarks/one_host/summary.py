"""The one-host suite's results (benchmarks/run.py): repetitions of several rounds joined, the
medians, the table, and the targets of docs/benchmarks.md with the machine's bounds.
"""

from __future__ import annotations

import os
import statistics

from common.units import KIB, MIB, human


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
