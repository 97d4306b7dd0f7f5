"""Building the native programs: shmem_bench (the runtime from C++, benchmarks/native) with
CMake into build/bench/, and OSHMEM's oshmem_bench with Open MPI's oshcc; oshrun on this host."""

from __future__ import annotations

import os
import shutil
import subprocess

from common import BENCH, BUILD


def build_native() -> None:
    """build/bench/shmem_bench (raises CalledProcessError where the build fails)."""
    subprocess.run(["cmake", "-S", os.path.join(BENCH, "native"), "-B", BUILD, "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", BUILD, "--target", "shmem_bench"], check=True,
                   capture_output=True)


def native_binary() -> str:
    return os.path.join(BUILD, "shmem_bench")


def build_oshmem() -> tuple:
    """(path of build/bench/oshmem_bench, None), or (None, why not)."""
    if shutil.which("oshcc") is None or shutil.which("oshrun") is None:
        return None, ("OpenMPI's OSHMEM is not installed (oshcc/oshrun missing): the OSHMEM "
                      "peer is skipped; install Debian's openmpi-bin and libopenmpi-dev for it")
    os.makedirs(BUILD, exist_ok=True)
    binary = os.path.join(BUILD, "oshmem_bench")
    built = subprocess.run(["oshcc", "-O2", "-o", binary,
                            os.path.join(BENCH, "native", "oshmem_bench.c")],
                           capture_output=True, text=True)
    if built.returncode != 0:
        return None, "building the OSHMEM peer failed: " + built.stderr.strip()[-300:]
    return binary, None


def oshrun(pes: int) -> list:
    """oshrun starting `pes` PEs on this host (oversubscribed: more PEs than cores is fine)."""
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return ["oshrun", "--oversubscribe", *root, "-np", str(pes)]
