"""Property: any JSON body given to ``RegistryService.call`` yields a result or a
``RegistryError``, never another exception."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doraforge.registry.errors import RegistryError
from doraforge.registry.http import status_for
from doraforge.registry.service import RegistryService
from tests.registry.test_core_support import AGENT, CountingAdapter, entry

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
NAMES = st.sampled_from(["brain.search", "brain_search", "nope", "", " brain.search "])
ARGUMENT_KEYS = st.sampled_from(["query", "limit", "tags", "exact", "mode", "input", "q"])
ENVELOPE = st.fixed_dictionaries(
    {"requestId": st.text(alphabet="abc-_.: ", max_size=8) | JSON, "name": NAMES | JSON},
    optional={
        "type": st.just("portos_tool_call") | JSON,
        "version": st.integers(-1, 3) | JSON,
        "arguments": st.dictionaries(ARGUMENT_KEYS, JSON, max_size=5) | JSON,
        "extra": JSON,
    },
)


def _service() -> RegistryService:
    service = RegistryService()
    service.register(entry(), CountingAdapter())
    return service


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=ENVELOPE | JSON, key=st.none() | st.text(max_size=8))
def test_any_body_gives_a_result_or_a_registry_error(body: Any, key: str | None) -> None:
    service = _service()

    async def attempt() -> dict[str, Any] | RegistryError:
        try:
            return await service.call(body, AGENT, idempotency_key=key)
        except RegistryError as exc:
            return exc

    outcome = asyncio.run(attempt())
    if isinstance(outcome, RegistryError):
        assert status_for(outcome) in (400, 409)
    else:
        assert outcome["type"] == "portos_tool_result"
        assert outcome["state"] in ("completed", "denied", "failed", "timeout")
