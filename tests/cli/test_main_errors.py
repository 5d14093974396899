"""Every doraforge error family ends a command with one line and exit status 1."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from doraforge import cli
from doraforge.cli import errors, skill_commands
from doraforge.paos.errors import ForgeHttpError
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


@pytest.mark.parametrize(
    ("code", "details", "message"),
    [
        (
            "FORGE_TOOL_ACTION_ADMISSION_REJECTED",
            {"provider_code": "FORGE_ENDPOINT_CAPACITY"},
            "move_to_pose is in progress",
        ),
        ("FORGE_TOOL_GATEWAY_BUSY", {"max_concurrency": 1}, "arm.home is at max_concurrency 1"),
    ],
)
def test_a_call_refused_as_busy_says_to_wait_or_cancel_the_running_one(
    code: str, details: dict[str, object], message: str
) -> None:
    error = ForgeHttpError(code, message, status_code=503, payload=None, details=details)
    args = argparse.Namespace(tool_id="arm.home", skill="pick-place", gateway=None)
    assert errors.line(error, args) == (
        f"{code}: {message}; a call already running holds it: try again once that ends, or "
        "cancel that call (Ctrl-C where it was started, or Cancel on the console's Cell page)"
    )


def test_an_admission_rejected_for_another_reason_gets_no_busy_hint() -> None:
    error = ForgeHttpError(
        "FORGE_TOOL_ACTION_ADMISSION_REJECTED",
        "outside the workspace",
        status_code=422,
        payload=None,
        details={"provider_code": "ARM_OUTSIDE_WORKSPACE"},
    )
    line = errors.line(error, argparse.Namespace(tool_id="arm.home", skill="pick-place"))
    assert line == "FORGE_TOOL_ACTION_ADMISSION_REJECTED: outside the workspace"
