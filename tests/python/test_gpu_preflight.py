"""scripts/gpu_preflight.sh: what a machine offers the CUDA checks, and every gap reported as a
failure (exit 3), never skipped in silence. On this CPU machine it must report the missing
coverage; over stand-in nvidia-smi, nvcc and python programs it must judge the driver against
the toolkit, the compute mode and torch's CUDA."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_preflight.sh"


def _run(env=None, out=None):
    args = ["bash", str(SCRIPT)] + ([str(out)] if out else [])
    return subprocess.run(args, capture_output=True, text=True, timeout=120,
                          env=env or dict(os.environ))


def _program(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _machine(tmp_path: Path, *, driver_cuda: str, mode: str, torch_line: str) -> dict:
    """An environment whose nvidia-smi, nvcc and python are stand-ins in tmp_path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _program(bin_dir, "nvidia-smi", f"""case "$*" in
  -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)" ;;
  *driver_version*) echo "580.65.06" ;;
  *compute_mode*) echo "{mode}" ;;
  *) echo "| NVIDIA-SMI 580.65.06   Driver Version: 580.65.06   CUDA Version: {driver_cuda}  |" ;;
esac
""")
    _program(bin_dir, "nvcc", 'echo "Cuda compilation tools, release 13.0, V13.0.88"\n')
    _program(bin_dir, "python-stand-in", f'echo "{torch_line}"\n')
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    env["PYTHON"] = str(bin_dir / "python-stand-in")
    return env


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a driver")
def test_this_cpu_machine_reports_no_device_coverage(tmp_path):
    done = _run(out=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "missing: no NVIDIA driver: nvidia-smi is not installed" in done.stdout
    assert "coverage: none" in done.stdout
    assert (tmp_path / "preflight.txt").read_text() == done.stdout


def test_an_old_driver_and_an_exclusive_gpu_are_gaps(tmp_path):
    env = _machine(tmp_path, driver_cuda="12.4", mode="Exclusive_Process",
                   torch_line="2.13.0+cu124 12.4 True 1")
    done = _run(env)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "driver_cuda: 12.4" in done.stdout
    assert "missing: driver too old: it supports CUDA 12.4, the backend links the CUDA 13.0" \
        in done.stdout
    assert "missing: compute mode Exclusive_Process" in done.stdout
    assert "coverage: partial (2 missing)" in done.stdout


def test_a_cpu_build_of_torch_is_a_gap(tmp_path):
    env = _machine(tmp_path, driver_cuda="13.0", mode="Default",
                   torch_line="2.13.0+cpu None False 0")
    done = _run(env)
    assert done.returncode == 3, done.stdout
    assert "has no CUDA (a CPU build): the Python CUDA tests cannot run" in done.stdout
    assert "coverage: partial (1 missing)" in done.stdout


def test_a_machine_with_everything_has_full_coverage(tmp_path):
    env = _machine(tmp_path, driver_cuda="13.1", mode="Default",
                   torch_line="2.13.0+cu130 13.0 True 1")
    done = _run(env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gpus: 1" in done.stdout and "compute_mode: Default" in done.stdout
    assert "missing:" not in done.stdout
    assert done.stdout.rstrip().endswith("coverage: full")
