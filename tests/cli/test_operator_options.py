"""The operator's CLI surface without a robot: global options anywhere, shell completion,
``tools call``'s refusal of bad arguments, and the port rules of ``run`` and ``skill start``."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from doraforge.cli import build_parser, main
from doraforge.cli.context import Context
from doraforge.cli.run_command import gateway_ports
from doraforge.cli.tools_call import EXIT_CODES, EXIT_USAGE, ArgumentsRefused, parse_arguments
from doraforge.dataflows import DATAFLOWS
from doraforge.paos.home import PaosHome
from doraforge.skill_runtime.dora_run import free_port, port_in_use, refuse_busy_port
from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.skill_runtime.runtime import gateway_url_on
from doraforge.skill_runtime.runtime_state import read_state
from tests.skill_runtime.runtime_support import SKILL, make_bundle


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def listening() -> Iterator[int]:
    """A port something listens on for the test."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


@pytest.mark.parametrize(
    "argv",
    [
        ["--json", "skill", "list"],
        ["skill", "list", "--json"],
        ["skill", "--json", "list"],
    ],
)
def test_json_is_accepted_before_or_after_the_subcommand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run(capsys, "--home", str(tmp_path), *argv)
    assert (code, err) == (0, "")
    assert json.loads(out) == []


def test_home_given_after_the_subcommand_wins_over_the_one_before(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["--home", str(tmp_path / "before"), "task", "list", "--home", str(tmp_path / "after")]
    )
    assert Context.from_args(args).home.root == tmp_path / "after"


def test_global_options_not_repeated_after_the_subcommand_keep_their_value(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["--home", str(tmp_path), "--json", "tools", "list", "--skill", "x"]
    )
    context = Context.from_args(args)
    assert context.home.root == tmp_path
    assert context.out.as_json is True


def test_every_subcommand_takes_the_global_options(tmp_path: Path) -> None:
    parser = build_parser()
    for argv in (
        ["run", "mock"],
        ["demo"],
        ["skill", "status"],
        ["task", "get", "task_x"],
        ["tools", "call", "mock.echo", "--gateway", "http://127.0.0.1:9"],
        ["serve"],
        ["doctor"],
        ["completion", "bash"],
    ):
        args = parser.parse_args([*argv, "--json", "--home", str(tmp_path)])
        assert args.json is True, argv
        assert Path(args.home) == tmp_path, argv


@pytest.mark.parametrize("shell", ["bash", "zsh", "tcsh"])
def test_completion_prints_a_script_generated_from_the_real_parser(
    capsys: pytest.CaptureFixture[str], shell: str
) -> None:
    code, out, err = run(capsys, "completion", shell)
    assert (code, err) == (0, "")
    assert "doraforge" in out
    for word in ("skill", "tools", "call", "completion", "tcsh"):
        assert word in out, word
    if shell != "tcsh":  # shtab's tcsh script completes commands only
        assert "--json" in out
        assert "--port" in out


def test_completion_refuses_an_unknown_shell_as_bad_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["completion", "fish"])
    assert caught.value.code == 2
    assert "invalid choice: 'fish'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("{", "--args is not JSON"),
        ("[1, 2]", "--args must be a JSON object, not list"),
        ('"text"', "--args must be a JSON object, not str"),
        ("null", "--args must be a JSON object, not NoneType"),
    ],
)
def test_tools_call_refuses_bad_arguments_with_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str, why: str
) -> None:
    # Refused before any Gateway is dialled: the URL here answers nothing.
    argv = ["tools", "call", "mock.move", "--gateway", "http://127.0.0.1:9", "--args", given]
    code, out, err = run(capsys, "--home", str(tmp_path), *argv)
    assert code == EXIT_USAGE == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"doraforge: TOOLS_ARGS_INVALID: {why}")


def test_tools_call_arguments_parse_to_the_object_given() -> None:
    assert parse_arguments('{"duration_s": 1.5, "nested": {"a": [1]}}') == {
        "duration_s": 1.5,
        "nested": {"a": [1]},
    }
    with pytest.raises(ArgumentsRefused):
        parse_arguments("1")


def test_each_terminal_phase_has_its_own_exit_status_and_unknown_is_never_failed() -> None:
    assert EXIT_CODES["completed"] == 0
    assert len({EXIT_CODES[p] for p in ("completed", "failed", "cancelled", "unknown")}) == 4
    assert EXIT_CODES["unknown"] != EXIT_CODES["failed"]


def test_a_listening_port_is_in_use_and_a_closed_one_is_not(listening: int) -> None:
    assert port_in_use(listening)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = int(probe.getsockname()[1])
    assert not port_in_use(closed)


def test_a_busy_port_is_refused_naming_the_port_and_the_option(listening: int) -> None:
    with pytest.raises(RuntimeStateError) as refused:
        refuse_busy_port(listening)
    assert refused.value.code == "GATEWAY_PORT_BUSY"
    assert refused.value.message == (
        f"port {listening} is in use; pass --port N or stop what holds it"
    )


def test_run_finds_the_gateway_port_from_the_option_the_environment_or_the_config() -> None:
    mock = DATAFLOWS / "mock.yml"
    assert gateway_ports(mock, None, {}) == [("127.0.0.1", 9001)]
    assert gateway_ports(mock, None, {"DORAFORGE_GATEWAY_PORT": "9555"}) == [("127.0.0.1", 9555)]
    assert gateway_ports(mock, 9666, {"DORAFORGE_GATEWAY_PORT": "9555"}) == [("127.0.0.1", 9666)]


def test_a_gateway_node_whose_args_fix_the_port_refuses_another_port(tmp_path: Path) -> None:
    (tmp_path / "gateway.yml").write_text((DATAFLOWS / "mock.gateway.yml").read_text())
    dataflow = tmp_path / "fixed.yml"
    dataflow.write_text(
        "nodes:\n  - id: gw\n    path: python\n"
        "    args: -m doraforge.gateway --config gateway.yml --port 9444\n"
    )
    assert gateway_ports(dataflow, None, {}) == [("127.0.0.1", 9444)]
    with pytest.raises(RuntimeStateError) as refused:
        gateway_ports(dataflow, 9445, {})
    assert refused.value.code == "GATEWAY_PORT_FIXED"
    assert "--port 9444" in refused.value.message


def test_run_refuses_a_busy_gateway_port_in_one_line_before_dora_starts(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    listening: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    code, _, err = run(capsys, "--home", str(tmp_path), "run", "mock", "--port", str(listening))
    assert code == 1
    assert err == (
        f"doraforge: GATEWAY_PORT_BUSY: port {listening} is in use; "
        "pass --port N or stop what holds it\n"
    )
    assert not (tmp_path / "state" / "doraforge" / "runs").exists()  # no run was begun


@pytest.mark.parametrize(
    ("url", "port", "moved"),
    [
        ("http://127.0.0.1:9201/", None, "http://127.0.0.1:9201"),
        ("http://127.0.0.1:9201", 9301, "http://127.0.0.1:9301"),
        ("http://localhost", 9301, "http://localhost:9301"),
        ("http://[::1]:9201/", 9301, "http://[::1]:9301"),
    ],
)
def test_skill_start_port_moves_only_the_port_of_the_manifest_url(
    url: str, port: int | None, moved: str
) -> None:
    assert gateway_url_on(url, port) == moved


def test_a_gateway_config_that_cannot_be_read_is_one_coded_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataflow = tmp_path / "broken.yml"
    dataflow.write_text(
        "nodes:\n  - id: gw\n    path: python\n    args: -m doraforge.gateway --config nope.yml\n"
    )
    code, _, err = run(capsys, "--home", str(tmp_path), "run", str(dataflow))
    assert code == 1
    assert err.count("\n") == 1
    assert err.startswith("doraforge: GATEWAY_CONFIG_INVALID: ")
    assert "nope.yml" in err


def test_skill_start_on_a_held_port_is_one_line_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listening: int
) -> None:
    home = PaosHome(tmp_path / "home")
    make_bundle(home, gateway_port=free_port())
    argv = ["--home", str(home.root), "skill", "start", SKILL, "--port", str(listening)]
    code, _, err = run(capsys, *argv)
    assert code == 1
    assert err == (
        f"doraforge: SKILL_GATEWAY_IN_USE: something already answers at "
        f"http://127.0.0.1:{listening}; pass --port N or stop what holds it\n"
    )
    assert read_state(home.runtime_dir, SKILL) is None  # nothing was started
