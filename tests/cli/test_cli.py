"""The ``doraforge`` CLI through its entry point: JSON for scripts, one-line failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doraforge.cli import main
from doraforge.gateway.core import Gateway
from doraforge.gateway.http import gateway_policy
from doraforge.gateway.local import LocalCarrier
from tests.gateway.harness import mock_config
from tests.gateway.support import live_gateway


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_task_list_in_a_fresh_home_is_an_empty_json_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "--home", str(tmp_path), "--json", "task", "list")
    assert code == 0
    assert json.loads(out) == []


def test_tools_list_reads_a_live_gateway(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gateway = Gateway(mock_config(), send=LocalCarrier().send)
    with live_gateway(gateway) as server:
        url = server.url
        code, out, _ = run(
            capsys, "--home", str(tmp_path), "--json", "tools", "list", "--gateway", url
        )
    assert code == 0
    assert {t["tool_id"] for t in json.loads(out)["tools"]} >= {"mock.echo", "mock.move"}


def test_tools_list_presents_the_operators_token_to_a_gateway_that_has_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "cli-operator-token-0123456789"
    gateway = Gateway(mock_config(), send=LocalCarrier().send)
    policy = gateway_policy(mock_config(), token)
    with live_gateway(gateway, policy=policy) as server:
        url = server.url
        argv = ["--home", str(tmp_path), "--json", "tools", "list", "--gateway", url]
        monkeypatch.delenv("DORAFORGE_GATEWAY_TOKEN_FILE", raising=False)
        monkeypatch.delenv("DORAFORGE_GATEWAY_TOKEN", raising=False)
        refused = run(capsys, *argv)
        monkeypatch.setenv("DORAFORGE_GATEWAY_TOKEN", token)
        code, out, _ = run(capsys, *argv)
    assert refused[0] == 1
    assert refused[2].startswith("doraforge: FORGE_TOOL_AUTH_REQUIRED")
    assert code == 0
    assert "mock.echo" in {t["tool_id"] for t in json.loads(out)["tools"]}


def test_a_bad_operator_token_fails_with_one_line_naming_the_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DORAFORGE_GATEWAY_TOKEN", "short")
    code, out, err = run(
        capsys, "--home", str(tmp_path), "tools", "list", "--gateway", "http://127.0.0.1:9"
    )
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert "DORAFORGE_GATEWAY_TOKEN" in err
    assert "short" not in err  # the value itself is never echoed


def test_an_unreachable_gateway_fails_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "--home", str(tmp_path), "tools", "list", "--gateway", "http://127.0.0.1:9"
    )
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("doraforge: FORGE_CLIENT_")


def test_unknown_commands_exit_2_with_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--home", str(tmp_path), "skill", "explode"])
    assert caught.value.code == 2
