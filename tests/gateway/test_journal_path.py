"""Where a Gateway keeps its invocation journal: always in its own run, never machine-wide."""

from __future__ import annotations

from pathlib import Path

from doraforge.gateway.config import parse_config
from doraforge.gateway.main import journal_path

RUN_ID = "01a2317b-f424-745a-88d4-c7ea811970b7"
NODE_CONFIG = f"dataflow_id: {RUN_ID}\nnode_id: gateway\n"


def test_the_command_line_wins_then_the_config_then_the_runners_variable(tmp_path: Path) -> None:
    explicit = parse_config("journal_path: /srv/explicit.journal\n")
    plain = parse_config("")
    environ = {"DORAFORGE_GATEWAY_JOURNAL": "/runs/r1/gateway.journal"}
    assert journal_path(explicit, "/cli.journal", environ=environ, cwd=tmp_path) == Path(
        "/cli.journal"
    )
    assert journal_path(explicit, None, environ=environ, cwd=tmp_path) == Path(
        "/srv/explicit.journal"
    )
    assert journal_path(plain, None, environ=environ, cwd=tmp_path) == Path(
        "/runs/r1/gateway.journal"
    )


def test_without_a_choice_the_journal_sits_beside_dora_s_logs_of_this_run(tmp_path: Path) -> None:
    config = parse_config("gateway_id: cell-a\n")
    found = journal_path(config, None, environ={"DORA_NODE_CONFIG": NODE_CONFIG}, cwd=tmp_path)
    assert found == tmp_path / "out" / RUN_ID / "cell-a.journal"


def test_two_runs_never_share_a_journal_and_nothing_lands_in_the_users_state_dir(
    tmp_path: Path,
) -> None:
    config = parse_config("")
    other = NODE_CONFIG.replace(RUN_ID, "01a2317b-0000-745a-88d4-c7ea811970b7")
    first = journal_path(config, None, environ={"DORA_NODE_CONFIG": NODE_CONFIG}, cwd=tmp_path)
    second = journal_path(config, None, environ={"DORA_NODE_CONFIG": other}, cwd=tmp_path)
    assert first != second
    for path in (first, second, journal_path(config, None, environ={}, cwd=tmp_path)):
        assert path.is_relative_to(tmp_path)
        assert ".local" not in path.parts
