"""The scale-out benchmark's hosts and what every part of it shares (benchmarks/scale_out.py).

The constants (KIB, MIB, LINK, ROOT), a measured row and a failed one (record, failure) and
human() sizes; the two hosts made of namespaces (tests/python/netns_hosts.py), a PE's
environment on them, waiting for their processes; and the Relay through which oshrun starts
its daemon on the other host.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KIB, MIB = 1 << 10, 1 << 20
# The hosts' link, as the PEs see it; every system is told to use it and nothing else.
LINK = "eth0"


def human(size: int) -> str:
    for unit, scale in (("MiB", MIB), ("KiB", KIB)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def record(system: str, test: str, size: int, samples_us: list, iters: int, **extra) -> dict:
    """One measured row: the time per operation (us) of each repetition."""
    row = {"system": system, "test": test, "bytes": size, "iters": iters,
           "median_us": statistics.median(samples_us), "min_us": min(samples_us),
           "max_us": max(samples_us), "samples_us": [round(s, 4) for s in samples_us]}
    if test == "put_bw":
        row["gbps"] = size / row["median_us"] / 1e3
    row.update(extra)
    return row


def failure(system: str, test: str, sizes: list, code: str, message: str) -> dict:
    return {"system": system, "test": test, "sizes": sizes, "error": code,
            "message": message.strip()[-600:]}


# ---- hosts ---------------------------------------------------------------------------------

def import_netns_hosts():
    """tests/python/netns_hosts.py, the hosts made of namespaces."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    import netns_hosts

    return netns_hosts


def base_env(rank: int, hosts, port: int, extra: dict) -> dict:
    """The environment of rank's PE (one per host): the rendezvous at host 0's address and
    `port`, gloo on the link, one OpenMP thread, no one-host launcher's file; then `extra`."""
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK="0",
               MASTER_ADDR=hosts.address(0), MASTER_PORT=str(port), GLOO_SOCKET_IFNAME=LINK,
               OMP_NUM_THREADS="1")
    env.pop("HYPER_PARALLEL_SHMEM_RENDEZVOUS_FILE", None)  # a one-host launcher's, not ours
    env.update(extra)
    return env


def wait_all(processes: list, timeout_s: float) -> list:
    """communicate() on each; on a timeout every process is killed. [(rc, out, err)]."""
    deadline = time.monotonic() + timeout_s
    results = []
    for process in processes:
        try:
            out, err = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
            results.append((process.returncode, out, err))
        except subprocess.TimeoutExpired:
            for other in processes:
                other.kill()
            out, err = process.communicate()
            results.append((None, out, err))
    return results


# ---- oshrun's remote shell -----------------------------------------------------------------

class Relay:
    """The remote shell oshrun uses to start its daemon on the other host.

    oshrun (mpirun) starts one orted per remote host by running `<agent> <host> <command>`,
    normally `ssh`. Here the agent is a script written into a temporary folder: it connects to
    a Unix socket this object listens on and sends the host and the command together with its
    own stdin, stdout and stderr (SCM_RIGHTS), then waits for the exit status. This side starts
    `sh -c <command>` inside that host's namespaces (NetnsHosts.popen) on those descriptors, so
    orted talks to oshrun exactly as over ssh, and sends the status back when it exits. A path
    socket works from inside host 0's namespaces because the hosts share the file system (only
    /dev/shm is private), while host 1's namespaces cannot be entered from inside host 0.
    """

    def __init__(self, hosts, folder: str) -> None:
        self.hosts = hosts
        self.by_address = {hosts.address(i): i for i in range(hosts.count)}
        self.by_address.update({hosts.hostname(i): i for i in range(hosts.count)})
        self.path = os.path.join(folder, "agent.sock")
        self.agent = os.path.join(folder, "netns-agent")
        self.launched: list = []
        with open(self.agent, "w") as script:
            script.write(f"""#!{sys.executable}
import json, socket, sys
args = sys.argv[1:]
while args and args[0].startswith("-"):  # options meant for ssh
    args.pop(0)
link = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
link.connect({self.path!r})
message = json.dumps({{"host": args[0], "command": " ".join(args[1:])}}).encode()
socket.send_fds(link, [message], [0, 1, 2])
reply = b""
while True:
    chunk = link.recv(64)
    if not chunk:
        break
    reply += chunk
sys.exit(int(reply or b"255"))
""")
        os.chmod(self.agent, 0o755)
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen(8)
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                link, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(link,), daemon=True).start()

    def _serve(self, link) -> None:
        with link:
            try:
                message, fds, _, _ = socket.recv_fds(link, 1 << 16, 3)
                request = json.loads(message)
                host = self.by_address.get(request["host"])
                if host is None or len(fds) != 3:
                    link.sendall(b"255")
                    return
                try:
                    process = self.hosts.popen(host, ["sh", "-c", request["command"]],
                                               stdin=fds[0], stdout=fds[1], stderr=fds[2])
                finally:
                    for fd in fds:
                        os.close(fd)
                self.launched.append((request["host"], request["command"]))
                link.sendall(str(process.wait()).encode())
            except (OSError, ValueError):
                return

    def close(self) -> None:
        self._server.close()
