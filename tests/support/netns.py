"""A second computer on this host: a Linux network namespace joined to this one by a veth
pair (``ip netns``, ``ip link`` from iproute2; root only).

The namespace has a network stack of its own: its loopback is not this host's, and what
crosses between the two goes over the veth link, where the tests count it and cut it
(:meth:`RemoteHost.disconnect`). Each namespace is named ``doraforge-<pid>-<tag>`` after
the process that made it; one a dead process left behind (a test run killed outright) is
removed the next time one is made.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import secrets
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

PREFIX = "doraforge"
_OURS = re.compile(rf"^{PREFIX}-(\d+)-([0-9a-f]{{6}}|probe)\b")
_IP_TIMEOUT_S = 10.0
_LINKS = 2**14  # /30 networks in 10.200.0.0/16


def _ip(*args: str, namespace: str | None = None) -> subprocess.CompletedProcess[str]:
    command = (
        ["ip", *args] if namespace is None else ["ip", "netns", "exec", namespace, "ip", *args]
    )
    return subprocess.run(command, capture_output=True, text=True, timeout=_IP_TIMEOUT_S)


def _checked(*args: str, namespace: str | None = None) -> None:
    done = _ip(*args, namespace=namespace)
    if done.returncode != 0:
        raise OSError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")


def _quietly(*args: str) -> None:
    """An ``ip`` command of a clean-up, which must not stop the clean-ups after it."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        _ip(*args)


def unavailable() -> str | None:
    """Why network namespaces cannot be made here (tried with a probe namespace), or
    ``None`` when they can."""
    probe = f"{PREFIX}-{os.getpid()}-probe"
    try:
        made = _ip("netns", "add", probe)
    except FileNotFoundError:
        return "network namespaces need iproute2's ip command (apt-get install iproute2)"
    except subprocess.TimeoutExpired:
        return "ip netns add did not answer"
    if made.returncode != 0:
        return (
            f"network namespaces cannot be made here ({made.stderr.strip()}): they need root "
            "with CAP_SYS_ADMIN (not a default container)"
        )
    _quietly("netns", "delete", probe)
    return None


@dataclass(frozen=True)
class RemoteHost:
    """The namespace ``name`` at ``address``, reached from this host's ``local_address``
    over the veth ``local_link`` (this side) / ``remote_link`` (its side)."""

    name: str
    address: str
    local_address: str
    local_link: str
    remote_link: str

    @property
    def launcher(self) -> tuple[str, ...]:
        """The command prefix that runs a program on this host."""
        return ("ip", "netns", "exec", self.name)

    def runs(self, pid: int) -> bool:
        """Whether process ``pid`` lives in this host's network stack."""
        mine = Path(f"/run/netns/{self.name}").stat().st_ino
        return Path(f"/proc/{pid}/ns/net").stat().st_ino == mine

    def bytes_received(self) -> int:
        """Bytes that came over the link from this host, counted on this side."""
        statistics = Path(f"/sys/class/net/{self.local_link}/statistics/rx_bytes")
        return int(statistics.read_text())

    def disconnect(self) -> None:
        """Cut the link (a partition: both hosts and every process on them keep running)."""
        _checked("link", "set", self.local_link, "down")

    def reconnect(self) -> None:
        _checked("link", "set", self.local_link, "up")


def _subnet(tag: str) -> tuple[str, str]:
    """A /30 for the link in 10.200.0.0/16 that no interface here uses yet: (ours, its)."""
    used = _ip("-o", "-4", "addr", "show").stdout
    base = int(ipaddress.IPv4Address("10.200.0.0"))
    start = int(tag, 16) % _LINKS
    for step in range(64):
        network = ipaddress.IPv4Network((base + (start + step) % _LINKS * 4, 30))
        ours, theirs = (str(host) for host in network.hosts())
        if f" {ours}/" not in used and f" {theirs}/" not in used:
            return ours, theirs
    raise OSError("no free /30 in 10.200.0.0/16 for a test link")


def remove_stale() -> None:
    """Delete the namespaces (their processes first, then their links) of test processes
    that are gone: a run killed outright leaves them behind."""
    for line in _ip("netns", "list").stdout.splitlines():
        found = _OURS.match(line.strip())
        if found and not psutil.pid_exists(int(found.group(1))):
            for pid in _ip("netns", "pids", found.group(0)).stdout.split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            _quietly("link", "delete", f"dfw{found.group(2)}")
            _quietly("netns", "delete", found.group(0))


@contextlib.contextmanager
def remote_host() -> Iterator[RemoteHost]:
    """A fresh namespace linked to this host; deleted (with its link) on the way out.

    Whatever runs in it must be stopped first: a namespace's stack outlives its name while
    a process still holds it."""
    remove_stale()
    tag = secrets.token_hex(3)
    name = f"{PREFIX}-{os.getpid()}-{tag}"
    ours, theirs = _subnet(tag)
    host = RemoteHost(name, theirs, ours, local_link=f"dfw{tag}", remote_link=f"dfr{tag}")
    _checked("netns", "add", name)
    try:
        _checked("link", "add", host.local_link, "type", "veth", "peer", "name", host.remote_link)
        _checked("link", "set", host.remote_link, "netns", name)
        _checked("addr", "add", f"{ours}/30", "dev", host.local_link)
        _checked("link", "set", host.local_link, "up")
        _checked("addr", "add", f"{theirs}/30", "dev", host.remote_link, namespace=name)
        _checked("link", "set", host.remote_link, "up", namespace=name)
        _checked("link", "set", "lo", "up", namespace=name)
        yield host
    finally:
        _quietly("link", "delete", host.local_link)
        _quietly("netns", "delete", name)
