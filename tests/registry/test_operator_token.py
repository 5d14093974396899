"""A separate operator token on a real socket: with one configured, the agent token cannot
decide an approval (403 ``OPERATOR_REQUIRED``, audited, the call still waits) while the
operator token can; the operator token also calls tools; the guard's Host, Origin, token
and JSON checks still answer first; equal or lone operator tokens never start; and
``doraforge approvals`` prefers ``$DORAFORGE_OPERATOR_TOKEN``."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.cli import approvals_command
from doraforge.registry.server import build_app, new_service
from doraforge.registry.service import RegistryService
from doraforge.registry.settings import ServerSettings, SettingsError, load_settings
from doraforge.wire.guard import BindRefused, policy_for_bind
from tests.paths import PROJECT_ROOT
from tests.registry.server_support import TOKEN, call_body, running
from tests.registry.test_approvals_http import TOOL, Arm, approvals_server
from tests.support.waiting import eventually, eventually_async

OPERATOR_TOKEN = "operator-token-0123456789abcdef"
AGENT = {"Authorization": f"Bearer {TOKEN}"}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
REASON = {"reason": "cell is clear"}


@dataclass
class Registry:
    url: str
    service: RegistryService
    arm: Arm


@pytest.fixture
def registry() -> Iterator[Registry]:
    settings = ServerSettings(
        grants=frozenset({"robot.read", "robot.write"}),
        token=TOKEN,
        operator_token=OPERATOR_TOKEN,
    )
    arm = Arm()
    with approvals_server(settings, arm) as (url, service):
        yield Registry(url, service, arm)


def _pending(registry: Registry, client: httpx.Client) -> dict[str, Any]:
    """The one approval the agent's waiting call created (listed with the agent token)."""

    def listed() -> list[dict[str, Any]]:
        answer = client.get("/api/approvals?state=pending", headers=AGENT)
        assert answer.status_code == 200
        records: list[dict[str, Any]] = answer.json()["approvals"]
        return records

    eventually(listed, within=10, what="the agent's call to be pending")
    (record,) = listed()
    return record


@pytest.fixture
def waiting(registry: Registry) -> Iterator[tuple[httpx.Client, dict[str, Any], Any]]:
    """The agent's high-risk call waiting (sent with the agent token), and its approval."""
    with (
        httpx.Client(base_url=registry.url, timeout=30) as client,
        httpx.Client(base_url=registry.url, timeout=30) as agent,
        concurrent.futures.ThreadPoolExecutor(1) as pool,
    ):
        answer = pool.submit(
            agent.post, "/api/tools/call", json=call_body(TOOL, {"x": 1}), headers=AGENT
        )
        record = _pending(registry, client)
        yield client, record, answer
        if not answer.done():  # release the agent so the pool can close
            client.post(f"/api/approvals/{record['id']}/deny", json=REASON, headers=OPERATOR)


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_the_agent_token_cannot_decide_its_own_call(
    registry: Registry, waiting: tuple[httpx.Client, dict[str, Any], Any], decision: str
) -> None:
    client, record, answer = waiting
    refused = client.post(f"/api/approvals/{record['id']}/{decision}", json=REASON, headers=AGENT)
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "OPERATOR_REQUIRED"
    assert "operator token" in error["message"]
    assert error["retryable"] is False
    assert client.get(f"/api/approvals/{record['id']}", headers=AGENT).json()["state"] == "pending"
    assert not answer.done()
    assert registry.arm.runs == []
    audited = [r for r in registry.service.audit.records() if r.get("errorCode")]
    assert audited[-1]["errorCode"] == "OPERATOR_REQUIRED"
    assert audited[-1]["name"] == f"POST /api/approvals/{{approval_id}}/{decision}"


def test_the_operator_token_approves_and_the_call_runs(
    registry: Registry, waiting: tuple[httpx.Client, dict[str, Any], Any]
) -> None:
    client, record, answer = waiting
    decided = client.post(f"/api/approvals/{record['id']}/approve", json=REASON, headers=OPERATOR)
    assert decided.status_code == 200
    assert decided.json()["state"] == "approved"
    result = answer.result(timeout=10)
    assert result.status_code == 200
    assert result.json()["state"] == "completed"
    assert registry.arm.runs == [{"x": 1}]
    events = [r for r in registry.service.audit.records() if r.get("kind") == "approval"]
    assert events[-1]["event"] == "approved"
    assert events[-1]["by"] == "doraforge-operator"


def test_the_operator_token_is_accepted_on_the_agent_routes(registry: Registry) -> None:
    with httpx.Client(base_url=registry.url, timeout=10) as client:
        catalog = client.get("/api/tools", headers=OPERATOR)
        echoed = client.post(
            "/api/tools/call", json=call_body("demo.echo", {"text": "hi"}), headers=OPERATOR
        )
        listed = client.get("/api/approvals", headers=OPERATOR)
    assert catalog.status_code == 200
    assert echoed.status_code == 200
    assert echoed.json()["state"] == "completed"
    assert listed.status_code == 200
    assert listed.json() == {"approvals": []}


@pytest.mark.parametrize(
    ("headers", "body", "status", "code"),
    [
        ({**AGENT, "Origin": "http://evil.example"}, REASON, 403, "ORIGIN_NOT_ALLOWED"),
        ({**AGENT, "Host": "evil.example"}, REASON, 403, "HOST_NOT_ALLOWED"),
        ({**OPERATOR, "Origin": "http://evil.example"}, REASON, 403, "ORIGIN_NOT_ALLOWED"),
        ({"Authorization": "Bearer not-the-token-at-all-0000"}, REASON, 401, "AUTH_INVALID"),
        ({}, REASON, 401, "AUTH_REQUIRED"),
        ({**AGENT, "Content-Type": "text/plain"}, "reason", 415, "UNSUPPORTED_MEDIA_TYPE"),
        ({**AGENT, "Content-Type": "application/json"}, '{"reason": 1,}', 400, None),
    ],
)
def test_the_guard_still_answers_first(
    registry: Registry, headers: dict[str, str], body: Any, status: int, code: str | None
) -> None:
    path = "/api/approvals/apr_000000000000000000000000/approve"
    with httpx.Client(base_url=registry.url, timeout=10) as client:
        if isinstance(body, str):
            answer = client.post(path, content=body, headers=headers)
        else:
            answer = client.post(path, json=body, headers=headers)
    assert answer.status_code == status
    error = answer.json()["error"]
    assert error["code"] != "OPERATOR_REQUIRED"
    if code is not None:
        assert error["code"] == code
    assert [r for r in registry.service.audit.records() if r.get("errorCode")] == []


def test_without_an_operator_token_the_one_token_still_decides() -> None:
    settings = ServerSettings(grants=frozenset({"robot.write"}), token=TOKEN)
    service = new_service(settings)
    service.ask_operators(settings.approval_timeout_s)
    with running(build_app(service, settings)) as url:
        answer = httpx.post(
            f"{url}/api/approvals/apr_000000000000000000000000/approve", json=REASON, headers=AGENT
        )
    assert answer.status_code == 404  # reached the route: no OPERATOR_REQUIRED
    assert answer.json()["error"]["code"] == "APPROVAL_NOT_FOUND"


def test_equal_tokens_never_start(tmp_path: Path) -> None:
    environ = {"AGENT_TOKEN": TOKEN, "OPERATOR_TOKEN": TOKEN}
    with pytest.raises(SettingsError, match=r"^OPERATOR_TOKEN_SAME: "):
        load_settings(environ=environ, token_env="AGENT_TOKEN", operator_token_env="OPERATOR_TOKEN")
    with pytest.raises(BindRefused, match="must differ"):
        policy_for_bind("127.0.0.1", token=TOKEN, operator_token=TOKEN)
    with pytest.raises(ValueError, match="must differ"):
        ServerSettings(token=TOKEN, operator_token=TOKEN)


def test_an_operator_token_alone_never_starts() -> None:
    with pytest.raises(SettingsError, match=r"^OPERATOR_TOKEN_ALONE: "):
        load_settings(
            environ={"OPERATOR_TOKEN": OPERATOR_TOKEN}, operator_token_env="OPERATOR_TOKEN"
        )
    with pytest.raises(BindRefused, match="needs the agent token"):
        policy_for_bind("127.0.0.1", token=None, operator_token=OPERATOR_TOKEN)


def test_the_operator_token_file_must_be_private(tmp_path: Path) -> None:
    path = tmp_path / "operator.token"
    path.write_text(OPERATOR_TOKEN + "\n", encoding="utf-8")
    path.chmod(0o644)
    environ = {"AGENT_TOKEN": TOKEN}
    with pytest.raises(SettingsError, match=r"^operator_token_file: .*chmod 600"):
        load_settings(environ=environ, token_env="AGENT_TOKEN", operator_token_file=path)
    path.chmod(0o600)
    settings = load_settings(environ=environ, token_env="AGENT_TOKEN", operator_token_file=path)
    assert settings.operator_token == OPERATOR_TOKEN
    assert OPERATOR_TOKEN not in repr(settings)


def test_the_config_file_names_the_operator_token_source(tmp_path: Path) -> None:
    config = tmp_path / "serve.yml"
    config.write_text("token_env: AGENT_TOKEN\noperator_token_env: OPERATOR_TOKEN\n")
    environ = {"AGENT_TOKEN": TOKEN, "OPERATOR_TOKEN": OPERATOR_TOKEN}
    settings = load_settings(config=config, environ=environ)
    assert (settings.token, settings.operator_token) == (TOKEN, OPERATOR_TOKEN)


def test_the_approvals_cli_prefers_the_operator_token() -> None:
    both = {"DORAFORGE_OPERATOR_TOKEN": OPERATOR_TOKEN, "DORAFORGE_REGISTRY_TOKEN": TOKEN}
    assert approvals_command.token(both, None, None) == OPERATOR_TOKEN
    assert approvals_command.token({"DORAFORGE_REGISTRY_TOKEN": TOKEN}, None, None) == TOKEN
    assert approvals_command.token({**both, "MINE": "mine-0123456789abcdef"}, "MINE", None) == (
        "mine-0123456789abcdef"
    )
    assert approvals_command.token({}, None, None) is None


def test_the_approvals_cli_with_the_agent_token_says_what_to_set(registry: Registry) -> None:
    with pytest.raises(approvals_command.ApprovalsFailure) as refused:
        approvals_command.request(
            registry.url,
            "POST",
            "/api/approvals/apr_000000000000000000000000/deny",
            bearer=TOKEN,
            body=REASON,
        )
    message = str(refused.value)
    assert message.startswith("OPERATOR_REQUIRED: ")
    assert "$DORAFORGE_OPERATOR_TOKEN" in message
    assert "\n" not in message


def test_serve_refuses_equal_tokens_at_start_in_one_line(tmp_path: Path) -> None:
    environ = {**os.environ, "AGENT_TOKEN": TOKEN, "OPERATOR_TOKEN": TOKEN}
    command = [sys.executable, "-m", "doraforge.cli", "serve", "--home", str(tmp_path / "home")]
    options = [
        "--port",
        "0",
        "--token-env",
        "AGENT_TOKEN",
        "--operator-token-env",
        "OPERATOR_TOKEN",
    ]
    done = subprocess.run(
        [*command, *options],
        cwd=PROJECT_ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "registry listening" not in done.stdout
    (line,) = done.stderr.splitlines()
    assert "OPERATOR_TOKEN_SAME: " in line
    assert TOKEN not in done.stderr


@pytest.mark.anyio
async def test_an_mcp_agent_cannot_approve_its_own_waiting_call() -> None:
    settings = ServerSettings(
        grants=frozenset({"robot.write"}),
        token=TOKEN,
        operator_token=OPERATOR_TOKEN,
        mcp_enabled=True,
    )
    service = new_service(settings)
    service.ask_operators(settings.approval_timeout_s)
    arm = Arm()
    service.register(arm.entry(), arm)
    with running(build_app(service, settings)) as url:
        async with (
            httpx.AsyncClient(headers=AGENT, timeout=httpx.Timeout(30, read=60)) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
            httpx.AsyncClient(base_url=url, timeout=10) as operator,
        ):
            await session.initialize()
            waiting = asyncio.create_task(session.call_tool("demo_arm", {"x": 2}))

            async def pending() -> list[dict[str, Any]]:
                answer = await operator.get("/api/approvals?state=pending", headers=AGENT)
                records: list[dict[str, Any]] = answer.json()["approvals"]
                return records

            found: list[dict[str, Any]] = await eventually_async(
                pending, within=10, what="the MCP call to wait"
            )
            (record,) = found
            path = f"/api/approvals/{record['id']}/approve"
            refused = await operator.post(path, json=REASON, headers=AGENT)
            assert refused.status_code == 403
            assert refused.json()["error"]["code"] == "OPERATOR_REQUIRED"
            assert not waiting.done()
            assert arm.runs == []
            approved = await operator.post(path, json=REASON, headers=OPERATOR)
            assert approved.status_code == 200
            result = await asyncio.wait_for(waiting, timeout=10)
    assert result.isError is False, result.content
    assert arm.runs == [{"x": 2}]
