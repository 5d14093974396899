"""Every doraforge error family ends a command with one line and exit status 1."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from doraforge import cli
from doraforge.cli import skill_commands
from doraforge.registry.errors import Conflict
from doraforge.wire.errors import StructuredError


@pytest.mark.parametrize(
    "error",
    [
        Conflict("REGISTRY_PORT_BUSY", "port 8765 on 127.0.0.1 is in use; pass --port N"),
        StructuredError("FORGE_TOOL_HOST_NOT_ALLOWED", "host evil.example is not allowed"),
    ],
)
def test_a_structured_error_is_one_line_and_exit_1(
    error: StructuredError, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing(_ctx: object, _args: argparse.Namespace) -> int:
        raise error

    monkeypatch.setattr(skill_commands, "_list", failing)  # bound when main() builds the parser
    assert cli.main(["skill", "list"]) == 1
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [f"doraforge: {error.code}: {error.message}"]
    assert "Traceback" not in captured.err


def test_skill_install_speaks_one_line_to_people_and_json_only_under_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "pick-place.tar.gz"
    assert (
        cli.main(
            ["--home", str(tmp_path / "h"), "skill", "pack", "pick-place", "--output", str(archive)]
        )
        == 0
    )
    capsys.readouterr()
    assert cli.main(["--home", str(tmp_path / "a"), "skill", "install", str(archive), "--yes"]) == 0
    human = capsys.readouterr().out
    assert human.startswith("installed pick-place ")
    with pytest.raises(json.JSONDecodeError):  # lines for people (the code it runs), no JSON
        json.loads(human)
    assert (
        cli.main(
            ["--home", str(tmp_path / "b"), "--json", "skill", "install", str(archive), "--yes"]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["name"] == "pick-place"
