"""After a Gateway restart: orphaned attempts are asked to stop; readiness trusts the provider."""

from __future__ import annotations

from pathlib import Path

import pytest
from forge_tool import EndpointStatus, make_endpoint_status_envelope

from doraforge.gateway.admission import InvokeBody
from doraforge.gateway.core import Gateway, tool_context
from doraforge.gateway.journal import FileJournal
from doraforge.gateway.local import LocalCarrier, LocalProvider
from tests.gateway.harness import mock_config, mock_handler
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.anyio

HANG = {"duration_s": 5, "behaviour": "hang"}


def _controls(provider: LocalProvider, invocation_id: str) -> list[str]:
    return [
        str(envelope.payload.get("command"))
        for envelope in provider.received
        if envelope.message_type == "tool.control.request"
        and envelope.invocation_id == invocation_id
    ]


async def _orphan_after_restart(tmp_path: Path) -> tuple[LocalProvider, Gateway, str]:
    """A hanging move admitted by one Gateway, then that Gateway replaced by a new one."""
    journal = tmp_path / "gateway.journal"
    carrier = LocalCarrier()
    provider = LocalProvider("mock", mock_handler)
    first = Gateway(mock_config(), send=carrier.send, journal=FileJournal(journal))
    carrier.add(provider, first.on_message)
    provider.register()
    await eventually_async(lambda: first.registry.current("mock") is not None, what="registration")
    invocation, _ = await first.runtime.start("mock.move", InvokeBody(arguments=HANG))
    assert invocation.phase in ("accepted", "running")
    # The Gateway process dies; a new one replays the journal.
    second = Gateway(mock_config(), send=carrier.send, journal=FileJournal(journal))
    second.runtime.restore()
    carrier.add(provider, second.on_message)
    return provider, second, invocation.invocation_id


async def test_restarted_gateway_asks_the_same_instance_to_cancel_an_orphaned_action(
    tmp_path: Path,
) -> None:
    provider, gateway, invocation_id = await _orphan_after_restart(tmp_path)
    assert gateway.runtime.get(invocation_id).phase == "unknown"
    assert _controls(provider, invocation_id) == []

    provider.register()  # the provider process lived on and renews its lease
    await eventually_async(lambda: _controls(provider, invocation_id) == ["cancel"], what="cancel")
    await eventually_async(
        lambda: any(
            e.message_type == "tool.event" and e.payload.get("type") == "cancelled"
            for e in provider.sent
        ),
        what="provider cancelled the motion",
    )
    # The caller-visible outcome stays unknown whatever the provider does next.
    assert gateway.runtime.get(invocation_id).phase == "unknown"


async def test_orphans_of_a_replaced_instance_are_not_sent_anything(tmp_path: Path) -> None:
    provider, gateway, invocation_id = await _orphan_after_restart(tmp_path)
    provider.restart()  # a new process: the orphan died with the old one
    provider.register()
    await eventually_async(
        lambda: (
            (record := gateway.registry.current("mock")) is not None
            and record.instance_id == provider.instance_id
        ),
        what="registration of the new instance",
    )
    assert _controls(provider, invocation_id) == []


async def test_context_is_not_ready_when_the_provider_reports_the_operation_saturated() -> None:
    carrier = LocalCarrier()
    gateway = Gateway(mock_config(), send=carrier.send)
    provider = carrier.add(LocalProvider("mock", mock_handler), gateway.on_message)
    provider.register()
    await eventually_async(
        lambda: gateway.registry.current("mock") is not None, what="registration"
    )

    def report(saturated: list[str]) -> None:
        status = EndpointStatus(
            endpoint_id="mock",
            state="busy" if saturated else "ready",
            active_invocations=len(saturated),
            details={"saturated_operations": saturated},
        )
        envelope = make_endpoint_status_envelope(status, endpoint_instance_id=provider.instance_id)
        gateway.on_message("mock", envelope)

    report([])
    context = tool_context(gateway, "mock.move")
    assert context is not None
    assert context["ready"] is True
    report(["move"])  # e.g. still running an attempt a previous Gateway process admitted
    context = tool_context(gateway, "mock.move")
    assert context is not None
    assert context["readiness"]["operation_capacity"] is False
    assert context["ready"] is False
