"""``builtin.http_fetch`` against a real local upstream: the caller's egress, the outbound
guard, redirects refused, size and time limits, text and JSON only, approval and
permission gates."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from doraforge.registry.builtins import http_fetch
from doraforge.registry.egress import EgressSettings
from doraforge.registry.service import RegistryService
from doraforge.registry.settings import ServerSettings
from tests.registry.builtins.conftest import call, caller, service_with
from tests.registry.builtins.upstream import Upstream

pytestmark = pytest.mark.anyio

FETCH = "builtin.http_fetch"
APPROVED = frozenset({FETCH})


def fetch_service(
    port: int, *, hosts: tuple[str, ...] = ("127.0.0.1",), **fetch: Any
) -> RegistryService:
    """http_fetch alone; egress on for ``hosts``; the outbound policy whitelists the
    upstream's loopback port only (deny by default)."""
    settings = ServerSettings(
        outbound={"default": "deny", "internal": [f"127.0.0.1:{port}"]},
        builtins={"enabled": ["http_fetch"], "http_fetch": fetch},
    )
    return service_with(settings, egress=EgressSettings(enabled=True, hosts=hosts))


def target(port: int, path: str, **extra: Any) -> dict[str, Any]:
    return {"host": f"127.0.0.1:{port}", "path": path, "scheme": "http", **extra}


async def test_an_allowed_host_is_fetched_as_text_and_json(served: Upstream) -> None:
    service = fetch_service(served.port)
    agent = caller(approvals=APPROVED)
    text = await call(service, "http_fetch", target(served.port, "/text"), agent)
    assert text["state"] == "completed", text
    assert text["result"]["status"] == 200
    assert text["result"]["content"] == "héllo from upstream"
    assert text["result"]["truncated"] is False
    query = {"q": "a b&c", "n": 2, "on": True}
    document = await call(
        service, "http_fetch", target(served.port, "/doc.json", query=query), agent
    )
    assert document["state"] == "completed", document
    assert json.loads(document["result"]["content"]) == {
        "query": {"q": "a b&c", "n": "2", "on": "true"}
    }
    assert served.seen[-1]["query"] == {"q": "a b&c", "n": "2", "on": "true"}
    assert served.seen[-1]["method"] == "GET"


async def test_a_host_outside_the_callers_egress_is_denied_before_any_request(
    served: Upstream,
) -> None:
    service = fetch_service(served.port, hosts=("example.org",))
    agent = caller(approvals=APPROVED)
    denied = await call(service, "http_fetch", target(served.port, "/text"), agent)
    assert denied["state"] == "failed"
    assert denied["error"]["code"] == "TOOL_EGRESS_DENIED"
    assert "/api/egress" in denied["error"]["message"]  # says how an operator allows it
    assert served.seen == []


async def test_egress_off_denies_every_host(served: Upstream) -> None:
    settings = ServerSettings(builtins={"enabled": ["http_fetch"]})
    service = service_with(settings)  # egress off by default
    denied = await call(
        service, "http_fetch", target(served.port, "/text"), caller(approvals=APPROVED)
    )
    assert denied["error"]["code"] == "TOOL_EGRESS_DENIED"
    assert served.seen == []


async def test_the_outbound_guard_still_vets_an_allowed_host(served: Upstream) -> None:
    # On the egress allowlist, but the outbound policy opens only the upstream's port; and a
    # metadata address is refused whatever the lists say.
    service = fetch_service(served.port, hosts=("127.0.0.1", "169.254.169.254"))
    agent = caller(approvals=APPROVED)
    other_port = await call(
        service, "http_fetch", {"host": "127.0.0.1:1", "path": "/", "scheme": "http"}, agent
    )
    assert other_port["error"]["code"] == "API_EGRESS_DENIED"
    metadata = await call(
        service,
        "http_fetch",
        {"host": "169.254.169.254", "path": "/latest/", "scheme": "http"},
        agent,
    )
    assert metadata["error"]["code"] == "API_EGRESS_DENIED"
    assert "metadata" in metadata["error"]["message"]


async def test_a_redirect_is_refused_and_never_followed(served: Upstream) -> None:
    service = fetch_service(served.port)
    refused = await call(
        service, "http_fetch", target(served.port, "/redirect"), caller(approvals=APPROVED)
    )
    assert refused["state"] == "failed"
    assert refused["error"]["code"] == "HTTP_FETCH_REDIRECT_REFUSED"
    assert refused["error"]["details"]["status"] == 302
    assert [seen["path"] for seen in served.seen] == ["/redirect"]


async def test_an_oversize_body_is_cut_at_the_cap(served: Upstream) -> None:
    service = fetch_service(served.port, max_bytes=65536)
    cut = await call(service, "http_fetch", target(served.port, "/big"), caller(approvals=APPROVED))
    assert cut["state"] == "completed", cut
    assert cut["result"]["truncated"] is True
    assert len(cut["result"]["content"]) == 65536


async def test_a_slow_upstream_times_out(served: Upstream) -> None:
    service = fetch_service(served.port, timeout_s=0.3)
    started = time.perf_counter()
    slow = await call(
        service, "http_fetch", target(served.port, "/slow"), caller(approvals=APPROVED)
    )
    assert slow["state"] == "failed"
    assert slow["error"]["code"] == "HTTP_FETCH_TIMEOUT"
    assert slow["error"]["retryable"] is True
    assert time.perf_counter() - started < 5


async def test_a_binary_body_is_refused(served: Upstream) -> None:
    service = fetch_service(served.port)
    binary = await call(
        service, "http_fetch", target(served.port, "/binary"), caller(approvals=APPROVED)
    )
    assert binary["error"]["code"] == "HTTP_FETCH_UNSUPPORTED_TYPE"
    assert binary["error"]["details"]["contentType"] == "image/png"


@pytest.mark.parametrize(
    "arguments",
    [
        {"url": "http://127.0.0.1/text"},  # a URL is not an argument
        {"host": "http://127.0.0.1", "path": "/"},
        {"host": "user@127.0.0.1", "path": "/"},
        {"host": "127.0.0.1", "path": "text"},
        {"host": "127.0.0.1", "path": "/a?b=1"},
        {"host": "127.0.0.1", "path": "/", "scheme": "file"},
    ],
)
async def test_anything_but_host_path_and_query_parts_is_refused(
    served: Upstream, arguments: dict[str, Any]
) -> None:
    service = fetch_service(served.port)
    refused = await call(service, "http_fetch", arguments, caller(approvals=APPROVED))
    assert refused["state"] == "denied"
    assert refused["error"]["code"] == "TOOL_INVALID_ARGUMENTS"
    assert served.seen == []


async def test_high_risk_needs_approval_and_the_network_permission(served: Upstream) -> None:
    service = fetch_service(served.port)
    unapproved = await call(service, "http_fetch", target(served.port, "/text"), caller())
    assert unapproved["error"]["code"] == "TOOL_APPROVAL_REQUIRED"
    no_permission = caller(permissions=frozenset(), approvals=APPROVED)
    denied = await call(service, "http_fetch", target(served.port, "/text"), no_permission)
    assert denied["error"]["code"] == "TOOL_PERMISSION_DENIED"
    assert denied["error"]["details"]["missing"] == [{"type": "network", "scope": "*"}]
    assert served.seen == []
    entry = service.resolve(FETCH)
    assert entry is not None
    assert entry.policy.risk == "high"


@pytest.mark.parametrize(
    ("arguments", "judged", "url"),
    [
        ({"host": "docs.example.org", "path": "/a"}, "docs.example.org:443", "https://docs.example.org/a"),
        ({"host": "docs.example.org", "path": "/a", "scheme": "http"}, "docs.example.org:80", "http://docs.example.org/a"),
        ({"host": "127.0.0.1:8080", "path": "/a", "scheme": "http"}, "127.0.0.1:8080", "http://127.0.0.1:8080/a"),
        ({"host": "[::1]:9000", "path": "/a"}, "[::1]:9000", "https://[::1]:9000/a"),
    ],
)  # fmt: skip
def test_the_egress_policy_judges_the_host_and_the_port_dialled(
    arguments: dict[str, Any], judged: str, url: str
) -> None:
    assert http_fetch.target(arguments) == (judged, url)


async def test_a_port_entry_admits_that_port_and_the_denial_names_host_and_port(
    served: Upstream,
) -> None:
    service = fetch_service(served.port, hosts=(f"127.0.0.1:{served.port + 1}",))
    agent = caller(approvals=APPROVED)
    denied = await call(service, "http_fetch", target(served.port, "/text"), agent)
    assert denied["error"]["code"] == "TOOL_EGRESS_DENIED"
    assert denied["error"]["details"]["host"] == f"127.0.0.1:{served.port}"
    assert (
        f'{{"host": "127.0.0.1:{served.port}", "principal": "agent"}}'
        in (denied["error"]["message"])
    )
    service.egress.allow(f"127.0.0.1:{served.port}", "agent", by="test")
    fetched = await call(service, "http_fetch", target(served.port, "/text"), agent)
    assert fetched["state"] == "completed", fetched
    assert [seen["path"] for seen in served.seen] == ["/text"]
