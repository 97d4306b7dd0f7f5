"""Medians and the other figures the benchmarks take from their repetitions, and the loops
that time them."""

from __future__ import annotations

import statistics
import time


def median(values: list) -> float:
    """The median, NaN for no values."""
    return statistics.median(values) if values else float("nan")


def record(system: str, test: str, size: int, samples_us: list, iters: int, **extra) -> dict:
    """One measured row: the time per operation (us) of each repetition, its median and spread."""
    row = {"system": system, "test": test, "bytes": size, "iters": iters,
           "median_us": statistics.median(samples_us), "min_us": min(samples_us),
           "max_us": max(samples_us), "samples_us": [round(s, 4) for s in samples_us]}
    if test == "put_bw":
        row["gbps"] = size / row["median_us"] / 1e3
    row.update(extra)
    return row


def percentiles(values: list) -> dict | None:
    """Median, mean and tails of per-call times (us), as shmem_bench reports them."""
    if not values:
        return None
    ordered = sorted(values)
    at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"median": at(0.5), "mean": sum(ordered) / len(ordered), "p90": at(0.9),
            "p99": at(0.99), "count": len(ordered)}


def mean_us(body, iters: int, finish=None) -> float:
    """The mean time of `iters` calls of body (us), `finish` once at the end inside the time."""
    start = time.perf_counter()
    for _ in range(iters):
        body()
    if finish is not None:
        finish()
    return (time.perf_counter() - start) / iters * 1e6


def alternating(systems, rounds: int, timed) -> dict:
    """{system: [timed(system) per round]}, the order reversed every other round so that no
    system always runs first."""
    systems = tuple(systems)
    samples = {system: [] for system in systems}
    for index in range(rounds):
        for system in (systems if index % 2 == 0 else systems[::-1]):
            samples[system].append(timed(system))
    return samples


def rounds_of(base: list, rounds: int) -> list:
    """`rounds` passes over the jobs, every other one in reverse order, so each job's
    repetitions come from different moments of the run."""
    if rounds < 1:
        raise SystemExit(f"--rounds must be at least 1, but got {rounds}")
    return [job for r in range(rounds) for job in (base if r % 2 == 0 else base[::-1])]
