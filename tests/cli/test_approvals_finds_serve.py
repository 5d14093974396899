"""``doraforge approvals`` finds the registry its home runs: ``serve`` records where it
listens in ``serve.json`` while it runs; ``--url``/``--port`` and
``$DORAFORGE_REGISTRY_URL`` override; nothing running is one line naming ``doraforge serve``;
a refusal names the registry's address."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from doraforge.cli import main, serve_state
from doraforge.paos.home import PaosHome
from tests.support.live_server import serve_process

ENVS = ("DORAFORGE_REGISTRY_URL", "DORAFORGE_OPERATOR_TOKEN", "DORAFORGE_REGISTRY_TOKEN")


@pytest.fixture(autouse=True)
def _no_registry_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENVS:
        monkeypatch.delenv(name, raising=False)


def run(capsys: pytest.CaptureFixture[str], home: Path, *argv: str) -> tuple[int, str, str]:
    code = main(["--home", str(home), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _dead_pid() -> int:
    process = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(process.stdout)


def test_approvals_follow_serve_on_any_port_and_stop_following_when_it_ends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    with serve_process(tmp_path) as served:  # --port 0: a free port, never 8765
        record = json.loads((home / "serve.json").read_text())
        found = run(capsys, home, "approvals", "list")
        missing = run(
            capsys, home, "approvals", "approve", "apr_000000000000000000000000", "--reason", "r"
        )
    assert record["url"] == f"http://127.0.0.1:{served.port}"
    assert record["pid"] == served.pid
    assert found == (0, "no approvals\n", "")
    # A refusal names the registry that refused.
    assert missing[0] == 1
    assert f"(registry at http://127.0.0.1:{served.port})" in missing[2]
    assert not (home / "serve.json").exists()  # removed when serve ended
    code, out, err = run(capsys, home, "approvals", "list")
    assert (code, out) == (1, "")
    assert err == (
        f"doraforge: REGISTRY_NOT_RUNNING: no `doraforge serve` is running for the home {home}; "
        f"start it with `doraforge serve --home {home}`, or name another registry with --url, "
        "--port or $DORAFORGE_REGISTRY_URL\n"
    )


def test_a_record_left_by_a_dead_serve_reads_as_nothing_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = PaosHome(tmp_path / "home")
    serve_state.write(home, "http://127.0.0.1:9", pid=_dead_pid())
    code, _, err = run(capsys, home.root, "approvals", "list")
    assert code == 1
    assert err.startswith("doraforge: REGISTRY_NOT_RUNNING: ")


def test_port_url_and_the_environment_override_the_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = PaosHome(tmp_path / "home")
    serve_state.write(home, "http://127.0.0.1:9", pid=os.getpid())
    with serve_process(tmp_path / "other") as other:
        url = f"http://127.0.0.1:{other.port}"
        by_port = run(capsys, home.root, "approvals", "list", "--port", str(other.port))
        by_url = run(capsys, home.root, "approvals", "list", "--url", url)
        monkeypatch.setenv("DORAFORGE_REGISTRY_URL", url)
        by_env = run(capsys, home.root, "approvals", "list")
    assert by_port == by_url == by_env == (0, "no approvals\n", "")


def test_serve_removes_only_its_own_record(tmp_path: Path) -> None:
    home = PaosHome(tmp_path)
    serve_state.write(home, "http://127.0.0.1:9", pid=os.getpid() + 1)
    serve_state.remove(home)  # another process's record: kept
    assert serve_state.read(home) is not None
    serve_state.remove(home, pid=os.getpid() + 1)
    assert serve_state.read(home) is None
