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


def _mock_gateway_with(description: str) -> Gateway:
    """The mock Gateway whose ``mock.echo`` has ``description``."""
    config = mock_config()
    tools = [
        tool.model_copy(update={"description": description})
        if tool.tool_id == "mock.echo"
        else tool
        for tool in config.tools
    ]
    return Gateway(config.model_copy(update={"tools": tools}), send=LocalCarrier().send)


def test_a_misspelled_tool_offers_the_closest_id_and_the_command_listing_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gateway = Gateway(mock_config(), send=LocalCarrier().send)
    with live_gateway(gateway) as server:
        argv = ["tools", "call", "mock.mov", "--gateway", server.url]
        code, out, err = run(capsys, "--home", str(tmp_path), *argv)
    assert (code, out) == (1, "")
    assert err == (
        "doraforge: FORGE_TOOL_NOT_FOUND: no tool 'mock.mov'; did you mean 'mock.move'?; "
        f"list the tools with `doraforge tools list --gateway {server.url}`\n"
    )


def test_a_missing_argument_names_its_path_its_type_and_the_describe_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gateway = Gateway(mock_config(), send=LocalCarrier().send)
    with live_gateway(gateway) as server:
        argv = ["tools", "call", "mock.move", "--gateway", server.url]
        code, _, err = run(
            capsys, "--home", str(tmp_path), *argv, "--args", '{"behaviour": "fail"}'
        )
    assert code == 1
    assert err == (
        "doraforge: FORGE_TOOL_INVALID_ARGUMENTS: arguments $.duration_s: 'duration_s' is a "
        "required property; expected number 0..3600; see its input schema and an example "
        f"with `doraforge tools describe mock.move --gateway {server.url}`\n"
    )


def test_tools_describe_prints_the_input_schema_and_an_example_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gateway = Gateway(mock_config(), send=LocalCarrier().send)
    with live_gateway(gateway) as server:
        argv = ["--json", "tools", "describe", "mock.move", "--gateway", server.url]
        code, out, _ = run(capsys, "--home", str(tmp_path), *argv)
        human = run(capsys, "--home", str(tmp_path), *argv[1:])
    assert code == 0
    described = json.loads(out)
    assert described["tool"]["input_schema"]["required"] == ["duration_s", "behaviour"]
    assert described["example_arguments"] == {"duration_s": 0, "behaviour": "succeed"}
    example = (
        f"doraforge tools call mock.move --gateway {server.url} "
        """--args '{"duration_s":0,"behaviour":"succeed"}'"""
    )
    assert described["example_command"] == example
    assert human[0] == 0
    assert '"required": [' in human[1]
    assert human[1].rstrip().endswith(example)


def test_tools_list_wraps_a_long_description_and_never_cuts_a_word(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    description = (
        "Echo a message back unchanged; the cheapest round trip through the whole stack, "
        "useful to check that the provider, the carrier and the Gateway all answer quickly."
    )
    monkeypatch.setenv("COLUMNS", "80")
    with live_gateway(_mock_gateway_with(description)) as server:
        code, out, _ = run(
            capsys, "--home", str(tmp_path), "tools", "list", "--gateway", server.url
        )
    assert code == 0
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if "mock.echo" in line)
    rest = next(i for i, line in enumerate(lines) if i > first and "mock." in line)
    # mock.echo's row: its first line after the id and kind, then the wrapped lines.
    cell = [lines[first].split(maxsplit=2)[2], *lines[first + 1 : rest]]
    assert " ".join(" ".join(cell).split()) == description
    assert "…" not in out


def test_a_missing_option_value_is_one_usage_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--home", str(tmp_path), "skill", "start", "pick-place", "--port"])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        "doraforge: CLI_USAGE: argument --port: expected one argument; "
        "run `doraforge skill start --help`\n"
    )
