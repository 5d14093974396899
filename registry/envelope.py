"""The strict ``portos_tool_call`` envelope.

Unknown fields are rejected and nothing is coerced. ``requestId`` is trimmed, then must be
1-200 characters of ``[A-Za-z0-9._:-]``; ``name`` follows the same rule. ``version`` pins the
tool version and defaults to the registered one (``None`` here); a version other than the
registered one, future or past, is refused by the lookup gate. A body never carries scope,
principal or capabilities: the envelope has no field that could hold them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from doraforge.registry.errors import InvalidRequest

Identifier = Annotated[
    str, StringConstraints(strip_whitespace=True, pattern=r"^[A-Za-z0-9._:-]{1,200}$")
]
MAX_ERRORS = 10


class ToolCall(BaseModel):
    """A validated call envelope."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    type: Literal["portos_tool_call"] = "portos_tool_call"
    requestId: Identifier
    name: Identifier
    version: Annotated[int, Field(ge=1)] | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)


def _errors(exc: ValidationError) -> list[dict[str, str]]:
    return [
        {"loc": (".".join(str(p) for p in e["loc"]) or "(body)")[:200], "msg": e["msg"]}
        for e in exc.errors(include_url=False, include_input=False)[:MAX_ERRORS]
    ]


def parse_call(body: Any, idempotency_key: str | None = None) -> ToolCall:
    """Validate ``body`` and the optional ``Idempotency-Key``.

    Raises :class:`InvalidRequest` TOOL_INVALID_CALL for a malformed envelope and
    TOOL_IDEMPOTENCY_KEY_MISMATCH when the key differs from the (trimmed) ``requestId``.
    """
    if not isinstance(body, Mapping):
        raise InvalidRequest("TOOL_INVALID_CALL", "call body must be a JSON object")
    try:
        call = ToolCall.model_validate(dict(body))
    except ValidationError as exc:
        raise InvalidRequest(
            "TOOL_INVALID_CALL", "invalid portos_tool_call", details={"errors": _errors(exc)}
        ) from exc
    if idempotency_key is not None and idempotency_key.strip() != call.requestId:
        raise InvalidRequest(
            "TOOL_IDEMPOTENCY_KEY_MISMATCH",
            "Idempotency-Key must equal requestId",
            details={"requestId": call.requestId},
        )
    return call
