"""``doraforge doctor``: what this machine runs doraforge with, and what is missing.

Reports the Dora CLI (``dora --version``), the Dora node library (the ``dora-rs`` Python
package), ``forge-tool`` and ``forge-msgs``, Python, and MuJoCo's GL backend. Exits 0 when
everything is there, else 1 with one line per problem on stderr, each naming its fix.

doraforge runs on Dora 1.1 (``dora-rs-cli`` and ``dora-rs`` 1.1.x). The CLI and the node
library must be the same generation: nodes of one cannot talk to the daemon of the other.
"""

from __future__ import annotations

import argparse
import ctypes.util
import platform
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

from doraforge.cli.context import Context
from doraforge.skill_runtime.dora import dora_version
from doraforge.skill_runtime.dora_generation import INSTALL_HINT, generation, version_tuple
from doraforge.skill_runtime.dora_run import dora_binary
from doraforge.skill_runtime.errors import RuntimeStateError

#: The GL backends MuJoCo can render headless with, and the library each needs.
GL_LIBRARIES = {"egl": "EGL", "osmesa": "OSMesa"}


@dataclass(frozen=True)
class Check:
    """One line of the report: ``value`` found, or ``fix`` (one line) when it is missing."""

    name: str
    value: str | None
    fix: str | None = None


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = commands.add_parser(
        "doctor", help="report Dora, Forge, Python and GL versions; fail on what is missing"
    )
    doctor.add_argument("--dora", default=None, help="the dora CLI to ask (default: beside python)")
    doctor.set_defaults(handler=_doctor)


def installed(distribution: str) -> str | None:
    """The installed version of a Python distribution, ``None`` when absent."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def checks(
    dora: str,
    environ: Mapping[str, str],
    lookup: Callable[[str], str | None] = installed,
    find_library: Callable[[str], str | None] = ctypes.util.find_library,
) -> list[Check]:
    """Every check, in report order (the collaborators are injectable for tests)."""
    cli = _dora_cli(dora, environ)
    return [
        cli,
        _dora_library(lookup("dora-rs"), cli.value),
        _package("forge-tool", lookup("forge-tool")),
        _package("forge-msgs", lookup("forge-msgs")),
        Check("python", platform.python_version()),
        _gl_backend(environ, find_library),
    ]


def _dora_cli(dora: str, environ: Mapping[str, str]) -> Check:
    try:
        found = dora_version(dora, environ)
    except RuntimeStateError as exc:
        fix = exc.message if INSTALL_HINT in exc.message else f"{exc.message}: {INSTALL_HINT}"
        return Check("dora CLI", None, fix)
    return Check("dora CLI", f"{found} (Dora {generation(found)})")


def _dora_library(found: str | None, cli: str | None) -> Check:
    name = "dora node library (dora-rs)"
    if found is None:
        return Check(name, None, f"the dora Python package is not installed: {INSTALL_HINT}")
    parsed, cli_parsed = version_tuple(found), version_tuple(cli or "")
    if parsed is not None and cli_parsed is not None and parsed[:2] != cli_parsed[:2]:
        return Check(
            name,
            found,
            f"dora-rs {found} and the dora CLI {'.'.join(map(str, cli_parsed))} differ "
            "(nodes cannot talk to another "
            f"version's daemon): pip install 'dora-rs=={cli_parsed[0]}.{cli_parsed[1]}.*'",
        )
    return Check(name, f"{found} (Dora {generation(found)})")


def _package(name: str, found: str | None) -> Check:
    if found is None:
        return Check(name, None, f"{name} is not installed: pip install {name}")
    return Check(name, found)


def _gl_backend(environ: Mapping[str, str], find_library: Callable[[str], str | None]) -> Check:
    chosen = environ.get("MUJOCO_GL", "").strip().lower()
    if chosen:
        return Check("MuJoCo GL backend", f"{chosen} (MUJOCO_GL)")
    for backend, library in GL_LIBRARIES.items():
        if find_library(library):
            return Check("MuJoCo GL backend", backend)
    return Check(
        "MuJoCo GL backend",
        None,
        "neither EGL nor OSMesa is installed for headless rendering: "
        "apt-get install libegl1 (or libosmesa6), or set MUJOCO_GL",
    )


def _doctor(ctx: Context, args: argparse.Namespace) -> int:
    report = checks(args.dora or dora_binary(), ctx.environ)
    rows = [[check.name, check.value or "missing"] for check in report]
    raw = {check.name: {"version": check.value, "fix": check.fix} for check in report}
    ctx.out.table("doraforge doctor", ["component", "version"], rows, raw)
    problems = [check for check in report if check.fix is not None]
    for check in problems:
        ctx.out.fail(f"{check.name}: {check.fix}")
    return 1 if problems else 0
