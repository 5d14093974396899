from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import pytest

from doraforge.registry.api_tools.client import ApiClient, execute
from doraforge.registry.api_tools.errors import ToolFailure
from doraforge.registry.api_tools.outbound import OutboundPolicy
from doraforge.registry.api_tools.response import RAW_READ_CAP
from tests.registry.listeners import accepted, counting_listener

from .conftest import Upstream, local_policy, make_bundle, tool

SECRET = "s3cr3t-token-value"
SECRETS = {"TOKEN": SECRET}
ENVELOPE = {
    "codeField": "code",
    "success": [0],
    "payloadField": "data",
    "errorFields": ["message", "desc"],
}


def _run(
    base: str, spec: dict[str, Any], arguments: dict[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    bundle = make_bundle(base, spec)
    client = kw.pop("client", None) or ApiClient(local_policy(urlsplit(base).port or 80))
    return asyncio.run(
        execute(bundle, bundle.tools[0], arguments or {}, secrets=SECRETS, client=client)
    )


def _failure(base: str, spec: dict[str, Any], **kw: Any) -> ToolFailure:
    with pytest.raises(ToolFailure) as info:
        _run(base, spec, **kw)
    assert SECRET not in json.dumps(info.value.to_payload())
    return info.value


def test_json_envelope_success_returns_the_payload(upstream: Upstream) -> None:
    spec = tool("ok", "/json/ok", response={"type": "json", "envelope": ENVELOPE})
    result = _run(upstream.base, spec)
    assert result == {"status": 200, "content": '{"x": 1}', "truncated": False}


def test_json_envelope_failure_is_a_tool_error_with_the_first_error_field(
    upstream: Upstream,
) -> None:
    spec = tool("fail", "/json/fail", response={"type": "json", "envelope": ENVELOPE})
    failure = _failure(upstream.base, spec)
    assert failure.code == "API_ENVELOPE_ERROR"
    assert "quota exhausted" in failure.message
    assert failure.details["code"] == 7


def test_non2xx_is_a_tool_error_unless_the_body_is_treated(upstream: Upstream) -> None:
    failure = _failure(upstream.base, tool("busy", "/status/503"))
    assert failure.code == "API_HTTP_ERROR"
    assert failure.retryable
    assert "503" in failure.message
    assert "busy, try later" in failure.message
    treated = {**ENVELOPE, "treatBodyOnNon2xx": True}
    spec = tool("broke", "/json/500", response={"type": "json", "envelope": treated})
    failure = _failure(upstream.base, spec)
    assert failure.code == "API_ENVELOPE_ERROR"
    assert "upstream broke" in failure.message


def test_text_response(upstream: Upstream) -> None:
    result = _run(upstream.base, tool("text", "/text", response={"type": "text"}))
    assert result["content"] == "plain hello"


def test_redirect_is_refused_not_followed(upstream: Upstream) -> None:
    failure = _failure(upstream.base, tool("redir", "/redirect"))
    assert failure.code == "API_REDIRECT_REFUSED"
    assert failure.details["status"] == 302


def test_html_instead_of_json_is_diagnosed(upstream: Upstream) -> None:
    failure = _failure(upstream.base, tool("html", "/html"))
    assert failure.code == "API_RESPONSE_NOT_JSON"
    assert "HTML" in failure.message
    assert "Please log in" in failure.message


def test_raw_read_cap_then_result_truncation(upstream: Upstream) -> None:
    spec = tool("big", "/big", response={"type": "text"}, maxResultChars=1000)
    result = _run(upstream.base, spec)
    assert result["truncated"] is True
    assert result["content"].startswith("a" * 1000)
    assert result["content"].endswith(f"…[truncated, 1000/{RAW_READ_CAP} chars]")
    failure = _failure(upstream.base, tool("bigjson", "/big"))
    assert failure.code == "API_RESPONSE_INVALID_JSON"
    assert "2 MB" in failure.message


def test_timeout_is_a_bounded_tool_error(upstream: Upstream) -> None:
    started = time.monotonic()
    failure = _failure(upstream.base, tool("slow", "/slow", timeoutMs=300))
    elapsed = time.monotonic() - started
    assert failure.code == "API_TIMEOUT"
    assert failure.retryable
    assert failure.details["durationMs"] >= 250
    assert elapsed < 5


def test_connects_to_the_vetted_address_and_keeps_the_host_header(upstream: Upstream) -> None:
    calls: list[str] = []
    answers = iter([["127.0.0.1"], ["169.254.169.254"]])

    async def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return next(answers)

    client = ApiClient(upstream.policy, resolver=rebinding)
    base = f"http://api.test:{upstream.port}"
    result = _run(base, tool("echo", "/echo"), client=client)
    echoed = json.loads(result["content"])
    assert echoed["headers"]["host"] == f"api.test:{upstream.port}"
    assert calls == ["api.test"]
    failure = _failure(base, tool("echo", "/echo"), client=client)
    assert failure.code == "API_EGRESS_DENIED"


def test_policy_denies_loopback_without_a_rule(upstream: Upstream) -> None:
    client = ApiClient(OutboundPolicy(default="allow", internal=["127.0.0.0/8"]))
    failure = _failure(upstream.base, tool("echo", "/echo"), client=client)
    assert failure.code == "API_EGRESS_DENIED"


def test_connection_refused_is_an_io_tool_error() -> None:
    # Bound but never listening: connecting is refused, and no other process can take it.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        failure = _failure(f"http://127.0.0.1:{port}", tool("echo", "/echo"))
    assert failure.code == "API_IO_ERROR"
    assert "durationMs" in failure.details


def test_allowing_an_upstream_never_opens_another_port_on_the_same_address(
    upstream: Upstream,
) -> None:
    # A second service on 127.0.0.1, like the Gateway beside an allowed local upstream.
    with counting_listener() as gateway:
        port = gateway.getsockname()[1]
        named = ApiClient(upstream.policy)
        portless = ApiClient(OutboundPolicy(default="deny", internal=["127.0.0.1"]))
        for client in (named, portless):
            failure = _failure(f"http://127.0.0.1:{port}", tool("echo", "/echo"), client=client)
            assert failure.code == "API_EGRESS_DENIED"
            assert failure.details["port"] == port
        assert accepted(gateway) == 0
        # The listener does count a connection that is let through.
        let_through = ApiClient(local_policy(port))
        with pytest.raises(ToolFailure):
            _run(
                f"http://127.0.0.1:{port}", tool("echo", "/echo", timeoutMs=200), client=let_through
            )
        assert accepted(gateway) == 1
    assert _run(upstream.base, tool("echo", "/echo"), client=named)["status"] == 200
