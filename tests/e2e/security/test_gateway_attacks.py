"""The Gateway's attack table: real sockets against a real ``dora run dataflows/mock.yml``.

Each row is a request that a hostile web page, a DNS-rebinding page or an over-reaching
agent would send to the Gateway. Every refused row asserts the status and the code of the
refusal, then that nothing got through: the mock provider's own invoke counters (its
``stats`` Query) did not move, no invocation was admitted for the row's ``caller_id``, a
running Action was not asked to cancel, a read answered no data. Rows that must pass (the
server's own origin, a loopback Host, the right token) are in the table too, so every
refusal is measured against a request that differs from it in one header only.

Two Gateways run for the module: one on loopback without a token, and one handed a token
through ``DORAFORGE_GATEWAY_TOKEN_FILE`` (as the Skill Runtime hands a started skill its
token).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from doraforge.wire.tokens import write_token
from tests.e2e.conftest import GATEWAY_MARK, MockStack, dataflow_stack, mock_stack
from tests.security.attack_support import (
    BODY_LIMIT,
    EVIL_ORIGINS,
    FOREIGN_ORIGINS,
    HUGE_INTEGER,
    JSON,
    NOT_JSON,
    REBINDING_HOSTS,
    TOKEN_REFUSALS,
    Answer,
    Headers,
    MiB,
    chunked_flood,
    declared_oversize,
    deep_array,
    exchange,
    presented,
    raw_exchange,
    ws_handshake,
)

pytestmark = pytest.mark.e2e

TOKEN_FILE_ENV = "DORAFORGE_GATEWAY_TOKEN_FILE"
PREFIX = "FORGE_TOOL_"
#: The most RSS the Gateway may gain while a 200 MiB chunked body is thrown at it.
MAX_FLOOD_GROWTH = 32 * MiB


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockStack]:
    """The mock dataflow's Gateway on loopback, no token."""
    with mock_stack(tmp_path_factory.mktemp("gateway-open")) as running:
        yield running


@pytest.fixture(scope="module")
def locked_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockStack]:
    """The mock dataflow's Gateway with a bearer token from a 0600 token file."""
    directory = tmp_path_factory.mktemp("gateway-locked")
    token_file = directory / "gateway.token"
    token = write_token(token_file)
    env = {TOKEN_FILE_ENV: str(token_file)}
    with dataflow_stack(directory, env_extra=env, token=token) as running:
        yield running


# ------------------------------------------------------------------------ targets


@dataclass
class Target:
    """One Gateway route a row attacks, and how to tell afterwards whether the request
    got through (``admitted`` reads the provider and the Gateway, not the answer alone)."""

    method: str
    path: str
    body: bytes | None
    admitted: Callable[[Answer], bool]


def _dumps(value: object) -> bytes:
    return json.dumps(value).encode()


def _echo_count(stack: MockStack) -> int:
    return int(stack.stats()["invokes"]["echo"])


def _move_count(stack: MockStack) -> int:
    return int(stack.stats()["invokes"]["move"])


def _query(stack: MockStack) -> Target:
    before = _echo_count(stack)
    body = _dumps({"arguments": {"message": "attack"}})
    return Target("POST", "/tools/mock/echo:invoke", body, lambda _: _echo_count(stack) > before)


def _action(stack: MockStack) -> Target:
    stack.wait_idle()  # mock.move runs one at a time: a row must not meet a busy slot
    caller = f"attack-{uuid.uuid4().hex}"
    before = _move_count(stack)
    arguments = {"duration_s": 0, "behaviour": "succeed"}
    body = _dumps({"arguments": arguments, "caller_id": caller})

    def admitted(_: Answer) -> bool:
        found = stack.data(stack.http.get("/invocations", params={"caller_id": caller}))
        return _move_count(stack) > before or bool(found["invocations"])

    return Target("POST", "/tools/mock.move:invoke", body, admitted)


def _cancel(stack: MockStack, hanging: str) -> Target:
    def admitted(_: Answer) -> bool:
        status = stack.status(hanging)
        cancel_status: str = status["cancel_status"]
        terminal: bool = status["terminal"]
        return cancel_status != "none" or terminal

    return Target("POST", f"/invocations/{hanging}/cancel", b"{}", admitted)


def _catalog_read(_stack: MockStack) -> Target:
    return Target("GET", "/tools", None, lambda answer: b'"tools"' in answer.body)


def _lookup_read(_stack: MockStack) -> Target:
    path = "/invocations?caller_id=anyone"
    return Target("GET", path, None, lambda answer: b'"invocations"' in answer.body)


def _openapi_read(_stack: MockStack) -> Target:
    return Target("GET", "/openapi.json", None, lambda answer: b'"openapi"' in answer.body)


def _unknown_route(_stack: MockStack) -> Target:
    # Reaching the router at all would answer 404 and tell a prober which routes exist.
    path = "/no/such/route"
    return Target("GET", path, None, lambda answer: answer.code == "FORGE_TOOL_ROUTE_NOT_FOUND")


@pytest.fixture
def hanging() -> Iterator[Callable[[MockStack], str]]:
    """Start a ``move`` that hangs until cancelled; always cancel it and wait it out."""
    started: list[tuple[MockStack, str]] = []

    def start(stack: MockStack) -> str:
        stack.wait_idle()
        arguments = {"duration_s": 0, "behaviour": "hang"}
        invocation: str = stack.start("mock.move", arguments)["invocation_id"]
        started.append((stack, invocation))
        return invocation

    yield start
    for stack, invocation in started:
        stack.http.post(f"/invocations/{invocation}/cancel")
        stack.terminal(invocation)
        stack.wait_idle()


WRITES = ("query", "action", "cancel")
READS = ("catalog", "lookup", "openapi", "unknown-route")


def target(stack: MockStack, surface: str, hanging: Callable[[MockStack], str]) -> Target:
    """The :class:`Target` for ``surface`` on ``stack`` (a cancel gets its own hang)."""
    if surface == "cancel":
        return _cancel(stack, hanging(stack))
    builders: dict[str, Callable[[MockStack], Target]] = {
        "query": _query,
        "action": _action,
        "catalog": _catalog_read,
        "lookup": _lookup_read,
        "openapi": _openapi_read,
        "unknown-route": _unknown_route,
    }
    return builders[surface](stack)


def send(
    stack: MockStack,
    goal: Target,
    headers: Headers = (JSON,),
    *,
    hosts: list[str] | None = None,
    body: bytes | None = None,
    authorise: bool = True,
) -> Answer:
    """``goal`` sent with exactly ``headers`` (a read without its Content-Type), plus the
    stack's token when it has one and ``authorise`` holds."""
    bearer = stack.token is not None and authorise
    auth = (("Authorization", f"Bearer {stack.token}"),) if bearer else ()
    if goal.method == "GET":
        headers = tuple(header for header in headers if header != JSON)
    payload = goal.body if body is None else body
    return exchange(
        stack.port, goal.method, goal.path, headers=(*headers, *auth), body=payload, hosts=hosts
    )


def assert_refused(answer: Answer, goal: Target, status: int, code: str) -> None:
    assert (answer.status, answer.code) == (status, code), answer
    body = answer.json()
    assert body["ok"] is False, body
    assert body["msg"] == body["error"]["message"], body
    assert not goal.admitted(answer), f"refused with {status} but admitted anyway: {answer}"


# ------------------------------------------------------------------- content types


@pytest.mark.parametrize("surface", WRITES)
@pytest.mark.parametrize("kind", list(NOT_JSON))
def test_a_browser_simple_request_body_is_refused_415_and_nothing_is_admitted(
    gateway: MockStack, hanging: Callable[[MockStack], str], surface: str, kind: str
) -> None:
    goal = target(gateway, surface, hanging)
    answer = send(gateway, goal, NOT_JSON[kind])
    assert_refused(answer, goal, 415, "FORGE_TOOL_UNSUPPORTED_MEDIA_TYPE")


@pytest.mark.parametrize("surface", WRITES)
def test_the_same_write_as_application_json_is_admitted(
    gateway: MockStack, hanging: Callable[[MockStack], str], surface: str
) -> None:
    goal = target(gateway, surface, hanging)
    answer = send(gateway, goal)
    assert answer.status in (200, 202), answer
    assert goal.admitted(answer)


def test_a_cancel_with_no_body_and_no_content_type_is_admitted_as_forge_clients_send_it(
    gateway: MockStack, hanging: Callable[[MockStack], str]
) -> None:
    goal = target(gateway, "cancel", hanging)
    answer = exchange(gateway.port, "POST", goal.path, body=b"")
    assert answer.status == 202, answer
    assert goal.admitted(answer)


# ------------------------------------------------------------------------- origins


@pytest.mark.parametrize("surface", WRITES)
@pytest.mark.parametrize("origin", list(FOREIGN_ORIGINS))
def test_a_cross_origin_write_is_refused_403_and_nothing_is_admitted(
    gateway: MockStack, hanging: Callable[[MockStack], str], surface: str, origin: str
) -> None:
    goal = target(gateway, surface, hanging)
    answer = send(gateway, goal, (JSON, *FOREIGN_ORIGINS[origin](gateway.port)))
    assert_refused(answer, goal, 403, "FORGE_TOOL_ORIGIN_NOT_ALLOWED")


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost"])
def test_the_gateways_own_origin_is_admitted(gateway: MockStack, name: str) -> None:
    goal = _action(gateway)
    answer = send(gateway, goal, (JSON, ("Origin", f"http://{name}:{gateway.port}")))
    assert answer.status == 202, answer
    assert goal.admitted(answer)


# --------------------------------------------------------------------------- hosts


@pytest.mark.parametrize("surface", ["action", "cancel", "catalog"])
@pytest.mark.parametrize("host", list(REBINDING_HOSTS))
def test_a_rebinding_host_is_refused_403_and_nothing_is_admitted_or_read(
    gateway: MockStack, hanging: Callable[[MockStack], str], surface: str, host: str
) -> None:
    goal = target(gateway, surface, hanging)
    answer = send(gateway, goal, hosts=REBINDING_HOSTS[host](gateway.port))
    assert_refused(answer, goal, 403, "FORGE_TOOL_HOST_NOT_ALLOWED")


@pytest.mark.parametrize(
    "name", ["localhost", "127.0.0.1", "[::1]"], ids=["localhost", "ipv4", "ipv6"]
)
def test_a_loopback_host_names_the_loopback_gateway(gateway: MockStack, name: str) -> None:
    goal = _catalog_read(gateway)
    answer = send(gateway, goal, hosts=[f"{name}:{gateway.port}"])
    assert answer.status == 200, answer
    assert goal.admitted(answer)


# ---------------------------------------------------------------------- websockets

STREAMS = ("/ws/images", "/ws/state")


@pytest.mark.parametrize("path", STREAMS)
@pytest.mark.parametrize("origin", EVIL_ORIGINS, ids=["evil-example", "null", "localhost-port-1"])
def test_a_stream_opened_from_a_foreign_origin_is_refused_403(
    gateway: MockStack, path: str, origin: str
) -> None:
    opened = ws_handshake(gateway.port, path, origin=origin)
    assert (opened.status, opened.code) == (403, "FORGE_TOOL_ORIGIN_NOT_ALLOWED")


@pytest.mark.parametrize("path", STREAMS)
def test_a_stream_opened_through_a_rebinding_host_is_refused_403(
    gateway: MockStack, path: str
) -> None:
    opened = ws_handshake(gateway.port, path, host=f"evil.example:{gateway.port}")
    assert (opened.status, opened.code) == (403, "FORGE_TOOL_HOST_NOT_ALLOWED")


@pytest.mark.parametrize("path", STREAMS)
def test_a_stream_opened_from_the_gateways_own_origin_opens(gateway: MockStack, path: str) -> None:
    own = f"http://127.0.0.1:{gateway.port}"
    assert ws_handshake(gateway.port, path, origin=own).status == 101


@dataclass(frozen=True)
class Offer:
    """What a WebSocket client presents: a query string, headers, subprotocols."""

    query: str = ""
    headers: dict[str, str] | None = None
    subprotocols: list[str] | None = None


def _ws_offer(case: str, token: str) -> Offer:
    wrong = "w" * len(token)
    return {
        "no-token": Offer(),
        "wrong-bearer-header": Offer(headers={"Authorization": f"Bearer {wrong}"}),
        "short-bearer-header": Offer(headers={"Authorization": f"Bearer {token[:16]}"}),
        "wrong-subprotocol-token": Offer(
            subprotocols=["doraforge.v1", f"doraforge.bearer.{wrong}"]
        ),
        "token-in-the-query-string": Offer(query=f"?access_token={token}"),
    }[case]


WS_REFUSALS = {
    "no-token": "FORGE_TOOL_AUTH_REQUIRED",
    "wrong-bearer-header": "FORGE_TOOL_AUTH_INVALID",
    "short-bearer-header": "FORGE_TOOL_AUTH_INVALID",
    "wrong-subprotocol-token": "FORGE_TOOL_AUTH_INVALID",
    "token-in-the-query-string": "FORGE_TOOL_AUTH_REQUIRED",
}


@pytest.mark.parametrize("path", STREAMS)
@pytest.mark.parametrize("offer", list(WS_REFUSALS))
def test_a_stream_without_the_right_token_is_refused_401(
    locked_gateway: MockStack, path: str, offer: str
) -> None:
    assert locked_gateway.token is not None
    shown = _ws_offer(offer, locked_gateway.token)
    opened = ws_handshake(
        locked_gateway.port,
        path + shown.query,
        headers=shown.headers,
        subprotocols=shown.subprotocols,
    )
    assert (opened.status, opened.code) == (401, WS_REFUSALS[offer])


@pytest.mark.parametrize("path", STREAMS)
def test_a_stream_with_the_token_from_a_foreign_origin_is_still_refused_403(
    locked_gateway: MockStack, path: str
) -> None:
    bearer = {"Authorization": f"Bearer {locked_gateway.token}"}
    opened = ws_handshake(locked_gateway.port, path, origin="http://evil.example", headers=bearer)
    assert (opened.status, opened.code) == (403, "FORGE_TOOL_ORIGIN_NOT_ALLOWED")


@pytest.mark.parametrize("path", STREAMS)
def test_a_stream_opens_with_the_bearer_header(locked_gateway: MockStack, path: str) -> None:
    bearer = {"Authorization": f"Bearer {locked_gateway.token}"}
    opened = ws_handshake(locked_gateway.port, path, headers=bearer)
    assert opened.status == 101


@pytest.mark.parametrize("path", STREAMS)
def test_a_browser_stream_opens_with_the_subprotocol_token_and_gets_doraforge_v1(
    locked_gateway: MockStack, path: str
) -> None:
    offered = ["doraforge.v1", f"doraforge.bearer.{locked_gateway.token}"]
    opened = ws_handshake(locked_gateway.port, path, subprotocols=offered)
    assert (opened.status, opened.subprotocol) == (101, "doraforge.v1")


# -------------------------------------------------------------------------- tokens


@pytest.mark.parametrize("surface", [*READS, *WRITES])
@pytest.mark.parametrize("case", list(TOKEN_REFUSALS))
def test_a_request_without_the_right_token_is_refused_401_and_nothing_is_admitted(
    locked_gateway: MockStack, hanging: Callable[[MockStack], str], surface: str, case: str
) -> None:
    assert locked_gateway.token is not None
    goal = target(locked_gateway, surface, hanging)
    headers = (JSON, *presented(case, locked_gateway.token))
    answer = send(locked_gateway, goal, headers, authorise=False)
    assert_refused(answer, goal, 401, PREFIX + TOKEN_REFUSALS[case])
    assert answer.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("surface", [*READS, *WRITES])
def test_the_same_request_with_the_token_is_admitted(
    locked_gateway: MockStack, hanging: Callable[[MockStack], str], surface: str
) -> None:
    goal = target(locked_gateway, surface, hanging)
    answer = send(locked_gateway, goal)
    assert answer.status in (200, 202, 404), answer  # 404: the unknown route, reached
    assert goal.admitted(answer)


# -------------------------------------------------------------------------- bodies


def test_a_chunked_flood_is_refused_413_at_the_limit_without_being_buffered(
    gateway: MockStack,
) -> None:
    goal = _action(gateway)
    server = gateway.node(GATEWAY_MARK).pid
    flood = chunked_flood(gateway.port, goal.path, (JSON,), server_pid=server)
    assert_refused(flood.answer, goal, 413, "FORGE_TOOL_BODY_TOO_LARGE")
    assert flood.answer.json()["error"]["details"] == {"limit_bytes": BODY_LIMIT}
    assert flood.sent_bytes < 64 * MiB, "the Gateway kept reading far past its limit"
    assert flood.rss_growth_bytes < MAX_FLOOD_GROWTH, flood


@pytest.mark.parametrize("surface", ["query", "action"])
def test_a_declared_length_over_the_limit_is_refused_413_before_any_byte_is_sent(
    gateway: MockStack, hanging: Callable[[MockStack], str], surface: str
) -> None:
    goal = target(gateway, surface, hanging)
    answer = declared_oversize(gateway.port, goal.path, (JSON,))
    assert_refused(answer, goal, 413, "FORGE_TOOL_BODY_TOO_LARGE")


SMUGGLING: dict[str, Callable[[bytes], bytes]] = {
    "content-length-and-chunked": lambda body: (
        b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % len(body)
        + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    ),
    "two-content-lengths": lambda body: (
        b"Content-Length: %d\r\nContent-Length: 2\r\n\r\n%s" % (len(body), body)
    ),
    "negative-content-length": lambda body: b"Content-Length: -1\r\n\r\n" + body,
}


@pytest.mark.parametrize("framing", list(SMUGGLING))
def test_an_ambiguously_framed_body_is_refused_400_and_nothing_is_admitted(
    gateway: MockStack, framing: str
) -> None:
    goal = _action(gateway)
    assert goal.body is not None
    head = f"POST {goal.path} HTTP/1.1\r\nHost: 127.0.0.1:{gateway.port}\r\n"
    head += "Content-Type: application/json\r\nConnection: close\r\n"
    answer = raw_exchange(gateway.port, head.encode() + SMUGGLING[framing](goal.body))
    assert answer.status == 400, answer  # the HTTP parser's refusal, before any route
    assert not goal.admitted(answer)


def _action_with(arguments: str) -> bytes:
    return f'{{"arguments": {arguments}, "caller_id": "hostile-json"}}'.encode()


HOSTILE_JSON: dict[str, tuple[bytes, str]] = {
    "integer-of-5000-digits": (
        _action_with(f'{{"duration_s": {HUGE_INTEGER}, "behaviour": "succeed"}}'),
        "FORGE_TOOL_JSON_UNSAFE_INTEGER",
    ),
    "integer-beyond-2-pow-53": (
        _action_with('{"duration_s": 9007199254740993, "behaviour": "succeed"}'),
        "FORGE_TOOL_JSON_UNSAFE_INTEGER",
    ),
    "nesting-100000-deep": (_action_with(deep_array()), "FORGE_TOOL_JSON_TOO_DEEP"),
    "duplicate-arguments-key": (
        b'{"arguments": {"duration_s": 0, "behaviour": "succeed"},'
        b' "arguments": {"duration_s": 5, "behaviour": "hang"}}',
        "FORGE_TOOL_JSON_DUPLICATE_KEY",
    ),
    "nan": (
        _action_with('{"duration_s": NaN, "behaviour": "succeed"}'),
        "FORGE_TOOL_JSON_NON_FINITE",
    ),
    "infinity": (
        _action_with('{"duration_s": -Infinity, "behaviour": "succeed"}'),
        "FORGE_TOOL_JSON_NON_FINITE",
    ),
    "number-overflowing-to-infinity": (
        _action_with('{"duration_s": 1e999, "behaviour": "succeed"}'),
        "FORGE_TOOL_JSON_NON_FINITE",
    ),
    "lone-surrogate": (
        _action_with('{"duration_s": 0, "behaviour": "\\ud800"}'),
        "FORGE_TOOL_JSON_LONE_SURROGATE",
    ),
    "not-utf-8": (
        b'{"arguments": {"duration_s": 0, "behaviour": "\xff"}}',
        "FORGE_TOOL_INVALID_JSON",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE_JSON))
def test_hostile_json_is_refused_400_with_its_rule_and_nothing_is_admitted(
    gateway: MockStack, case: str
) -> None:
    goal = _action(gateway)
    body, code = HOSTILE_JSON[case]
    answer = send(gateway, goal, body=body)
    assert_refused(answer, goal, 400, code)
