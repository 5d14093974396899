"""Query invocation: validated, bounded, one exchange, a terminal result or an error."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from forge_tool import ToolEnvelope, ToolProtocolError

from doraforge.gateway import admission, wire
from doraforge.gateway.admission import InvokeBody
from doraforge.gateway.catalog import Catalog, ToolSpec
from doraforge.gateway.clock import Clock
from doraforge.gateway.config import GatewayConfig
from doraforge.gateway.errors import ProviderProtocolError, QueryTimeout, Unavailable
from doraforge.gateway.exchange import Exchanges, InstanceLost
from doraforge.gateway.registry import EndpointRecord, EndpointRegistry


class QueryInvoker:
    """Runs Queries; ``in_flight`` counts them per ``(endpoint_id, operation)``."""

    def __init__(
        self,
        *,
        config: GatewayConfig,
        catalog: Catalog,
        registry: EndpointRegistry,
        exchanges: Exchanges,
        clock: Clock,
    ) -> None:
        self._config = config
        self._catalog = catalog
        self._registry = registry
        self._exchanges = exchanges
        self._clock = clock
        self.in_flight: Counter[tuple[str, str]] = Counter()

    async def query(self, endpoint_id: str, operation: str, body: InvokeBody) -> dict[str, Any]:
        """Invoke a Query and return ``{endpoint_id, operation, response}``."""
        spec = admission.query_spec(self._catalog, endpoint_id, operation)
        admission.validate_arguments(spec, body.arguments)
        record = admission.bound_record(self._registry, spec)
        key = (endpoint_id, operation)
        limit = admission.max_concurrency(spec, record)
        if self.in_flight[key] >= limit:
            raise admission.busy(spec, limit)
        timeout_ms = admission.effective_timeout(self._config, body.timeout_ms)
        self.in_flight[key] += 1
        try:
            answer = await self._exchange(spec, record, body, timeout_ms)
        finally:
            self.in_flight[key] -= 1
        return {"endpoint_id": endpoint_id, "operation": operation, "response": answer}

    async def _exchange(
        self, spec: ToolSpec, record: EndpointRecord, body: InvokeBody, timeout_ms: int
    ) -> dict[str, Any]:
        envelope = wire.invoke_request(
            spec,
            uuid.uuid4().hex,
            uuid.uuid4().hex,
            body.arguments,
            request_id=self._exchanges.new_request_id(),
            instance_id=record.instance_id,
            caller_id=body.caller_id,
            deadline_ms=self._clock.wall_ms() + timeout_ms,
        )
        try:
            response = await self._exchanges.request(spec.endpoint_id, envelope, timeout_ms / 1000)
        except TimeoutError as exc:
            raise QueryTimeout(
                "FORGE_TOOL_INVOKE_TIMEOUT",
                f"Query did not answer within {timeout_ms} ms; its outcome is unknown",
                details={"timeout_ms": timeout_ms},
            ) from exc
        except InstanceLost as exc:
            raise Unavailable(
                "FORGE_TOOL_ENDPOINT_UNAVAILABLE", "the provider instance went away"
            ) from exc
        return _answer(spec, response)


def _answer(spec: ToolSpec, response: ToolEnvelope) -> dict[str, Any]:
    error = wire.provider_error(response)
    if error is not None:
        raise ProviderProtocolError(
            "FORGE_TOOL_PROVIDER_ERROR", error["message"], details={"provider_error": error}
        )
    try:
        outcome, body = wire.read_invoke_response(response)
    except ToolProtocolError as exc:
        raise ProviderProtocolError("FORGE_TOOL_PROVIDER_PROTOCOL", exc.message) from exc
    if outcome == "rejected":
        raise admission.rejection(body)
    if outcome == "accepted":
        raise ProviderProtocolError(
            "FORGE_TOOL_QUERY_NON_TERMINAL_RESPONSE",
            "the provider answered a Query without a terminal result",
        )
    return {"outcome": "completed", "result": admission.checked_outputs(spec, body)}
