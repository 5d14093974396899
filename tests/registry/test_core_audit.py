"""Every outcome leaves one redacted audit record."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from doraforge.registry.audit import REDACTED, AuditLog
from doraforge.registry.errors import RegistryError
from doraforge.registry.model import Principal
from doraforge.registry.service import RegistryService
from tests.registry.test_core_support import AGENT, CountingAdapter, call, entry

pytestmark = pytest.mark.anyio

SECRET_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "query": {"type": "string"},
        "api_token": {"type": "string"},
        "Authorization": {"type": "string"},
        "db_password": {"type": "string"},
    },
}


async def test_records_hold_keys_never_values_and_mask_credential_keys(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    service = RegistryService(audit=AuditLog(path=path))
    service.register(entry(input_schema=SECRET_SCHEMA), CountingAdapter())
    arguments = {
        "query": "my-private-words",
        "api_token": "tok-123",
        "Authorization": "Bearer abc",
        "db_password": "hunter2",
    }
    await service.call(call("r1", **arguments), AGENT)
    (record,) = service.audit.records()
    assert record["requestId"] == "r1"
    assert record["name"] == "brain.search"
    assert record["principal"] == "agent-1"
    assert record["scope"] == "agent"
    assert record["state"] == "completed"
    assert record["errorCode"] is None
    assert record["durationMs"] >= 0
    assert record["argumentKeys"] == sorted(["query", REDACTED, REDACTED, REDACTED])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # what was called, by whom: private
    text = path.read_text()
    assert json.loads(text) == record
    for value in [*arguments.values(), "api_token", "db_password"]:
        assert value not in text


async def test_every_outcome_is_audited_once() -> None:
    service = RegistryService()
    service.register(entry(), CountingAdapter())
    await service.call(call("ok", query="q"), AGENT)
    await service.call(call("ok", query="q"), AGENT)
    await service.call(call("missing", "no.such.tool"), AGENT)
    await service.call(call("bad", wrong=1, other=2), AGENT)
    with pytest.raises(RegistryError):
        await service.call(call("ok", query="different"), AGENT)
    with pytest.raises(RegistryError):
        await service.call({"requestId": "x y", "name": "brain.search"}, AGENT)
    summary = [
        (r["requestId"], r["state"], r["errorCode"], r["duplicate"])
        for r in service.audit.records()
    ]
    assert summary == [
        ("ok", "completed", None, False),
        ("ok", "completed", None, True),
        ("missing", "denied", "TOOL_NOT_FOUND", False),
        ("bad", "denied", "TOOL_INVALID_ARGUMENTS", False),
        ("ok", "rejected", "TOOL_IDEMPOTENCY_CONFLICT", False),
        ("x y", "rejected", "TOOL_INVALID_CALL", False),
    ]


def test_audit_log_is_bounded() -> None:
    log = AuditLog(max_records=3)
    principal = Principal(id="p", scope="ui")
    for n in range(5):
        log.record(
            request_id=str(n),
            name="t",
            principal_id=principal.id,
            scope=principal.scope,
            state="completed",
            error_code=None,
            duration_s=0.0,
        )
    assert [r["requestId"] for r in log.records()] == ["2", "3", "4"]
