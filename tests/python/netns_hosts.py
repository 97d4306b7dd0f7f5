"""Hosts made of Linux namespaces, for tests of PEs on several hosts on one machine.

    with NetnsHosts(2) as hosts:                       # root only (CAP_SYS_ADMIN, CAP_NET_ADMIN)
        p = hosts.popen(0, [sys.executable, "-c", ...])  # runs inside "host 0"
        hosts.address(1)                               # "10.77.0.2": host 1's address
        hosts.set_link(1, up=False)                    # host 1's cable pulled
    # every process killed, every namespace and link gone, even when the body raised

Each host is a network namespace of its own (`ip netns`) with one veth link, `eth0`, whose
other end sits on a bridge in a further namespace, the switch; no link, address or route is
added to the namespace the test runs in, so the hosts' traffic stays among them. Each host
also has UTS, PID and mount namespaces of its own, held by an anchor process (`unshare`), the
host's PID 1: its own hostname (`host<i>`), its own process ids (and a /proc that shows them),
and a private tmpfs on /dev/shm, as a second machine would have. Every process started on a
host joins all of them (`nsenter`), so the PEs of one host see each other as on one machine.
When the anchor dies the kernel kills every process left on the host. What the hosts share,
and a real second machine would not, is the kernel: the same boot id, the same clock and the
same CPU cores.

Several tests may run at once: every test's namespaces carry a prefix of their own (the
process id and a counter), and the hosts' addresses (10.77.0.0/24 unless given) can repeat
across tests because each test's hosts reach only their own switch.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import time

_COUNTER = itertools.count()


def available() -> str | None:
    """None when this process can make namespace hosts; otherwise why not (for a skip)."""
    if os.geteuid() != 0:
        return "namespace hosts need root (network, UTS, PID and mount namespaces)"
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"namespace hosts need `{tool}` (iproute2, util-linux)"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=30)


class NetnsHosts:
    """`count` hosts joined by a bridge; see the module's docstring."""

    def __init__(self, count: int, subnet: str = "10.77.0") -> None:
        if count < 1 or count > 250:
            raise ValueError(f"count must be in [1, 250], but got {count}")
        self.count = count
        self.subnet = subnet
        self.prefix = f"hps{os.getpid()}n{next(_COUNTER)}"
        self.switch = f"{self.prefix}-sw"
        self.namespaces = [f"{self.prefix}-h{i}" for i in range(count)]
        self._processes: list = []
        self._anchors: list = []
        self._pid1: list = []  # each host's PID 1 (its anchor), as seen from here
        self._made: list = []

    # ---- set-up and tear-down -------------------------------------------------------------

    def __enter__(self) -> "NetnsHosts":
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _anchor(self, host: int) -> int:
        """Starts `host`'s anchor; returns its pid as seen from here (for nsenter)."""
        script = (f"hostname {self.hostname(host)} && "
                  "mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec sleep infinity")
        anchor = subprocess.Popen(
            ["ip", "netns", "exec", self.namespaces[host], "unshare", "--uts", "--pid", "--fork",
             "--kill-child", "--mount", "--propagation", "private", "--mount-proc",
             "sh", "-c", script], start_new_session=True)
        self._anchors.append(anchor)

        def inner():  # unshare's child, PID 1 of the host, once it is sleep
            try:
                with open(f"/proc/{anchor.pid}/task/{anchor.pid}/children") as f:
                    children = f.read().split()
                if children:
                    with open(f"/proc/{children[0]}/comm") as f:
                        if f.read().strip() == "sleep":
                            return int(children[0])
            except OSError:
                pass
            return None

        wait_for(lambda: inner() is not None or anchor.poll() is not None, 10,
                 f"host {host}'s namespaces")
        if anchor.poll() is not None:
            raise RuntimeError(f"making host {host}'s namespaces failed (unshare exited "
                               f"{anchor.returncode})")
        return inner()

    def _make(self) -> None:
        _ip("netns", "add", self.switch)
        self._made.append(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for i, ns in enumerate(self.namespaces):
            _ip("netns", "add", ns)
            self._made.append(ns)
            # The pair is made inside the switch, its eth0 end moved straight into the host.
            _ip("-n", self.switch, "link", "add", f"p{i}", "type", "veth", "peer", "name",
                "eth0", "netns", ns)
            _ip("-n", self.switch, "link", "set", f"p{i}", "master", "br0")
            _ip("-n", self.switch, "link", "set", f"p{i}", "up")
            _ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            self._pid1.append(self._anchor(i))

    def close(self) -> None:
        """Kills every process on the hosts and removes every namespace (idempotent)."""
        for process in self._processes + self._anchors:
            if process.poll() is None:
                with _quiet():
                    os.killpg(process.pid, signal.SIGKILL)
        for pid in self._pid1:  # the hosts' PID 1: the kernel then kills the rest of each host
            with _quiet():
                os.kill(pid, signal.SIGKILL)
        for process in self._processes + self._anchors:
            with _quiet():
                process.wait(timeout=10)
        for ns in reversed(self._made):
            # Anything still running in the namespace (a process that left our process group).
            pids = _ip("netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                with _quiet():
                    os.kill(int(pid), signal.SIGKILL)
            _ip("netns", "del", ns, check=False)
        self._made.clear()

    # ---- what tests use -------------------------------------------------------------------

    def address(self, host: int) -> str:
        """The address of `host`'s eth0."""
        return f"{self.subnet}.{host + 1}"

    def hostname(self, host: int) -> str:
        return f"host{host}"

    def popen(self, host: int, argv: list, *, env: dict | None = None,
              **kwargs) -> subprocess.Popen:
        """Starts argv on `host`: in its network, UTS, PID and mount namespaces (hostname
        host<i>, its /proc and its private /dev/shm). The process leads a process group of its
        own; close() kills it and everything else on the host."""
        command = ["nsenter", "--target", str(self._pid1[host]), "--net", "--uts", "--pid",
                   "--mount", "--", *argv]
        process = subprocess.Popen(command, env=env, start_new_session=True, **kwargs)
        self._processes.append(process)
        return process

    def run(self, host: int, argv: list, *, timeout: float = 60, **kwargs):
        """popen() and wait: a CompletedProcess with text output."""
        process = self.popen(host, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, **kwargs)
        out, err = process.communicate(timeout=timeout)
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)

    def set_link(self, host: int, *, up: bool) -> None:
        """Takes `host`'s link down (its cable pulled: packets to and from it are dropped) or
        brings it back up; the switch side, so the host's own view of eth0 does not change."""
        _ip("-n", self.switch, "link", "set", f"p{host}", "up" if up else "down")

    def residue(self) -> list:
        """The namespaces of these hosts that still exist (empty after close())."""
        listed = _ip("netns", "list", check=False).stdout.split("\n")
        names = {line.split()[0] for line in listed if line.strip()}
        return sorted(names & {self.switch, *self.namespaces})


class _quiet:
    """Ignores the errors of a best-effort clean-up step."""

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback) -> bool:
        return kind is not None and issubclass(kind, (OSError, subprocess.SubprocessError))


def wait_for(predicate, timeout_s: float, what: str) -> None:
    """Polls predicate() until it is true, or raises TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout_s} s")
        time.sleep(0.02)
