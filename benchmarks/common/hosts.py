"""The hosts made of network namespaces (tests/python/netns_hosts.py) that the benchmarks
across hosts run on: the module itself, a PE's environment on them, and the Relay through which
oshrun starts its daemon on the other host (docs/scale-out.md).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading

from common import ROOT

# The hosts' link, as the PEs see it; every system is told to use it and nothing else.
LINK = "eth0"


def import_netns_hosts():
    """tests/python/netns_hosts.py, the hosts made of namespaces."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    import netns_hosts

    return netns_hosts


def base_env(rank: int, hosts, port: int, extra: dict, world: int = 2,
             per_host: int = 1) -> dict:
    """The environment of rank's PE (`per_host` on each host): the rendezvous at host 0's
    address and `port`, gloo on the link, one OpenMP thread, no one-host launcher's file; then
    `extra`."""
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank % per_host),
               MASTER_ADDR=hosts.address(0), MASTER_PORT=str(port), GLOO_SOCKET_IFNAME=LINK,
               OMP_NUM_THREADS="1")
    env.pop("HYPER_PARALLEL_SHMEM_RENDEZVOUS_FILE", None)  # a one-host launcher's, not ours
    env.update(extra)
    return env


def write_hostfile(hosts, folder: str) -> str:
    """The hosts by their eth0 addresses, one slot each (oshrun's --hostfile)."""
    path = os.path.join(folder, "hostfile")
    with open(path, "w") as sink:
        sink.write("".join(f"{hosts.address(i)} slots=1\n" for i in range(hosts.count)))
    return path


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
