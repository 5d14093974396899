"""The wheel, installed outside the checkout, works as a new user would use it.

How the install stays offline, honest and fast: the wheel is built from a copy of the
package folders (``pip wheel --no-build-isolation`` with this venv's setuptools) and
installed with ``pip --python <fresh venv> install --no-deps --no-index`` into a fresh venv
under ``tmp_path`` (``venv --without-pip``). Its third-party dependencies are this venv's:
a ``.pth`` file appends this venv's ``site-packages`` to the fresh one's ``sys.path`` (after
the wheel, and without processing the ``.pth`` files there, so the checkout's editable
finder stays off), and the scripts of doraforge's runtime dependencies (``dora``, ``uv``, …)
are put in the fresh venv's ``bin`` as pip would have put them. Every command runs from an
unrelated empty directory with a minimal environment (no ``PYTHONPATH``), and the tests
assert that ``doraforge`` is imported from the fresh venv and that nothing is written into
its ``site-packages`` or the working directory.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from doraforge.skill_runtime.dora_run import free_port
from tests.paths import PROJECT_ROOT
from tests.support.live_server import stop_run
from tests.support.processes import descendants
from tests.support.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

VERSION = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["version"]
#: What is never part of a package folder's shipped content.
NOT_SHIPPED = shutil.ignore_patterns("__pycache__", "*.pyc", "out", ".gitignore")
BUILD_TIMEOUT_S = 180.0
COMMAND_TIMEOUT_S = 120.0
DEMO_TIMEOUT_S = 240.0
GATEWAY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 60.0
#: Data that modules open at run time; each must be in the wheel.
REQUIRED_DATA = (
    "doraforge/py.typed",
    "doraforge/dataflows/mock.yml",
    "doraforge/dataflows/mock.gateway.yml",
    "doraforge/dataflows/sim.yml",
    "doraforge/dataflows/sim.gateway.yml",
    "doraforge/dataflows/zenoh-overlay.json5",
    "doraforge/skills/pick-place/skill.yaml",
    "doraforge/skills/pick-place/SKILL.md",
    "doraforge/skills/pick-place/start.sh",
    "doraforge/skills/pick-place/profiles/sim/dataflow.yml",
    "doraforge/skills/pick-place/profiles/sim/gateway.yml",
    "doraforge/paos/store/schema.sql",
    "doraforge/registry/context/fixtures/agent_context.yml",
    "doraforge/sim/assets/cell.xml",
    "doraforge/sim/assets/arm.xml",
    "doraforge/nodes/robot/profiles/sim_arm.yml",
)


@dataclass(frozen=True)
class Installed:
    """A fresh venv holding the wheel, and where and how its commands run."""

    venv: Path
    site_packages: Path
    home: Path
    cwd: Path
    env: dict[str, str]

    @property
    def doraforge(self) -> str:
        return str(self.venv / "bin" / "doraforge")

    def run(
        self, *args: str, timeout_s: float = COMMAND_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        """``doraforge ARGS`` from the unrelated directory; fails the test unless it exits 0."""
        done = subprocess.run(
            [self.doraforge, *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        assert done.returncode == 0, f"doraforge {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done


# ------------------------------------------------------------------------------- building


def _package_folders() -> list[str]:
    """The folders ``doraforge/`` links into the namespace (``gateway``, ``nodes``, …)."""
    links = (PROJECT_ROOT / "doraforge").iterdir()
    return sorted(link.name for link in links if link.is_symlink())


def _source_copy(into: Path) -> Path:
    """What the wheel is built from: pyproject, README, doraforge/ (its links kept) and
    the folders they point at, without caches or run output — so no build ever writes into
    the checkout and no stale ``build/`` leaks into the wheel."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(PROJECT_ROOT / name, into / name)
    shutil.copytree(
        PROJECT_ROOT / "doraforge", into / "doraforge", symlinks=True, ignore=NOT_SHIPPED
    )
    for folder in _package_folders():
        shutil.copytree(PROJECT_ROOT / folder, into / folder, ignore=NOT_SHIPPED)
    return into


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _source_copy(tmp_path_factory.mktemp("source"))


@pytest.fixture(scope="module")
def wheel(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*command, "--no-index", "--wheel-dir", str(dist), str(source)],
        check=True,
        capture_output=True,
        timeout=BUILD_TIMEOUT_S,
    )
    [built] = dist.glob("doraforge-*.whl")
    return built


# ----------------------------------------------------------------------------- installing


def _purelib(python: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_path('purelib'))"
    found = subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=COMMAND_TIMEOUT_S,
    )
    return Path(found.stdout.strip())


def _runtime_closure() -> list[importlib.metadata.Distribution]:
    """The installed distributions doraforge needs at run time (no extras), itself too."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = ["doraforge"]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[name] = dist = importlib.metadata.distribution(name)
            for raw in dist.requires or []:
                requirement = Requirement(raw)
                if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                    todo.append(requirement.name)
    return list(found.values())


def _dependency_scripts(venv: Path) -> None:
    """The scripts doraforge's dependencies installed in this venv's ``bin`` (``dora``,
    ``uv``, …), in the fresh venv's: a Python script with its shebang pointed at the fresh
    interpreter, a binary linked."""
    ours = Path(sys.executable).parent
    for dist in _runtime_closure():
        if canonicalize_name(dist.metadata["Name"]) == "doraforge":
            continue
        for file in dist.files or []:
            script = Path(os.path.normpath(str(dist.locate_file(file))))
            if script.parent == ours:
                _install_script(script, venv / "bin" / script.name, ours)


def _install_script(script: Path, target: Path, ours: Path) -> None:
    content = script.read_bytes()
    first, _, rest = content.partition(b"\n")
    if not (first.startswith(b"#!") and str(ours).encode() in first):
        target.symlink_to(script)
        return
    target.write_bytes(f"#!{target.parent / 'python'}\n".encode() + rest)
    target.chmod(0o755)


def _fresh_venv(wheel: Path, root: Path) -> Installed:
    venv = root / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        check=True,
        timeout=COMMAND_TIMEOUT_S,
    )
    python = venv / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install"]
    subprocess.run(
        [*install, "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=BUILD_TIMEOUT_S,
    )
    site_packages = _purelib(python)
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (site_packages / "zz_test_dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    _dependency_scripts(venv)
    home, cwd = root / "home", root / "elsewhere"
    home.mkdir()
    cwd.mkdir()
    env = {
        "PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "HOME": str(home),
        "TMPDIR": str(root),
        "DORAFORGE_HOME": str(home / "paos"),
        "LANG": "C.UTF-8",
    }
    return Installed(venv, site_packages, home, cwd, env)


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    fresh = _fresh_venv(wheel, tmp_path_factory.mktemp("install"))
    yield fresh
    assert _survivors(fresh.venv) == [], "a process from the fresh venv outlived the tests"


def _tree(root: Path) -> set[tuple[str, int]]:
    """Every file under ``root`` but bytecode caches, with its size."""
    return {
        (str(path.relative_to(root)), path.stat().st_size)
        for path in root.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


@contextlib.contextmanager
def _untouched(installed: Installed) -> Iterator[None]:
    """Assert that the block writes nothing into the installed package, nor into the
    directory the commands run from."""
    package = installed.site_packages / "doraforge"
    before, cwd = _tree(package), set(installed.cwd.iterdir())
    yield
    assert _tree(package) == before, "something was written into site-packages/doraforge"
    assert set(installed.cwd.iterdir()) == cwd, "something was written into the cwd"


def _survivors(venv: Path) -> list[psutil.Process]:
    """Live processes started from the fresh venv (its python, doraforge or dora)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            if str(venv) in cmdline and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
    return found


# ---------------------------------------------------------------------------------- tests


def test_the_wheel_holds_one_import_package_with_every_file_of_its_folders(
    wheel: Path, source: Path
) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [top_level] = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        [record] = [n for n in names if n.endswith(".dist-info/RECORD")]
        assert archive.read(top_level).decode().split() == ["doraforge"]
        rows = archive.read(record).decode().splitlines()
        start_sh = archive.getinfo("doraforge/skills/pick-place/start.sh")
    recorded = {row.split(",")[0] for row in rows}
    assert recorded == names
    assert {name.split("/")[0] for name in recorded if ".dist-info/" not in name} == {"doraforge"}
    assert set(REQUIRED_DATA) <= names
    shipped = {
        f"doraforge/{path.relative_to(source)}"
        for folder in _package_folders()
        for path in (source / folder).rglob("*")
        if path.is_file()
    }
    assert shipped - names == set(), "package folder files missing from the wheel"
    assert (start_sh.external_attr >> 16) & stat.S_IXUSR, "start.sh lost its exec bit"


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: Installed) -> None:
    code = "import doraforge.gateway; print(doraforge.gateway.__file__)"
    found = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-c", code],
        cwd=installed.cwd,
        env=installed.env,
        capture_output=True,
        text=True,
        check=True,
        timeout=COMMAND_TIMEOUT_S,
    )
    module = Path(found.stdout.strip())
    assert module.is_relative_to(installed.site_packages / "doraforge" / "gateway")
    assert not (installed.site_packages / "doraforge" / "gateway").is_symlink()
    start_sh = installed.site_packages / "doraforge" / "skills" / "pick-place" / "start.sh"
    assert start_sh.stat().st_mode & stat.S_IXUSR


def test_version_prints_the_distribution_version(installed: Installed) -> None:
    assert installed.run("--version").stdout == f"doraforge {VERSION}\n"


def test_the_mock_demo_completes_from_an_unrelated_directory(installed: Installed) -> None:
    with _untouched(installed):
        done = installed.run("demo", "--mock", timeout_s=DEMO_TIMEOUT_S)
    assert "Demo complete." in done.stdout


def test_a_shipped_skill_packs_by_name_installs_and_lists(installed: Installed) -> None:
    packed = json.loads(installed.run("--json", "skill", "pack", "pick-place").stdout)
    archive = installed.cwd / "pick-place.tar.gz"
    assert Path(packed["path"]) == archive
    with _untouched(installed):
        installed.run("skill", "install", str(archive), "--yes")
        skills = json.loads(installed.run("--json", "skill", "list").stdout)
        tasks = json.loads(installed.run("--json", "task", "list").stdout)
    assert [(skill["name"], skill["version"]) for skill in skills] == [("pick-place", "1.0.0")]
    assert Path(skills[0]["path"]).is_relative_to(installed.home / "paos")
    assert tasks == []


def _status(url: str, token: str | None) -> int | None:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    try:
        return httpx.get(url, headers=headers, timeout=1).status_code
    except httpx.HTTPError:
        return None


def _gateway_python(process: subprocess.Popen[bytes]) -> str:
    """The interpreter of the run's Gateway node."""
    for child in descendants(process.pid):
        with contextlib.suppress(psutil.NoSuchProcess):
            cmdline = child.cmdline()
            if "doraforge.gateway" in cmdline:
                return cmdline[0]
    return ""


def test_run_of_a_shipped_dataflow_serves_tools_then_stops_cleanly(installed: Installed) -> None:
    port, token = free_port(), secrets.token_urlsafe(24)
    env = {**installed.env, "DORAFORGE_GATEWAY_PORT": str(port), "DORAFORGE_GATEWAY_TOKEN": token}
    log = installed.venv.parent / "run-mock.log"
    tools = f"http://127.0.0.1:{port}/tools"
    with _untouched(installed), log.open("wb") as output:
        process = subprocess.Popen(
            [installed.doraforge, "run", "mock"],
            cwd=installed.cwd,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            eventually(
                lambda: _status(tools, token) == 200,
                within=GATEWAY_TIMEOUT_S,
                what="the Gateway to answer",
                detail=lambda: log.read_text(errors="replace"),
            )
            assert _status(tools, None) == 401
            assert Path(_gateway_python(process)).is_relative_to(installed.venv)
        finally:
            returncode = stop_run(process, STOP_TIMEOUT_S)
    text = log.read_text(errors="replace")
    assert returncode == 0, text
    assert "Gateway authentication: bearer token from $DORAFORGE_GATEWAY_TOKEN" in text
    assert "stopping the dataflow (SIGINT; killed after" in text
    assert token not in text
    [run_dir] = (installed.home / ".local" / "state" / "doraforge" / "runs").glob("mock-*")
    assert list(run_dir.glob("out/*/log_gateway.jsonl")), "dora's logs are not in the run dir"
