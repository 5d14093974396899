"""``python -m doraforge.cli.demos.pick_place`` refuses a missing URL or a URL where no
Gateway listens in one line that says what to do, never a usage block."""

from __future__ import annotations

import socket

import pytest

from doraforge.cli.demos import pick_place


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_missing_url_is_one_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        pick_place.main([])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "doraforge: CLI_USAGE: the following arguments are required: url; run "
        "`python -m doraforge.cli.demos.pick_place --help`\n"
    )


def test_a_url_where_nothing_listens_says_how_to_start_a_cell(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DORAFORGE_GATEWAY_TOKEN", raising=False)
    monkeypatch.delenv("DORAFORGE_GATEWAY_TOKEN_FILE", raising=False)
    url = f"http://127.0.0.1:{_closed_port()}"
    assert pick_place.main([url]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"pick_place: cannot reach a Gateway at {url} (")
    assert err.endswith(
        "); start a cell with `doraforge run sim` and pass the URL its `ready:` line prints\n"
    )
