from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from doraforge.registry.api_tools.client import ApiClient, execute
from doraforge.registry.api_tools.errors import RegistryError, ToolFailure
from doraforge.registry.api_tools.outbound import OutboundPolicy
from doraforge.registry.api_tools.tools import build_tools, check_saveable, probe
from doraforge.registry.http import status_for
from doraforge.registry.model import Principal, ToolEntry
from doraforge.registry.service import RegistryService

from .conftest import Upstream, local_policy, make_bundle, tool

SECRET = "s3cr3t-token-value"
SECRETS = {"TOKEN": SECRET}
SLOT = "{{secret:TOKEN}}"
ECHO = tool(
    "echo",
    "/echo/{id}",
    method="POST",
    params=[
        {"name": "id", "in": "path", "required": True},
        {"name": "q", "in": "query"},
        {"name": "X-Trace", "in": "header"},
        {"name": "note", "in": "body"},
    ],
)
EVERYWHERE = {"id": SLOT, "q": SLOT, "X-Trace": SLOT, "note": SLOT}


def _execute(base: str, spec: dict[str, Any], arguments: dict[str, Any], **kw: Any) -> Any:
    bundle = make_bundle(base, spec)
    client = ApiClient(local_policy(urlsplit(base).port or 80))
    secrets = kw.get("secrets", SECRETS)
    return asyncio.run(execute(bundle, bundle.tools[0], arguments, secrets=secrets, client=client))


def test_an_argument_spelling_a_secret_slot_stays_literal(upstream: Upstream) -> None:
    result = _execute(upstream.base, ECHO, EVERYWHERE)
    assert SECRET not in json.dumps(result)
    echoed = json.loads(result["content"])
    assert echoed["path"] == "/echo/%7B%7Bsecret%3ATOKEN%7D%7D"
    assert echoed["query"] == "q=%7B%7Bsecret%3ATOKEN%7D%7D"
    assert echoed["headers"]["x-trace"] == SLOT
    assert json.loads(echoed["body"]) == {"note": SLOT}
    # The secret did reach its template slot upstream; the echo of it is redacted.
    assert echoed["headers"]["authorization"] == "Bearer [REDACTED]"


def test_secrets_are_redacted_from_tool_errors(upstream: Upstream) -> None:
    envelope = {"codeField": "nope", "success": [0], "errorFields": ["headers.authorization"]}
    spec = {**ECHO, "response": {"type": "json", "envelope": envelope}}
    with pytest.raises(ToolFailure) as info:
        _execute(upstream.base, spec, {"id": "1"})
    assert info.value.code == "API_ENVELOPE_ERROR"
    assert "Bearer [REDACTED]" in info.value.message
    assert SECRET not in json.dumps(info.value.to_payload())


def test_missing_credential_and_bad_arguments_are_tool_errors(upstream: Upstream) -> None:
    with pytest.raises(ToolFailure) as info:
        _execute(upstream.base, ECHO, {"id": "1"}, secrets={})
    assert info.value.code == "API_CREDENTIAL_MISSING"
    assert "TOKEN" in info.value.message
    with pytest.raises(ToolFailure) as info:
        _execute(upstream.base, ECHO, {"id": "1", "Authorization": "x"})
    assert info.value.code == "API_ARGUMENT_UNKNOWN"
    with pytest.raises(ToolFailure) as info:
        _execute(upstream.base, ECHO, {"id": "1", "X-Trace": "a\r\nInjected: 1"})
    assert info.value.code == "API_ARGUMENT_INVALID"
    with pytest.raises(ToolFailure) as info:
        _execute(upstream.base, ECHO, {})
    assert info.value.code == "API_ARGUMENT_MISSING"


def test_probe_renders_the_request_with_secrets_masked() -> None:
    envelope = {"codeField": "code", "success": [0], "payloadField": "data", "errorFields": ["msg"]}
    spec = {**ECHO, "response": {"type": "json", "envelope": envelope}}
    bundle = make_bundle("https://api.example.com", spec)
    report = asyncio.run(
        probe(bundle, "echo", {"id": "a b", "q": 1, "note": True}, secrets=SECRETS)
    )
    assert SECRET not in json.dumps(report)
    assert report["tool"] == "api__svc__echo"
    request = report["request"]
    assert request["method"] == "POST"
    assert request["url"] == "https://api.example.com/echo/a%20b?q=1"
    assert request["headers"]["Authorization"] == "Bearer ****"
    assert request["headers"]["Content-Type"] == "application/json"
    assert json.loads(request["body"]) == {"note": True}
    success, failure = report["preview"]["success"], report["preview"]["failure"]
    assert success == {
        "ok": True,
        "result": {"status": 200, "content": '{"example": "value"}', "truncated": False},
    }
    assert failure["ok"] is False
    assert failure["error"]["code"] == "API_ENVELOPE_ERROR"
    assert "example upstream error" in failure["error"]["message"]


def test_probe_previews_given_samples() -> None:
    bundle = make_bundle("https://api.example.com", tool("get", "/x"))
    samples = {"success": (200, {"a": 1}), "failure": (200, "<html>blocked</html>")}
    report = asyncio.run(probe(bundle, "get", {}, secrets=SECRETS, samples=samples))
    assert report["preview"]["success"]["result"]["content"] == '{"a": 1}'
    assert report["preview"]["failure"]["error"]["code"] == "API_RESPONSE_NOT_JSON"
    with pytest.raises(RegistryError) as info:
        asyncio.run(probe(bundle, "missing", {}, secrets=SECRETS))
    assert status_for(info.value) == 404


def test_probe_live_runs_the_request(upstream: Upstream) -> None:
    bundle = make_bundle(upstream.base, tool("text", "/text", response={"type": "text"}))
    client = ApiClient(upstream.policy)
    report = asyncio.run(probe(bundle, "text", {}, secrets=SECRETS, client=client))
    assert report["live"] == {
        "ok": True,
        "result": {"status": 200, "content": "plain hello", "truncated": False},
    }


class _BrokenTransport(httpx.AsyncBaseTransport):
    """A transport failing in a way no httpx error describes; counts what it was asked."""

    def __init__(self) -> None:
        self.requests = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        raise RuntimeError("/internal/path/secret-state")


def test_a_live_probe_fault_no_one_foresaw_is_reported_without_its_text() -> None:
    bundle = make_bundle("http://127.0.0.1:8080", tool("text", "/text"))
    transport = _BrokenTransport()
    client = ApiClient(local_policy(8080), transport=transport)
    report = asyncio.run(probe(bundle, "text", {}, secrets=SECRETS, client=client))
    assert transport.requests == 1
    assert report["live"]["ok"] is False
    assert report["live"]["error"]["code"] == "API_PROBE_FAILED"
    assert "/internal/path" not in json.dumps(report)


def test_a_live_probe_of_a_bundle_with_an_impossible_port_is_a_tool_error() -> None:
    # Such a bundle cannot be saved; one built around validation still never crashes.
    valid = make_bundle("http://127.0.0.1:8080", tool("text", "/text"))
    broken = valid.model_copy(update={"baseUrl": "http://127.0.0.1:65536"})
    transport = _BrokenTransport()
    client = ApiClient(OutboundPolicy(default="allow"), transport=transport)
    report = asyncio.run(probe(broken, "text", {}, secrets=SECRETS, client=client))
    assert report["live"]["error"]["code"] == "API_REQUEST_INVALID"
    assert transport.requests == 0


def test_entries_are_valid_tool_entries() -> None:
    bundle = make_bundle("https://api.example.com", ECHO, tool("get", "/x"))
    pairs = build_tools(bundle, secrets=SECRETS, policy=local_policy(443))
    entries = [ToolEntry.model_validate(entry) for entry, _ in pairs]
    write, read = entries
    assert read.name == read.providerName == "api__svc__get"
    assert read.policy.sideEffect == "read"
    assert read.policy.requiredCapabilities == ["api.read"]
    assert write.policy.sideEffect == "write"
    assert write.policy.requiredCapabilities == ["api.write"]
    assert write.policy.egressHosts == ["api.example.com:443"]  # its own port only
    assert write.policy.scopes == ["agent", "ui"]
    assert write.input_schema["required"] == ["id"]
    assert write.input_schema["additionalProperties"] is False


def test_tools_run_through_the_registry_service(upstream: Upstream) -> None:
    bundle = make_bundle(
        upstream.base, tool("text", "/text", response={"type": "text"}), tool("html", "/html")
    )
    service = RegistryService(egress_allowlist=frozenset({"127.0.0.1"}))
    for entry, adapter in build_tools(bundle, secrets=SECRETS, policy=upstream.policy):
        service.register(entry, adapter)
    principal = Principal(id="t", scope="agent", grants=frozenset({"api.read"}))

    async def calls() -> tuple[dict[str, Any], dict[str, Any]]:
        ok = await service.call({"requestId": "r1", "name": "api__svc__text"}, principal)
        bad = await service.call({"requestId": "r2", "name": "api__svc__html"}, principal)
        return ok, bad

    ok, bad = asyncio.run(calls())
    assert ok["state"] == "completed"
    assert ok["result"]["content"] == "plain hello"
    assert bad["state"] == "failed"
    assert bad["error"]["code"] == "API_RESPONSE_NOT_JSON"


def test_check_saveable() -> None:
    deny = OutboundPolicy(default="deny", external=["*.example.com"])
    check_saveable(make_bundle("https://api.example.com", tool("get", "/x")), deny)
    check_saveable(make_bundle("https://other.org", tool("get", "/x")), OutboundPolicy())
    for base, policy in [
        ("https://other.org", deny),
        ("http://169.254.169.254", OutboundPolicy()),
        ("http://metadata.google.internal", OutboundPolicy()),
    ]:
        with pytest.raises(RegistryError) as info:
            check_saveable(make_bundle(base, tool("get", "/x")), policy)
        assert status_for(info.value) == 409
        assert info.value.code == "API_TOOL_HOST_NOT_ALLOWED"
