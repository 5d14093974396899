"""``doraforge approvals`` against a live registry: list shows the waiting call on one line,
approve releases it, deny reaches the agent with the reason; every failure is one line
with a code and exit status 1."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.cli import approvals_command, main
from doraforge.registry.settings import ServerSettings
from tests.registry.server_support import TOKEN, call_body
from tests.registry.test_approvals_http import LISTED, TOOL, Arm, approvals_server
from tests.support.waiting import eventually

ENV = approvals_command.DEFAULT_TOKEN_ENV


@dataclass
class Registry:
    url: str
    arm: Arm
    answers: list[httpx.Response] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def call(self, request_id: str, **arguments: Any) -> None:
        """Send a high-risk call from an agent's thread; its answer lands in ``answers``."""

        def send() -> None:
            body = call_body(TOOL, arguments, request_id)
            headers = {"Authorization": f"Bearer {TOKEN}"}
            self.answers.append(
                httpx.post(f"{self.url}/api/tools/call", json=body, headers=headers, timeout=30)
            )

        thread = threading.Thread(target=send, daemon=True)
        thread.start()
        self.threads.append(thread)

    def pending(self) -> list[dict[str, Any]]:
        answer = httpx.get(
            f"{self.url}/api/approvals",
            params={"state": "pending"},
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=10,
        )
        approvals: list[dict[str, Any]] = answer.json()["approvals"]
        return approvals

    def answered(self) -> httpx.Response:
        for thread in self.threads:
            thread.join(30)
        assert self.answers, "the agent's call got no answer"
        return self.answers[-1]


@pytest.fixture
def registry() -> Iterator[Registry]:
    settings = ServerSettings(grants=frozenset({"robot.write"}), token=TOKEN)
    arm = Arm()
    with approvals_server(settings, arm) as (url, _service):
        state = Registry(url, arm)
        yield state
        for record in state.pending():  # never leave an agent's thread waiting
            httpx.post(
                f"{url}/api/approvals/{record['id']}/deny",
                json={"reason": "test over"},
                headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=10,
            )
        for thread in state.threads:
            thread.join(30)


def run(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    home: Path,
    *argv: str,
    token: str | None = TOKEN,
) -> tuple[int, str, str]:
    if token is None:
        monkeypatch.delenv(ENV, raising=False)
    else:
        monkeypatch.setenv(ENV, token)
    code = main(["--home", str(home), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _waiting(registry: Registry, **arguments: Any) -> dict[str, Any]:
    registry.call(f"r-{len(registry.threads)}", **arguments)
    (record,) = eventually(registry.pending, within=10, what="the call to wait for approval")
    return record


def test_list_shows_the_waiting_call_and_approve_releases_it(
    registry: Registry,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = _waiting(registry, x=0.4)
    code, out, err = run(capsys, monkeypatch, tmp_path, "approvals", "list", "--url", registry.url)
    assert (code, err) == (0, "")
    (shown,) = out.splitlines()
    assert shown.startswith(f"{record['id']} pending {LISTED} doraforge-agent expires ")
    assert shown.endswith('{"x":0.4}')
    code, out, err = run(
        capsys,
        monkeypatch,
        tmp_path,
        "approvals",
        "approve",
        record["id"],
        "--reason",
        "cell is clear",
        "--url",
        registry.url,
    )
    assert (code, err) == (0, "")
    assert out == f"approved {record['id']} ({LISTED}): cell is clear\n"
    answer = registry.answered()
    assert (answer.status_code, answer.json()["state"]) == (200, "completed")
    assert registry.arm.runs == [{"x": 0.4}]


def test_deny_reaches_the_agent_with_the_reason_and_json_is_the_record(
    registry: Registry,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = _waiting(registry, x=0.8)
    code, out, _ = run(
        capsys,
        monkeypatch,
        tmp_path,
        "approvals",
        "deny",
        record["id"],
        "--reason",
        "arm is serviced",
        "--url",
        registry.url,
        "--json",
    )
    assert code == 0
    assert json.loads(out)["state"] == "denied"
    answer = registry.answered()
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "TOOL_APPROVAL_DENIED"
    assert answer.json()["error"]["details"]["reason"] == "arm is serviced"
    assert registry.arm.runs == []
    code, out, _ = run(
        capsys, monkeypatch, tmp_path, "--json", "approvals", "list", "--url", registry.url
    )
    assert [a["state"] for a in json.loads(out)["approvals"]] == ["denied"]


def test_a_second_decision_is_one_line_naming_the_conflict(
    registry: Registry,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = _waiting(registry, x=0.1)
    decide = ("approvals", "deny", record["id"], "--reason", "no", "--url", registry.url)
    run(capsys, monkeypatch, tmp_path, *decide)
    code, out, err = run(capsys, monkeypatch, tmp_path, *decide)
    assert (code, out) == (1, "")
    assert err.startswith("doraforge: APPROVAL_NOT_PENDING: ")
    assert "already denied" in err
    assert len(err.splitlines()) == 1


def test_an_unknown_id_and_a_missing_token_are_one_line_each(
    registry: Registry,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unknown = ("approvals", "approve", "apr_000000000000000000000000", "--reason", "ok")
    code, _, err = run(capsys, monkeypatch, tmp_path, *unknown, "--url", registry.url)
    assert code == 1
    assert err.startswith("doraforge: APPROVAL_NOT_FOUND: ")
    assert "approvals list" in err
    code, _, err = run(
        capsys, monkeypatch, tmp_path, "approvals", "list", "--url", registry.url, token=None
    )
    assert code == 1
    assert err.startswith("doraforge: AUTH_REQUIRED: ")
    assert f"${ENV}" in err
    assert len(err.splitlines()) == 1


def test_a_blank_reason_is_refused_before_anything_is_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run(
        capsys,
        monkeypatch,
        tmp_path,
        "approvals",
        "approve",
        "apr_000000000000000000000000",
        "--reason",
        "  ",
        "--url",
        "http://127.0.0.1:9",
    )
    assert code == 1
    assert err == "doraforge: APPROVAL_REASON_REQUIRED: give --reason with why you decide so\n"


def test_no_registry_at_the_url_is_one_line_saying_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    code, out, err = run(capsys, monkeypatch, tmp_path, "approvals", "list", "--url", url)
    assert (code, out) == (1, "")
    assert err.startswith(f"doraforge: REGISTRY_UNREACHABLE: no registry answers at {url} ")
    assert "doraforge serve" in err
    assert len(err.splitlines()) == 1


def test_an_exposed_token_file_is_refused_naming_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    exposed = tmp_path / "token"
    exposed.write_text(TOKEN)
    exposed.chmod(0o644)
    code, _, err = run(
        capsys,
        monkeypatch,
        tmp_path,
        "approvals",
        "list",
        "--token-file",
        str(exposed),
        token=None,
    )
    assert code == 1
    assert err.startswith("doraforge: REGISTRY_TOKEN_INVALID: ")
    assert f"chmod 600 {exposed}" in err


def test_a_pending_line_shows_the_deadline_and_a_decided_one_the_reason() -> None:
    base = {
        "id": "apr_1",
        "tool": "arm.move",
        "caller": "doraforge-agent",
        "arguments": {"x": "y" * 200},
        "expires_at": "2026-12-01T12:00:00.000Z",
    }
    pending = approvals_command.line({**base, "state": "pending"})
    decided = approvals_command.line(
        {**base, "state": "denied", "decided_at": "2026-12-01T11:59:00.000Z", "reason": "a\nb"}
    )
    assert pending.startswith("apr_1 pending arm.move doraforge-agent expires 2026-12-01T12:00")
    assert pending.endswith("…")
    assert "2026-12-01T11:59:00.000Z 'a b'" in decided
    assert "\n" not in decided


def test_a_line_names_the_cell_a_fleet_call_concerns() -> None:
    record = {
        "id": "apr_1",
        "state": "pending",
        "tool": "forge.tool_start_action",
        "caller": "agent",
        "expires_at": "2026-12-01T12:00:00Z",
        "arguments": {},
        "cell": {"skill": "cell-2", "runtimeInstanceId": "rt-2", "robot": "sim_arm"},
    }
    assert " cell=cell-2/sim_arm expires " in approvals_command.line(record)
    assert "cell=" not in approvals_command.line({**record, "cell": None})
