"""``doraforge doctor``: the versions doraforge runs with, and a one-line fix per gap."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from doraforge.cli import doctor_command, main

VERSIONS = {"dora-rs": "1.1.0", "forge-tool": "2.0.0", "forge-msgs": "2.0.0"}


def fake_dora(tmp_path: Path, version: str) -> str:
    script = tmp_path / "dora"
    script.write_text(f"#!/bin/sh\necho 'dora-cli {version}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def report(
    tmp_path: Path, cli: str = "1.1.0", environ: dict[str, str] | None = None, **versions: str
) -> dict[str, doctor_command.Check]:
    found = {**VERSIONS, **{name.replace("_", "-"): value for name, value in versions.items()}}
    checks = doctor_command.checks(
        fake_dora(tmp_path, cli),
        {"PATH": "/usr/bin:/bin", **(environ or {})},
        lookup=lambda name: found.get(name) or None,
        find_library=lambda name: "libEGL.so.1" if name == "EGL" else None,
    )
    return {check.name: check for check in checks}


def test_a_complete_install_reports_every_version_and_no_fix(tmp_path: Path):
    checks = report(tmp_path)
    assert checks["dora CLI"].value == "1.1.0 (Dora 1.x)"
    assert checks["dora node library (dora-rs)"].value == "1.1.0 (Dora 1.x)"
    assert checks["forge-tool"].value == "2.0.0"
    assert checks["forge-msgs"].value == "2.0.0"
    assert checks["MuJoCo GL backend"].value == "egl"
    assert checks["python"].value
    assert all(check.fix is None for check in checks.values())


def test_an_old_dora_cli_names_the_install_command(tmp_path: Path):
    fix = report(tmp_path, cli="0.4.1")["dora CLI"].fix
    assert fix is not None
    assert "0.4.1 is older than 1.1" in fix
    assert "pip install 'dora-rs-cli>=1.1,<1.2'" in fix


def test_a_node_library_of_another_version_than_the_cli_is_a_problem(tmp_path: Path):
    fix = report(tmp_path, dora_rs="0.4.1")["dora node library (dora-rs)"].fix
    assert fix is not None
    assert "dora-rs 0.4.1 and the dora CLI 1.1.0 differ" in fix
    assert "pip install 'dora-rs==1.1.*'" in fix


@pytest.mark.parametrize("missing", ["dora-rs", "forge-tool", "forge-msgs"])
def test_a_missing_package_is_a_problem_with_its_fix(tmp_path: Path, missing: str):
    checks = report(tmp_path, **{missing.replace("-", "_"): ""})
    fixes = [check.fix for check in checks.values() if check.fix is not None]
    assert len(fixes) == 1
    assert "pip install" in fixes[0]


def test_mujoco_gl_from_the_environment_wins(tmp_path: Path):
    checks = report(tmp_path, environ={"MUJOCO_GL": "osmesa"})
    assert checks["MuJoCo GL backend"].value == "osmesa (MUJOCO_GL)"


def test_the_command_exits_0_on_this_install_and_1_with_a_fix_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    assert main(["--json", "doctor", "--dora", fake_dora(tmp_path, "1.1.0")]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["dora CLI"] == {"fix": None, "version": "1.1.0 (Dora 1.x)"}
    assert main(["--json", "doctor", "--dora", str(tmp_path / "absent")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("doraforge: dora CLI: cannot run")
    assert "pip install 'dora-rs-cli>=1.1,<1.2'" in err[0]


def test_run_refuses_a_dataflow_of_another_dora_generation_before_dora_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr("doraforge.cli.dora_binary", lambda: fake_dora(tmp_path, "0.4.1"))
    assert main(["run", "mock"]) == 1
    err = capsys.readouterr().err
    assert "SKILL_DORA_GENERATION: mock.yml needs Dora 1.x" in err
    assert "0.4.1 (Dora 0.x)" in err
