"""``doraforge doctor``: one ok/warn/fail line per check with what to do, ``--json``, and
an exit code that fails only on a failed check."""

from __future__ import annotations

import dataclasses
import json
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from doraforge.cli import doctor_command, main
from doraforge.cli.doctor_command import Check, Machine

INSTALLED: dict[str, str | None] = {
    "doraforge": "0.1.0",
    "dora-rs": "1.1.0",
    "dora-rs-cli": "1.1.0",
    "forge-tool": "2.0.0",
    "forge-msgs": "2.0.0",
    "forge-robot": "2.0.0",
    "mujoco": "4.0.0",
    "mcp": "1.30.0",
    "fastapi": "0.115.0",
    "pydantic": "2.7.0",
    "pyarrow": "17.0.0",
    "numpy": "2.0.0",
}


def script(tmp_path: Path, name: str, output: str) -> str:
    """An executable that prints ``output`` and exits 0."""
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\necho '{output}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def machine(tmp_path: Path, *, cli: str = "1.1.0", library: str = "1.1.0", **kw: Any) -> Machine:
    """A machine where everything is in order, but for what ``kw`` replaces."""
    installed = {**INSTALLED, **kw.pop("installed", {})}
    chromium = tmp_path / "chromium"
    script(tmp_path, "chromium", "")
    defaults: dict[str, Any] = {
        "environ": {"PATH": "/usr/bin:/bin"},
        "home": tmp_path / "home",
        "dora": script(tmp_path, "dora", f"dora-cli {cli}"),
        "node_python": script(tmp_path, "python", library),
        "installed": installed.get,
        "python_version": "3.12.1",
        "port_free": lambda port: True,
        "render": lambda env: (True, "egl, a 32x32 render works"),
        "chromium": chromium,
        "importable": lambda name: True,
    }
    return Machine(**{**defaults, **kw})


def report(found: Machine) -> dict[str, Check]:
    return {check.name: check for check in doctor_command.checks(found)}


def failing(checks: dict[str, Check]) -> dict[str, Check]:
    return {name: check for name, check in checks.items() if check.status != "ok"}


def test_a_complete_install_is_all_ok_with_the_versions_found(tmp_path: Path) -> None:
    checks = report(machine(tmp_path))
    assert failing(checks) == {}
    assert checks["dora CLI"].found == "1.1.0 (Dora 1.x)"
    assert checks["dora node library (dora-rs)"].found == "1.1.0 (Dora 1.x)"
    assert checks["forge-robot"].found == "2.0.0"
    assert checks["MuJoCo GL backend"].found == "egl, a 32x32 render works (MUJOCO_GL unset)"
    assert checks["home"].found == f"{tmp_path / 'home'} writable (created on use)"
    for name in doctor_command.PACKAGES:
        assert name in checks
    ports = [name for name in checks if name.startswith("port ")]
    assert len(ports) == len(doctor_command.default_ports())


def test_every_check_is_one_line_with_its_status_and_what_to_do(tmp_path: Path) -> None:
    line = Check("port 9001 (run sim)", "warn", "in use", "stop what listens there").line()
    assert line == "warn  port 9001 (run sim): in use -- stop what listens there"
    assert Check("python", "ok", "3.12.1").line() == "ok    python: 3.12.1"


def test_an_old_dora_cli_fails_naming_the_install_command(tmp_path: Path) -> None:
    check = report(machine(tmp_path, cli="0.4.1"))["dora CLI"]
    assert (check.status, check.found) == ("fail", "0.4.1 (Dora 0.x)")
    assert check.do is not None
    assert "0.4.1 is older than 1.1" in check.do
    assert "pip install 'dora-rs-cli>=1.1,<1.2'" in check.do


def test_a_dora_cli_that_does_not_run_fails_and_the_library_is_not_compared(tmp_path: Path) -> None:
    checks = report(machine(tmp_path, dora=str(tmp_path / "absent")))
    assert (checks["dora CLI"].status, checks["dora CLI"].found) == ("fail", "not runnable")
    assert checks["dora node library (dora-rs)"].status == "warn"


def test_a_node_library_of_another_generation_than_the_cli_fails_with_the_pin(
    tmp_path: Path,
) -> None:
    check = report(machine(tmp_path, library="0.4.1"))["dora node library (dora-rs)"]
    assert (check.status, check.found) == ("fail", "0.4.1 (Dora 0.x)")
    assert check.do is not None
    assert "cannot talk to the daemon of the dora CLI 1.1.0" in check.do
    assert check.do.endswith("pip install 'dora-rs==1.1.*'")


def test_a_node_library_of_the_same_generation_but_another_minor_is_a_warning(
    tmp_path: Path,
) -> None:
    check = report(machine(tmp_path, library="1.0.1"))["dora node library (dora-rs)"]
    assert check.status == "warn"
    assert check.found == "1.0.1 (Dora 1.x), the CLI is 1.1.0"
    assert check.do is not None
    assert "pip install 'dora-rs==1.1.*'" in check.do


def test_a_missing_node_library_fails(tmp_path: Path) -> None:
    check = report(machine(tmp_path, library=""))["dora node library (dora-rs)"]
    assert (check.status, check.found) == ("fail", "not installed")


def test_a_missing_package_fails_with_doraforges_own_range(tmp_path: Path) -> None:
    checks = failing(report(machine(tmp_path, installed={"forge-robot": None})))
    assert list(checks) == ["forge-robot"]
    assert checks["forge-robot"].status == "fail"
    assert checks["forge-robot"].do == "pip install 'forge-robot<3,>=2.0'"


def test_a_package_outside_doraforges_range_fails(tmp_path: Path) -> None:
    checks = failing(report(machine(tmp_path, installed={"mujoco": "2.3.7", "mcp": "2.0.0"})))
    assert sorted(checks) == ["mcp", "mujoco"]
    assert checks["mujoco"].found == "2.3.7, doraforge needs <5,>=3.2"
    assert checks["mcp"].do == "pip install 'mcp<2,>=1.20'"


def test_an_old_python_fails(tmp_path: Path) -> None:
    check = report(machine(tmp_path, python_version="3.11.9"))["python"]
    assert check.status == "fail"
    assert check.do == "doraforge needs Python >= 3.12"


def test_a_gl_stack_that_cannot_render_fails_naming_the_reason_and_the_packages(
    tmp_path: Path,
) -> None:
    broken = machine(
        tmp_path,
        environ={"MUJOCO_GL": "egl"},
        render=lambda env: (False, "RuntimeError: cannot initialize EGL"),
    )
    check = report(broken)["MuJoCo GL backend"]
    assert check.status == "fail"
    assert (
        check.found == "no off-screen render (MUJOCO_GL=egl): RuntimeError: cannot initialize EGL"
    )
    assert check.do is not None
    assert "apt-get install libegl1" in check.do


def test_the_render_probe_renders_a_real_frame_here() -> None:
    works, detail = doctor_command._render({"PATH": "/usr/bin:/bin"})
    assert works, detail
    assert detail.endswith("a 32x32 render works")


def test_the_default_ports_are_read_from_the_shipped_configs() -> None:
    ports = {port: (users, how) for port, users, how in doctor_command.default_ports()}
    assert ports[9001] == ("run mock, run sim", "doraforge run/demo --port N")
    assert ports[9201] == ("skill pick-place", "doraforge skill start pick-place --port N")
    assert ports[9011] == ("skill robot-arm", "doraforge skill start robot-arm --port N")
    assert ports[8765] == ("serve", "doraforge serve --port N")


def test_a_busy_default_port_is_a_warning_saying_how_to_move_it(tmp_path: Path) -> None:
    checks = report(machine(tmp_path, port_free=lambda port: port != 8765))
    assert failing(checks) == {"port 8765 (serve)": checks["port 8765 (serve)"]}
    check = checks["port 8765 (serve)"]
    assert (check.status, check.found) == ("warn", "in use")
    assert check.do == "stop what listens there, or doraforge serve --port N"


def test_a_port_something_listens_on_is_not_free() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        machine = doctor_command.Machine(environ={}, home=Path("/nonexistent"), dora="dora")
        assert machine.port_free(listener.getsockname()[1]) is False


def test_a_home_that_cannot_take_a_file_fails(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    check = report(machine(tmp_path, home=blocker / "home"))["home"]
    assert (check.status, check.found) == ("fail", f"{blocker / 'home'} is not writable")
    assert check.do is not None
    assert "--home DIR or DORAFORGE_HOME" in check.do


def test_an_existing_writable_home_is_ok(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    assert report(machine(tmp_path))["home"].found == f"{tmp_path / 'home'} writable"


def test_missing_browser_test_needs_are_warnings_only(tmp_path: Path) -> None:
    found = machine(tmp_path, chromium=tmp_path / "no-chromium", importable=lambda name: False)
    checks = failing(report(found))
    assert {check.status for check in checks.values()} == {"warn"}
    assert "apt-get install chromium" in (checks["chromium (console browser tests)"].do or "")
    assert "pip install" in (checks["playwright (console browser tests)"].do or "")


def test_the_command_prints_json_and_exits_0_on_this_install(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--json", "doctor"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["status"] in ("ok", "warn")
    checks = {check["name"]: check for check in listed["checks"]}
    assert checks["dora CLI"]["status"] == "ok"
    assert checks["dora CLI"]["found"].endswith("(Dora 1.x)")
    assert {check["status"] for check in checks.values()} <= {"ok", "warn"}
    assert set(dataclasses.asdict(Check("x", "ok", "y"))) == set(next(iter(checks.values())))


def test_the_command_prints_one_line_per_check_and_exits_1_on_a_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--dora", str(tmp_path / "absent")]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert any(line.startswith("fail  dora CLI: not runnable -- cannot run") for line in lines)
    assert all(line.split()[0] in ("ok", "warn", "fail") for line in lines)
    assert captured.err == "doraforge: DOCTOR_FAILED: 1 failed: dora CLI; fix each as shown\n"


def fake_dora(tmp_path: Path, version: str) -> str:
    return script(tmp_path, "dora", f"dora-cli {version}")


def test_run_refuses_a_dataflow_of_another_dora_generation_before_dora_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(
        "doraforge.cli.run_command.dora_binary", lambda: fake_dora(tmp_path, "0.4.1")
    )
    assert main(["run", "mock"]) == 1
    err = capsys.readouterr().err
    assert "SKILL_DORA_GENERATION: mock.yml needs Dora 1.x" in err
    assert "0.4.1 (Dora 0.x)" in err
