"""``doraforge doctor``: what this machine runs doraforge with, and what to do about gaps.

One line per check, each ``ok``, ``warn`` or ``fail`` with what was found and, unless ok,
what to do: Python and the packages doraforge depends on (against its own declared
ranges), the Dora CLI and the ``dora-rs`` node library (their versions, generation and
whether they can talk), MuJoCo's headless GL backend (a real off-screen render in a child
process), the default ports doraforge listens on, whether the home is writable, and what
the console's browser tests need. ``--json`` prints the same checks as data. The exit code
is 1 when any check fails (a warning does not), with one line on stderr naming them.

doraforge runs on Dora 1.1 (``dora-rs-cli`` and ``dora-rs`` 1.1.x). The CLI and the node
library must be of one generation: nodes of one cannot talk to the daemon of the other.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, requires, version
from importlib.util import find_spec
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from doraforge import dataflows, skills
from doraforge.cli.context import Context
from doraforge.registry.settings import ServerSettings
from doraforge.skill_runtime.dora import dora_version, node_library_version, require_minimum
from doraforge.skill_runtime.dora_generation import (
    INSTALL_HINT,
    generation,
    library_refusal,
    version_tuple,
)
from doraforge.skill_runtime.dora_run import (
    dora_binary,
    dora_environment,
    node_interpreter_environment,
    port_in_use,
)
from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.skill_runtime.manifest import load_manifest
from doraforge.wire import strict_yaml

type Status = Literal["ok", "warn", "fail"]

#: The distributions reported, in order; their ranges are doraforge's own requirements.
PACKAGES = (
    "doraforge",
    "dora-rs",
    "dora-rs-cli",
    "forge-tool",
    "forge-msgs",
    "forge-robot",
    "mujoco",
    "mcp",
    "fastapi",
    "pydantic",
    "pyarrow",
    "numpy",
)
MIN_PYTHON = (3, 12)
#: Debian's chromium, which the console's browser tests drive through Playwright.
CHROMIUM = Path("/usr/bin/chromium")
RENDER_TIMEOUT_S = 60.0
#: A lit box rendered off-screen at 32x32 in a child process (a broken GL stack may crash
#: the process that tries): prints the backend, the frame size and its brightest value.
_RENDER_PROBE = """\
from doraforge.sim.render import gl_backend
backend = gl_backend()
import mujoco
model = mujoco.MjModel.from_xml_string(
    "<mujoco><worldbody><light pos='0 0 1'/>"
    "<geom type='box' size='.1 .1 .1' rgba='1 0 0 1'/></worldbody></mujoco>"
)
data = mujoco.MjData(model)
mujoco.mj_forward(model, data)
with mujoco.Renderer(model, 32, 32) as renderer:
    renderer.update_scene(data)
    frame = renderer.render()
print(backend, frame.shape[1], frame.shape[0], int(frame.max()))
"""
_REQUIREMENT = re.compile(r"^([A-Za-z0-9._-]+)\s*([^;]*)")
_CLAUSE = re.compile(r"(<=|>=|==|!=|<|>|~=)\s*([0-9][0-9.]*)")


@dataclass(frozen=True)
class Check:
    """One line of the report: what was ``found`` and, unless ``ok``, what to ``do``."""

    name: str
    status: Status
    found: str
    do: str | None = None

    def line(self) -> str:
        return f"{self.status:<4}  {self.name}: {self.found}" + (
            f" -- {self.do}" if self.do else ""
        )


def _nodes_python() -> str:
    """The interpreter ``path: python`` nodes run with (``dora_run`` pins uv to it)."""
    return node_interpreter_environment({}, Path(sys.executable).parent)["UV_PYTHON"]


@dataclass(frozen=True)
class Machine:
    """What the checks look at; every part is injectable so each check is testable."""

    environ: Mapping[str, str]
    home: Path
    dora: str
    node_python: str = field(default_factory=lambda: _nodes_python())
    installed: Callable[[str], str | None] = field(default=lambda name: _installed(name))
    requirements: Callable[[], list[str]] = field(default=lambda: requires("doraforge") or [])
    python_version: str = platform.python_version()
    port_free: Callable[[int], bool] = field(default=lambda port: not port_in_use(port))
    render: Callable[[Mapping[str, str]], tuple[bool, str]] = field(
        default=lambda env: _render(env)
    )
    chromium: Path = CHROMIUM
    importable: Callable[[str], bool] = field(default=lambda name: find_spec(name) is not None)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = commands.add_parser(
        "doctor",
        help="check Python, packages, Dora, GL, ports, the home and the browser-test needs",
    )
    doctor.add_argument("--dora", default=None, help="the dora CLI to ask (default: beside python)")
    doctor.set_defaults(handler=_doctor)


def checks(machine: Machine) -> list[Check]:
    """Every check, in report order."""
    cli = _dora_cli(machine)
    return [
        _python(machine.python_version),
        *_packages(machine),
        cli,
        _dora_library(machine, cli),
        _gl(machine),
        *_ports(machine.port_free),
        _home(machine.home),
        _chromium(machine.chromium),
        _playwright(machine.importable),
    ]


# ---------------------------------------------------------------------- Python, packages


def _python(found: str) -> Check:
    parsed = version_tuple(found)
    if parsed is None or parsed[:2] < MIN_PYTHON:
        wanted = ".".join(map(str, MIN_PYTHON))
        return Check("python", "fail", found, f"doraforge needs Python >= {wanted}")
    return Check("python", "ok", found)


def _packages(machine: Machine) -> list[Check]:
    wanted = _ranges(machine.requirements())
    return [_package(name, machine.installed(name), wanted.get(name, "")) for name in PACKAGES]


def _ranges(requirements: Iterable[str]) -> dict[str, str]:
    """Runtime requirement ranges by normalised name (extras such as ``test`` left out)."""
    ranges = {}
    for requirement in requirements:
        found = _REQUIREMENT.match(requirement)
        if found is not None and "extra ==" not in requirement:
            ranges[found.group(1).lower().replace("_", "-")] = found.group(2).strip()
    return ranges


def _package(name: str, found: str | None, wanted: str) -> Check:
    install = f"pip install '{name}{wanted}'"
    if found is None:
        return Check(name, "fail", "not installed", install)
    if not _satisfies(found, wanted):
        return Check(name, "fail", f"{found}, doraforge needs {wanted}", install)
    return Check(name, "ok", found)


def _satisfies(found: str, wanted: str) -> bool:
    """Whether release ``found`` meets every ``<op><version>`` clause of ``wanted``."""
    have = _release(found)
    for op, text in _CLAUSE.findall(wanted):
        limit = _release(text)
        width = max(len(have), len(limit))
        a, b = have + (0,) * (width - len(have)), limit + (0,) * (width - len(limit))
        ok = {
            "<": a < b,
            "<=": a <= b,
            ">": a > b,
            ">=": a >= b,
            "==": a == b,
            "!=": a != b,
            "~=": a >= b and a[: len(limit) - 1] == b[: len(limit) - 1],
        }[op]
        if not ok:
            return False
    return True


def _release(text: str) -> tuple[int, ...]:
    found = re.match(r"\d+(?:\.\d+)*", text)
    return tuple(int(part) for part in found.group(0).split(".")) if found else (0,)


def _installed(distribution: str) -> str | None:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


# ---------------------------------------------------------------------- Dora


def _dora_cli(machine: Machine) -> Check:
    env = dora_environment(machine.environ)
    try:
        found = dora_version(machine.dora, env, minimum=None)
    except RuntimeStateError as exc:
        return Check("dora CLI", "fail", "not runnable", f"{exc.message}: {INSTALL_HINT}")
    label = f"{found} (Dora {generation(found)})"
    try:
        require_minimum(found, machine.dora)
    except RuntimeStateError as exc:
        return Check("dora CLI", "fail", label, exc.message)
    return Check("dora CLI", "ok", label)


def _dora_library(machine: Machine, cli: Check) -> Check:
    name = "dora node library (dora-rs)"
    found = node_library_version(machine.node_python, dora_environment(machine.environ))
    label = "not installed" if found is None else f"{found} (Dora {generation(found)})"
    cli_version = cli.found.split(" ", 1)[0]
    cli_parsed = version_tuple(cli_version)
    if cli_parsed is None:
        return Check(name, "warn", label, "not compared: the dora CLI did not answer")
    refused = library_refusal(cli_version, found)
    if refused is not None:
        return Check(name, "fail", label, refused)
    parsed = version_tuple(found) if found is not None else None
    if parsed is not None and parsed[:2] != cli_parsed[:2]:
        pin = f"{cli_parsed[0]}.{cli_parsed[1]}"
        do = f"Dora accepts the pair, doraforge is tested with one: pip install 'dora-rs=={pin}.*'"
        return Check(name, "warn", f"{label}, the CLI is {cli_version}", do)
    return Check(name, "ok", label)


# ---------------------------------------------------------------------- GL


def _gl(machine: Machine) -> Check:
    chosen = machine.environ.get("MUJOCO_GL", "").strip().lower()
    source = f"MUJOCO_GL={chosen}" if chosen else "MUJOCO_GL unset"
    works, detail = machine.render(machine.environ)
    if works:
        return Check("MuJoCo GL backend", "ok", f"{detail} ({source})")
    do = (
        "install Mesa's EGL (apt-get install libegl1 libgl1) or OSMesa (libosmesa6 with "
        "MUJOCO_GL=osmesa); the camera tools and the sim world cannot render without it"
    )
    return Check("MuJoCo GL backend", "fail", f"no off-screen render ({source}): {detail}", do)


def _render(environ: Mapping[str, str]) -> tuple[bool, str]:
    """Render one frame in a child process: ``(works, "egl, 32x32 render")`` or a reason."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _RENDER_PROBE],
            env=dict(environ),
            capture_output=True,
            text=True,
            timeout=RENDER_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"the render probe did not finish: {exc}"
    parts = done.stdout.split()
    if done.returncode != 0 or len(parts) != 4:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return False, last[:300]
    backend, width, height, brightest = parts
    if int(brightest) == 0:
        return False, f"{backend} rendered a black frame"
    return True, f"{backend}, a {width}x{height} render works"


# ---------------------------------------------------------------------- ports, home, browser


def default_ports() -> list[tuple[int, str, str]]:
    """``(port, who listens there, how to move it)`` for every fixed default port: the
    shipped dataflows' and skills' Gateways and ``doraforge serve``."""
    found: dict[int, tuple[list[str], str]] = {}
    for name in dataflows.names():
        port = _config_port(dataflows.dataflow(name).with_suffix(".gateway.yml"))
        if port is not None:
            found.setdefault(port, ([], "doraforge run/demo --port N"))[0].append(f"run {name}")
    for name in skills.names():
        port = urlsplit(load_manifest(skills.source(name)).gateway_url).port
        if port is not None:
            how = f"doraforge skill start {name} --port N"
            found.setdefault(port, ([], how))[0].append(f"skill {name}")
    serve = ServerSettings().port
    found.setdefault(serve, ([], "doraforge serve --port N"))[0].append("serve")
    return [(port, ", ".join(users), how) for port, (users, how) in sorted(found.items())]


def _config_port(config: Path) -> int | None:
    try:
        document = strict_yaml.load(config.read_text(encoding="utf-8"), aliases=True)
    except (OSError, strict_yaml.YAMLRefused):
        return None
    port = document.get("port") if isinstance(document, dict) else None
    return port if isinstance(port, int) else None


def _ports(port_free: Callable[[int], bool]) -> list[Check]:
    checks = []
    for port, users, how in default_ports():
        name = f"port {port} ({users})"
        if port_free(port):
            checks.append(Check(name, "ok", "free"))
        else:
            checks.append(Check(name, "warn", "in use", f"stop what listens there, or {how}"))
    return checks


def _home(home: Path) -> Check:
    """The home, or the nearest folder that would hold it, takes a file."""
    target = home
    while not target.exists() and target != target.parent:
        target = target.parent
    try:
        with tempfile.TemporaryFile(dir=target):
            pass
    except OSError as exc:
        do = f"choose a writable home with --home DIR or DORAFORGE_HOME ({exc.strerror})"
        return Check("home", "fail", f"{home} is not writable", do)
    return Check("home", "ok", f"{home} writable" + ("" if home.exists() else " (created on use)"))


def _chromium(chromium: Path) -> Check:
    if chromium.is_file() and os.access(chromium, os.X_OK):
        return Check("chromium (console browser tests)", "ok", str(chromium))
    do = "apt-get install chromium (only the console's browser tests need it)"
    return Check("chromium (console browser tests)", "warn", f"no {chromium}", do)


def _playwright(importable: Callable[[str], bool]) -> Check:
    if importable("playwright"):
        return Check("playwright (console browser tests)", "ok", "importable")
    do = "pip install 'doraforge[test]' (only the console's browser tests need it)"
    return Check("playwright (console browser tests)", "warn", "not importable", do)


# ---------------------------------------------------------------------- the command


def _doctor(ctx: Context, args: argparse.Namespace) -> int:
    machine = Machine(ctx.environ, ctx.home.root, args.dora or dora_binary())
    report = checks(machine)
    failed = [check.name for check in report if check.status == "fail"]
    worst: Status = (
        "fail" if failed else "warn" if any(c.status == "warn" for c in report) else "ok"
    )
    if ctx.out.as_json:
        ctx.out.data({"status": worst, "checks": [asdict(check) for check in report]})
    else:
        for check in report:
            # Plain print: a console would wrap a long line over several.
            print(check.line())
    if failed:
        ctx.out.fail(f"DOCTOR_FAILED: {len(failed)} failed: {', '.join(failed)}; fix each as shown")
    return 1 if failed else 0
