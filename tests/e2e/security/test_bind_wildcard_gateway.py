"""A Gateway bound to a wildcard address under real ``dora run``, with the explicit insecure
switch and no token: it starts and says so loudly, and its Host and Origin checks stay on,
so a wildcard bind still names only the loopback names and a rebinding ``Host`` is refused.

(The refusals to bind off loopback, and ``doraforge serve`` on a wildcard, are in
``tests/security/test_bind_refusals.py``.)
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from doraforge.dataflows import DATAFLOWS
from tests.e2e.conftest import MockStack, dataflow_stack
from tests.security.attack_peers import gateway_config
from tests.security.attack_support import JSON, WILDCARD_ROWS, Headers, exchange

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def insecure_wildcard_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockStack]:
    """The mock dataflow with its Gateway on 0.0.0.0, no token, ``security.insecure``."""
    directory = tmp_path_factory.mktemp("gateway-wildcard")
    shutil.copy(DATAFLOWS / "mock.yml", directory / "mock.yml")
    gateway_config(directory, "0.0.0.0", insecure=True)
    with dataflow_stack(directory / "run", dataflow=directory / "mock.yml") as running:
        yield running


def test_an_insecure_wildcard_gateway_starts_and_says_so_loudly(
    insecure_wildcard_gateway: MockStack,
) -> None:
    assert "INSECURE" in insecure_wildcard_gateway.tail(400)
    assert insecure_wildcard_gateway.ready()


@pytest.mark.parametrize(("host", "headers", "code"), WILDCARD_ROWS)
def test_a_wildcard_bound_gateway_keeps_the_host_and_origin_checks(
    insecure_wildcard_gateway: MockStack, host: str, headers: Headers, code: str | None
) -> None:
    stack = insecure_wildcard_gateway
    stack.wait_idle()
    before = stack.stats()["invokes"]["move"]
    body = b'{"arguments": {"duration_s": 0, "behaviour": "succeed"}}'
    answer = exchange(
        stack.port,
        "POST",
        "/tools/mock.move:invoke",
        headers=(JSON, *headers),
        body=body,
        hosts=[host.format(port=stack.port)],
    )
    if code is None:
        assert answer.status == 202, answer
    else:
        assert (answer.status, answer.code) == (403, f"FORGE_TOOL_{code}"), answer
    moved = stack.stats()["invokes"]["move"] - before
    assert moved == (1 if code is None else 0)
