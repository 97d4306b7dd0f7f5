"""The OpenSHMEM C API as a user meets it after `pip install` (docs/openshmem.md): hps-oshcc and
hps-oshc++ build C and C++ programs, pkg-config finds the library, hps-oshrun starts the PEs,
passes their exit status on, forwards SIGTERM and leaves no process behind, SHMEM_SYMMETRIC_SIZE
sets the heap, and a job started with torchrun's variables finds its peers. The C API's
semantics are tested in C (ccsrc/tests/openshmem/)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time

import pytest

from netns_hosts import NetnsHosts, available as netns_available

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEMANTICS = os.path.join(ROOT, "ccsrc", "tests", "openshmem", "semantics.c")
SCRIPTS = sysconfig.get_path("scripts")
OSHCC = os.path.join(SCRIPTS, "hps-oshcc")
OSHCXX = os.path.join(SCRIPTS, "hps-oshc++")
OSHRUN = os.path.join(SCRIPTS, "hps-oshrun")

RING = r"""
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>

static long received = -1;   /* static data is symmetric */

int main(int argc, char **argv) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  long mine = 100 + me;
  shmem_long_p(&received, mine, (me + 1) % n);
  shmem_barrier_all();
  long *big = shmem_malloc(argc > 1 ? (size_t)atol(argv[1]) : 8);
  printf("PE %d of %d got %ld big=%s\n", me, n, received, big ? "yes" : "null");
  shmem_finalize();
  return 0;
}
"""

CXX_RING = r"""
#include <shmem.h>
#include <cstdio>

static int counter = 0;

int main() {
  shmem_init();
  int me = shmem_my_pe();
  shmem_atomic_add(&counter, me + 1, 0);   // the C++ overload
  shmem_barrier_all();
  if (me == 0) std::printf("sum %d\n", counter);
  shmem_finalize();
  return 0;
}
"""

SLEEPER = r"""
#include <shmem.h>
#include <unistd.h>
int main(void) {
  shmem_init();
  if (shmem_my_pe() == 0) for (;;) sleep(1);
  shmem_barrier_all();   /* PE 1 waits for PE 0 */
  shmem_finalize();
  return 0;
}
"""


def _build(tmp_path, source: str, name: str, compiler: str = OSHCC, suffix: str = ".c") -> str:
    src = tmp_path / (name + suffix)
    src.write_text(source)
    exe = str(tmp_path / name)
    subprocess.run([compiler, "-O1", str(src), "-o", exe], check=True, timeout=120)
    return exe


def _run(args, timeout=120, env=None):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)


def test_wrappers_and_launcher_are_installed():
    for tool in (OSHCC, OSHCXX, OSHRUN):
        assert os.access(tool, os.X_OK), tool
    shown = _run([OSHCC, "--showme", "x.c", "-o", "x"]).stdout
    assert "-lhps_oshmem" in shown and "shmem.h" not in shown and "-I" in shown
    assert "-lhps_oshmem" not in _run([OSHCC, "--showme", "-c", "x.c"]).stdout


def test_a_c_program_runs_on_two_and_four_pes_with_symmetric_static_data(tmp_path):
    exe = _build(tmp_path, RING, "ring")
    for n in (2, 4):
        result = _run([OSHRUN, "-np", str(n), exe])
        assert result.returncode == 0, result.stderr
        lines = sorted(result.stdout.splitlines())
        assert lines == sorted(f"PE {me} of {n} got {100 + (me - 1) % n} big=yes" for me in range(n))


def test_a_cxx_program_builds_with_the_overloads(tmp_path):
    exe = _build(tmp_path, CXX_RING, "cxx_ring", OSHCXX, ".cc")
    result = _run([OSHRUN, "-np", "3", exe])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "sum 6"


def test_pkg_config_finds_the_library(tmp_path):
    if shutil.which("pkg-config") is None:
        pytest.skip("pkg-config is not installed")
    folder = _run([OSHCC, "--pkg-config-path"]).stdout.strip()
    env = dict(os.environ, PKG_CONFIG_PATH=folder)
    flags = _run(["pkg-config", "--cflags", "--libs", "hps-oshmem"], env=env)
    assert flags.returncode == 0, flags.stderr
    src = tmp_path / "ring.c"
    src.write_text(RING)
    exe = str(tmp_path / "ring_pc")
    subprocess.run(["cc", str(src), "-o", exe] + flags.stdout.split(), check=True, timeout=120)
    assert _run([OSHRUN, "-np", "2", exe]).returncode == 0


def test_symmetric_size_sets_the_heap_and_a_bad_value_is_named(tmp_path):
    exe = _build(tmp_path, RING, "ring_heap")
    env = dict(os.environ, SHMEM_SYMMETRIC_SIZE="64M")
    small = _run([OSHRUN, "-np", "2", exe, str(100 << 20)], env=env)
    assert small.returncode == 0, small.stderr
    assert small.stdout.count("big=null") == 2, "an allocation past the heap is null on every PE"
    large = _run([OSHRUN, "-np", "2", exe, str(100 << 20)],
                 env=dict(os.environ, SHMEM_SYMMETRIC_SIZE="256M"))
    assert large.stdout.count("big=yes") == 2, large.stderr
    bad = _run([OSHRUN, "-np", "2", exe], env=dict(os.environ, SHMEM_SYMMETRIC_SIZE="lots"))
    assert bad.returncode == 1
    assert "SHMEM_SYMMETRIC_SIZE" in bad.stderr and "lots" in bad.stderr


def _pids_running(path: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if f.read().split(b"\0")[0].decode(errors="replace") == path:
                    found.append(int(entry))
        except OSError:
            pass
    return found


def test_sigterm_is_forwarded_and_no_pe_is_left_behind(tmp_path):
    exe = _build(tmp_path, SLEEPER, "sleeper")
    launcher = subprocess.Popen([OSHRUN, "-np", "2", exe], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    deadline = time.time() + 30
    while len(_pids_running(exe)) < 2 and time.time() < deadline:
        time.sleep(0.05)
    assert len(_pids_running(exe)) == 2
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=30) == 128 + signal.SIGTERM
    assert _pids_running(exe) == []


def test_a_job_started_with_torchruns_variables_finds_its_peers(tmp_path):
    exe = _build(tmp_path, RING, "ring_torchrun")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1] - 1  # rank 0 listens on MASTER_PORT + 1
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        for name in ("HYPER_PARALLEL_SHMEM_BOOTSTRAP_NAME", "HPS_OSHRUN_CONTROL_FD"):
            env.pop(name, None)
        procs.append(subprocess.Popen([exe], env=env, stdout=subprocess.PIPE, text=True))
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert "PE 0 of 2 got 101" in outputs[0] and "PE 1 of 2 got 100" in outputs[1]


REFUSED_ON_ONE = r"""
#include <shmem.h>
#include <stdio.h>

static long dest[4], source[4];

int main(void) {
  shmem_init();
  int me = shmem_my_pe();
  /* PE 0 names a root outside the team; the others call it right. */
  shmem_broadcastmem(SHMEM_TEAM_WORLD, dest, source, sizeof(source), me == 0 ? 7 : 0);
  printf("PE %d went on\n", me);
  shmem_finalize();
  return 0;
}
"""


def test_a_collective_refused_on_one_pe_ends_the_job_on_every_pe_with_its_reason(tmp_path):
    """A collective one PE refuses takes its place (docs/openshmem.md, "Bad input"): PE 0 prints
    its reason, every other PE's call fails printing it too, and nobody waits, even without a
    launcher that stops the others."""
    exe = _build(tmp_path, REFUSED_ON_ONE, "refused_on_one")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1] - 1  # rank 0 listens on MASTER_PORT + 1
    procs = []
    for rank in range(3):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="3", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), HYPER_PARALLEL_SHMEM_TIMEOUT_SEC="60")
        for name in ("HYPER_PARALLEL_SHMEM_BOOTSTRAP_NAME", "HPS_OSHRUN_CONTROL_FD"):
            env.pop(name, None)
        procs.append(subprocess.Popen([exe], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [1, 1, 1], outputs
    reason = "root must be in [0, 3) of the team, but got 7"
    assert all("went on" not in out for out, _ in outputs), outputs
    assert reason in outputs[0][1] and "error_code=INVALID_ARGUMENT" in outputs[0][1], outputs[0]
    for _, err in outputs[1:]:
        assert "error_code=COLLECTIVE_MISMATCH" in err and "refused on PE 0" in err, err
        assert "operation=shmem_broadcastmem" in err and "PE_root" in err, err
    # Under the launcher every PE ends as well, PE 0's reason printed.
    launched = _run([OSHRUN, "-np", "2", exe], timeout=60)
    assert launched.returncode == 1, launched.stderr
    assert "root must be in [0, 2) of the team, but got 7" in launched.stderr, launched.stderr


def test_the_semantics_hold_with_every_peer_through_ucx(tmp_path):
    exe = _build(tmp_path, open(SEMANTICS).read(), "semantics")
    env = dict(os.environ, HYPER_PARALLEL_SHMEM_REMOTE_PEERS="all", UCX_TLS="tcp,self",
               UCX_NET_DEVICES="lo")
    result = _run([OSHRUN, "-np", "3", exe], env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(result.stdout.split()) == sorted("PASS PE 0 PASS PE 1 PASS PE 2".split())


@pytest.mark.skipif(netns_available() is not None, reason=str(netns_available()))
def test_the_semantics_hold_across_two_namespace_hosts(tmp_path):
    """Static data and heap blocks reached through UCX between two hosts, one PE each, started
    with torchrun's variables."""
    exe = _build(tmp_path, open(SEMANTICS).read(), "semantics_hosts")
    with NetnsHosts(2) as hosts:
        procs = []
        for rank in range(2):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR=hosts.address(0),
                       MASTER_PORT="29500", UCX_TLS="tcp,self", UCX_NET_DEVICES="eth0",
                       HYPER_PARALLEL_SHMEM_TIMEOUT_SEC="30")
            for name in ("HYPER_PARALLEL_SHMEM_BOOTSTRAP_NAME", "HPS_OSHRUN_CONTROL_FD",
                         "HYPER_PARALLEL_SHMEM_BACKEND"):
                env.pop(name, None)
            procs.append(hosts.popen(rank, [exe], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True))
        outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(outputs)
    assert "PASS PE 0" in outputs[0] and "PASS PE 1" in outputs[1]


def test_the_launcher_refuses_bad_arguments():
    assert _run([OSHRUN]).returncode == 2
    assert _run([OSHRUN, "-np", "0", "true"]).returncode == 2
    missing = _run([OSHRUN, "-np", "2", "/nonexistent/program"])
    assert missing.returncode == 127 and "cannot run" in missing.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
