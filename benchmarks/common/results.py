"""The result line: how a PE hands its figures to the driver that started it.

A PE prints each result as one line of JSON on stdout (an object, `emit`), and when it has
finished every measurement, the line {"done": true} (`done`); the native programs
(benchmarks/native/shmem_bench.cc, oshmem_bench.c) print the same. A PE that cannot run
prints {"error": CODE, "message": TEXT}. The driver reads them back with `parse`: the objects
holding a given key, in order, and whether "done" came; other lines (logs) are passed over.
"""

from __future__ import annotations

import contextlib
import json


def emit(record: dict) -> None:
    """One result line."""
    print(json.dumps(record), flush=True)


def done() -> None:
    """The last line of a PE that finished every measurement."""
    emit({"done": True})


def parse(stdout: str, key: str = "samples_us") -> tuple:
    """(records holding `key`, finished: whether the "done" line came) from a PE's stdout."""
    records, finished = [], False
    for line in (stdout or "").splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        record = json.loads(line)
        if record.get("done"):
            finished = True
        elif key in record:
            records.append(record)
    return records, finished


def records(stdout: str, key: str = "samples_us") -> list:
    """parse's records alone."""
    return parse(stdout, key)[0]


@contextlib.contextmanager
def session(rank: int):
    """Around a PE's measurements (inside an initialised process group): PE 0 prints "done"
    once they all finished, and the process group is destroyed however they end."""
    import torch.distributed as dist

    try:
        yield
        if rank == 0:
            done()
    finally:
        dist.destroy_process_group()


def emit_on(rank: int, record: dict) -> None:
    """emit, on PE 0 only (the PEs agree on the figures; one of them reports)."""
    if rank == 0:
        emit(record)
