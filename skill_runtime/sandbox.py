"""``skill start --sandbox``: each node of the launch copy in bubblewrap, the host read-only
and the PAOS home hidden but for the skill's own files (network and PIDs stay shared:
see :data:`ISOLATION`)."""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.skill_runtime.launch import runs_gateway
from doraforge.wire import strict_yaml

BWRAP = "bwrap"
#: Namespaces and capabilities every sandboxed node gets. Measured with dora 1.1 and
#: bubblewrap 0.8, network and PIDs must stay shared: a node dials its daemon over loopback
#: TCP (a new network namespace: ``Could not initiate node``), and the node library's
#: orphan guard looks for the Dora process that spawned it by pid (in a new PID namespace
#: it kills the node).
ISOLATION = ("--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--cap-drop", "ALL")
#: Devices passed through when present: Dora's shared memory and GPUs for rendering.
DEVICES = ("/dev/shm", "/dev/dri")


@dataclass(frozen=True)
class SandboxPlaces:
    """What a skill's nodes see of its home: ``home`` hidden but for the read-only
    ``bundle``, ``launch_dir`` and ``artifacts``; the Gateway's ``token_file`` (read-only)
    and ``journal_dir`` (writable) for the Gateway node only."""

    home: Path
    bundle: Path
    launch_dir: Path
    artifacts: Path
    token_file: Path
    journal_dir: Path
    #: What the nodes' interpreter runs from (its environment, the checkout of an editable
    #: install), bound back read-only when a private ``/tmp`` would hide it.
    interpreter: tuple[Path, ...] = ()


def require_bwrap(search_path: str) -> str:
    """The ``bwrap`` to run, or :class:`RuntimeStateError` ``SKILL_PREFLIGHT_FAILED``
    (``details["missing"]["binaries"]``) naming the package."""
    found = shutil.which(BWRAP, path=search_path)
    if found is None:
        raise RuntimeStateError(
            "SKILL_PREFLIGHT_FAILED",
            "missing binaries: bwrap (--sandbox runs every node in bubblewrap: install the "
            "bubblewrap package)",
            details={"missing": {"binaries": [BWRAP]}},
        )
    return found


def sandbox_launch_copy(
    launch: Path, places: SandboxPlaces, *, bwrap: str, search_path: str
) -> None:
    """Rewrite ``launch`` (a launch copy) so each node runs inside bubblewrap.

    Raises ``SKILL_SANDBOX_UNSUPPORTED`` for a node that cannot be wrapped (``dynamic``,
    no ``path``, a ``git`` source) and ``SKILL_PREFLIGHT_FAILED`` for a command not found
    on ``search_path``."""
    document = strict_yaml.load(launch.read_text(encoding="utf-8"), aliases=True)
    for node in document["nodes"]:
        _wrap(node, places, bwrap, search_path)
    launch.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")


def _wrap(node: dict[str, Any], places: SandboxPlaces, bwrap: str, search_path: str) -> None:
    path = node.get("path")
    if not isinstance(path, str) or path == "dynamic" or node.get("git") is not None:
        raise RuntimeStateError(
            "SKILL_SANDBOX_UNSUPPORTED",
            f"node {node.get('id')} cannot run in the sandbox (only nodes Dora spawns from "
            "a path can); start without --sandbox",
            details={"node": str(node.get("id"))},
        )
    command = path if "/" in path else shutil.which(path, path=search_path)
    if command is None:
        raise RuntimeStateError(
            "SKILL_PREFLIGHT_FAILED",
            f"missing commands: {path}",
            details={"missing": {"commands": [path]}},
        )
    options = bwrap_options(places, gateway=runs_gateway(node))
    args = node.get("args")
    rest = args if isinstance(args, str) else ""
    node["path"] = bwrap
    node["args"] = shlex.join([*options, "--", command]) + (f" {rest}" if rest else "")


def bwrap_options(places: SandboxPlaces, *, gateway: bool) -> list[str]:
    """The bubblewrap options of one node (order matters: a mount hides what is under it,
    so the home is hidden before its visible parts are bound back)."""
    options = [*ISOLATION, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for device in DEVICES:
        options += ["--dev-bind-try", device, device]
    options += ["--tmpfs", "/tmp"]
    for needed in places.interpreter:
        if needed.is_relative_to("/tmp"):
            options += ["--ro-bind-try", str(needed), str(needed)]
    options += ["--tmpfs", str(places.home)]
    visible: Mapping[Path, str] = {
        places.bundle: "--ro-bind",
        places.launch_dir: "--ro-bind",
        places.artifacts: "--ro-bind-try",
    }
    if gateway:
        visible = {**visible, places.token_file: "--ro-bind", places.journal_dir: "--bind"}
    for where, how in visible.items():
        options += [how, str(where), str(where)]
    return options


def interpreter_places() -> tuple[Path, ...]:
    """Where this interpreter's environment and doraforge's own files live (an editable
    install runs from its checkout): the nodes run the same interpreter."""
    import doraforge

    return (Path(sys.prefix).absolute(), Path(doraforge.__file__).resolve().parents[1])
