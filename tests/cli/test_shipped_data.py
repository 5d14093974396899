"""Shipped dataflows and skills by name from any directory; ``--version``; private run copies."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

from doraforge import dataflows, skills
from doraforge.cli import main
from doraforge.skill_runtime.dora_run import new_run_directory, private_copy


def test_version_prints_the_installed_distribution_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--version"])
    assert caught.value.code == 0
    assert capsys.readouterr().out == f"doraforge {importlib.metadata.version('doraforge')}\n"


@pytest.mark.parametrize("spec", ["mock", "mock.yml", "dataflows/mock.yml"])
def test_a_shipped_dataflow_is_found_by_name_or_checkout_path_from_any_directory(
    spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    found = dataflows.locate(spec)
    assert found == dataflows.dataflow("mock")
    assert dataflows.is_shipped(found)


def test_an_existing_file_wins_over_a_shipped_name_and_is_not_shipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mock.yml").write_text("nodes: []\n")
    assert dataflows.locate("mock.yml") == Path("mock.yml")
    assert not dataflows.is_shipped(Path("mock.yml"))


@pytest.mark.parametrize("spec", ["nope", "elsewhere/mock.yml", "mock.gateway"])
def test_an_unknown_dataflow_is_refused_naming_the_shipped_ones(
    spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"shipped dataflows: mock, openarm-dummy, sim"):
        dataflows.locate(spec)


def test_a_private_copy_holds_the_configs_but_no_run_output_or_python(tmp_path: Path) -> None:
    source = tmp_path / "shipped"
    (source / "out" / "run-1").mkdir(parents=True)
    (source / "out" / "run-1" / "log_gateway.jsonl").write_text("{}\n")
    for name in ("mock.yml", "mock.gateway.yml", "__init__.py"):
        (source / name).write_text("x: 1\n")
    copy = private_copy(source / "mock.yml", tmp_path / "run")
    assert copy == tmp_path / "run" / "mock.yml"
    assert sorted(p.name for p in copy.parent.iterdir()) == ["mock.gateway.yml", "mock.yml"]


def test_run_directories_are_fresh_and_private_under_the_users_state_directory(
    tmp_path: Path,
) -> None:
    environ = {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path / "home")}
    first, second = new_run_directory(environ, "mock"), new_run_directory(environ, "mock")
    assert first != second
    assert first.parent == tmp_path / "state" / "doraforge" / "runs"
    assert first.name.startswith("mock-")
    assert first.stat().st_mode & 0o777 == 0o700
    fallback = new_run_directory({"HOME": str(tmp_path / "home")}, "sim")
    assert fallback.parent == tmp_path / "home" / ".local" / "state" / "doraforge" / "runs"


def test_skill_pack_of_a_shipped_skill_by_name_writes_into_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert "pick-place" in skills.names()
    code = main(["--home", str(tmp_path / "home"), "--json", "skill", "pack", "pick-place"])
    assert code == 0
    packed = json.loads(capsys.readouterr().out)
    assert packed["path"] == str(tmp_path / "pick-place.tar.gz")
    assert (tmp_path / "pick-place.tar.gz").stat().st_size == packed["size"]


def test_skill_pack_of_an_unknown_name_fails_with_one_line_naming_the_shipped_skills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["--home", str(tmp_path / "home"), "skill", "pack", "nope"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "shipped skills: pick-place" in err
