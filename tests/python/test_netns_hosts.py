"""The namespace-hosts harness (netns_hosts.py) itself: two hosts reach each other over TCP on
their own addresses and not through the test's namespace; each has its own hostname, PID 1 and
/dev/shm; a pulled link cuts them apart and a restored one joins them again; nothing is left
behind, whether the body returns, raises, or leaves processes running."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import netns_hosts
from netns_hosts import NetnsHosts

pytestmark = pytest.mark.skipif(netns_hosts.available() is not None,
                                reason=str(netns_hosts.available()))

# A TCP server on its host's address that answers one line with its hostname, and a client.
SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7077)); s.listen(1)
print("listening", flush=True)
c, _ = s.accept(); c.sendall(socket.gethostname().encode()); c.close()
"""
CLIENT = """
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], 7077), timeout=float(sys.argv[2]))
    print(c.recv(100).decode())
except OSError as e:
    print("unreachable:", type(e).__name__); sys.exit(3)
"""
IDENTITY = """
import os, socket
open("/dev/shm/hps-netns-probe", "w").close()
print(socket.gethostname(), open("/proc/1/comm").read().strip(), sorted(os.listdir("/dev/shm")),
      open("/proc/sys/kernel/random/boot_id").read().strip(), os.readlink("/proc/self/ns/net"))
"""


def _serve(hosts, host):
    server = hosts.popen(host, [sys.executable, "-c", SERVER, hosts.address(host)],
                         stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "listening"
    return server


def test_two_hosts_talk_over_their_own_link_and_each_has_its_own_identity():
    with NetnsHosts(2) as hosts:
        server = _serve(hosts, 1)
        reply = hosts.run(0, [sys.executable, "-c", CLIENT, hosts.address(1), "5"])
        assert reply.returncode == 0 and reply.stdout.strip() == "host1", reply
        server.wait(timeout=10)
        # The test's own namespace has no route to the hosts' subnet.
        here = subprocess.run([sys.executable, "-c", CLIENT, hosts.address(1), "0.5"],
                              capture_output=True, text=True, timeout=30)
        assert here.returncode == 3, here.stdout
        seen = [hosts.run(h, [sys.executable, "-c", IDENTITY]).stdout.split() for h in (0, 1)]
        (name0, init0, shm0, boot0, net0), (name1, init1, shm1, boot1, net1) = (
            (s[0], s[1], " ".join(s[2:-2]), s[-2], s[-1]) for s in seen)
        assert (name0, name1) == ("host0", "host1")
        # Each host has its own process ids: its PID 1 is its anchor.
        assert init0 == init1 == "sleep"
        # Two processes of one host see each other (one PID namespace, one /proc); another
        # host's do not.
        sleeper = hosts.popen(0, ["sh", "-c", "echo $$; exec sleep 300"],
                              stdout=subprocess.PIPE, text=True)
        pid = sleeper.stdout.readline().strip()
        look = f"import os; print(os.path.exists('/proc/{pid}') and " \
               f"open('/proc/{pid}/comm').read().strip())"
        assert hosts.run(0, [sys.executable, "-c", look]).stdout.strip() == "sleep"
        assert hosts.run(1, [sys.executable, "-c", look]).stdout.strip() != "sleep"
        # Private /dev/shm: each saw only its own probe file, and the machine's has none.
        assert shm0 == shm1 == "['hps-netns-probe']"
        assert not os.path.exists("/dev/shm/hps-netns-probe")
        # What namespace hosts share with each other: the kernel, so its boot id.
        assert boot0 == boot1 and net0 != net1
    assert hosts.residue() == []


def test_a_pulled_link_cuts_a_host_off_and_a_restored_one_joins_it_again():
    with NetnsHosts(2) as hosts:
        server = _serve(hosts, 1)
        hosts.set_link(1, up=False)
        cut = hosts.run(0, [sys.executable, "-c", CLIENT, hosts.address(1), "1"])
        assert cut.returncode == 3 and "TimeoutError" in cut.stdout, cut
        hosts.set_link(1, up=True)
        back = hosts.run(0, [sys.executable, "-c", CLIENT, hosts.address(1), "5"])
        assert back.returncode == 0 and back.stdout.strip() == "host1", back
        server.wait(timeout=10)


def test_nothing_is_left_behind_when_the_body_raises_with_processes_running():
    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with NetnsHosts(3) as hosts:
            sleepers = [hosts.popen(h, ["sleep", "300"]) for h in range(3)]
            # A grandchild that leaves the sleeper's process group still dies with its host.
            hosts.popen(0, ["sh", "-c", "setsid sleep 300 & wait"])
            raise Boom()
    assert hosts.residue() == []
    assert all(p.poll() is not None for p in sleepers)
    leftover = subprocess.run(["pgrep", "-f", "sleep 300"], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", leftover.stdout
