"""PEs on several hosts, the hosts made of namespaces (netns_hosts.py): what the runtime says
when the PEs of one job are not all on one host."""

from __future__ import annotations

import os
import sys

import pytest

import netns_hosts
from netns_hosts import NetnsHosts

pytestmark = pytest.mark.skipif(netns_hosts.available() is not None,
                                reason=str(netns_hosts.available()))

# One PE: joins the job's process group over the hosts' link, then asks for the runtime.
PE = """
import sys
import torch.distributed as dist
from hyper_parallel.core.multicore import shmem
from hyper_parallel.core.multicore.shmem.launch import init_process_group_from_environment
init_process_group_from_environment(timeout_s=60)
try:
    shmem.acquire_shmem()
    print("READY")
except shmem.ShmemError as error:
    print(error.error_code, str(error))
dist.destroy_process_group()
"""


def _start_pes(hosts, pes_per_host: int, extra_env: dict | None = None) -> list:
    world = hosts.count * pes_per_host
    processes = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world),
                   LOCAL_RANK=str(rank % pes_per_host), MASTER_ADDR=hosts.address(0),
                   MASTER_PORT="29500", GLOO_SOCKET_IFNAME="eth0", **(extra_env or {}))
        env.pop("HYPER_PARALLEL_SHMEM_BACKEND", None)
        processes.append(hosts.popen(rank // pes_per_host, [sys.executable, "-c", PE], env=env,
                                     stdout=__import__("subprocess").PIPE, text=True))
    return processes


def test_the_host_backend_refuses_pes_on_other_hosts_at_init_naming_them():
    with NetnsHosts(2) as hosts:
        processes = _start_pes(hosts, 2)
        outputs = [p.communicate(timeout=120)[0] for p in processes]
        for rank, out in enumerate(outputs):
            # Every PE fails at init, and says which PEs are where.
            assert out.startswith("UNSUPPORTED_CAPABILITY "), (rank, out)
            assert "the host backend reaches only PEs on its own host" in out, out
            assert "hosts=host0 (net:[" in out and "]): pes 0,1; host1 (net:[" in out, out
            assert "]): pes 2,3" in out, out
            other = "2,3" if rank < 2 else "0,1"
            assert f"other_host_pes={other}" in out, (rank, out)
        assert all(p.returncode == 0 for p in processes)
    assert hosts.residue() == []
