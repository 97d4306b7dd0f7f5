"""The launcher's exit status: 0 when every PE exits 0, 77 when the first PE to fail says the
machine cannot run the program (77), 1 for any other failure; each PE gets its rank."""

from __future__ import annotations

import sys

from hyper_parallel.core.multicore.shmem.launch import SKIPPED, run_pes


def _pe(body: str) -> list:
    return [sys.executable, "-c", "import os, sys\nrank = int(os.environ['RANK'])\n" + body]


def test_every_pe_gets_its_rank_and_the_world_size(tmp_path):
    body = (f"open(os.path.join({str(tmp_path)!r}, str(rank)), 'w')"
            ".write(os.environ['WORLD_SIZE'])")
    assert run_pes(3, _pe(body), timeout_s=60) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0", "1", "2"]
    assert {p.read_text() for p in tmp_path.iterdir()} == {"3"}


def test_a_skip_is_passed_on_and_any_other_failure_is_one():
    assert SKIPPED == 77
    assert run_pes(2, _pe("sys.exit(77)"), timeout_s=60) == 77
    assert run_pes(2, _pe("sys.exit(3 if rank == 1 else 0)"), timeout_s=60) == 1
    # The other PE is stopped once one failed: a PE that would hang does not hold the launch.
    assert run_pes(2, _pe("import time\nif rank == 0: time.sleep(600)\nsys.exit(77)"),
                   timeout_s=60) == 77


def test_a_plain_init_process_group_works_under_the_launcher(tmp_path):
    # The launcher sets MASTER_ADDR and MASTER_PORT (docs/api.md, "Starting the PEs"), so a
    # program joins with torch's env:// rendezvous and the backend alone.
    body = ("import torch, torch.distributed as dist\n"
            "dist.init_process_group('gloo')\n"
            "value = torch.tensor([rank + 1])\n"
            "dist.all_reduce(value)\n"
            "assert int(value) == 3, value\n"
            f"open(os.path.join({str(tmp_path)!r}, str(rank)), 'w')"
            ".write(os.environ['MASTER_ADDR'] + ' ' + os.environ['MASTER_PORT'])\n"
            "dist.destroy_process_group()")
    assert run_pes(2, _pe(body), timeout_s=120) == 0
    seen = {p.read_text() for p in tmp_path.iterdir()}
    assert len(seen) == 1 and seen.pop().startswith("127.0.0.1 ")


def test_the_caller_s_master_port_is_kept(tmp_path, monkeypatch):
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    body = (f"open(os.path.join({str(tmp_path)!r}, str(rank)), 'w')"
            ".write(os.environ['MASTER_ADDR'] + ' ' + os.environ['MASTER_PORT'])")
    assert run_pes(2, _pe(body), timeout_s=60, env={"MASTER_PORT": "29517"}) == 0
    assert {p.read_text() for p in tmp_path.iterdir()} == {"127.0.0.1 29517"}
