"""Interpret an HTTP answer per the tool's response model; every failure is a ToolFailure."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from doraforge.registry.api_tools.bundle import Envelope, Tool
from doraforge.registry.api_tools.errors import ToolFailure

RAW_READ_CAP = 2 * 1024 * 1024
NON2XX_BODY_CHARS = 500
HTML_PREVIEW_CHARS = 200
_MISSING = object()


@dataclass(frozen=True)
class RawResponse:
    status: int
    content_type: str
    body: bytes
    capped: bool = False


def truncate(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]}…[truncated, {limit}/{len(text)} chars]", True


def dot_path(document: Any, path: str) -> Any:
    current = document
    for part in path.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return _MISSING
    return current


def loose(value: Any) -> str:
    """String-coerce for loose comparison: 0, "0" and 0.0 are one family; true == "true"."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip().lower()


def _looks_html(raw: RawResponse, text: str) -> bool:
    head = text.lstrip()[:15].lower()
    return "html" in raw.content_type.lower() or head.startswith(("<!doctype", "<html", "<"))


def _parse_json(raw: RawResponse, text: str) -> Any:
    if _looks_html(raw, text):
        raise ToolFailure(
            "API_RESPONSE_NOT_JSON",
            f"expected JSON but received HTML (HTTP {raw.status}, {raw.content_type or 'no type'}"
            f"; a login page or WAF block?): {text[:HTML_PREVIEW_CHARS]}",
            details={"status": raw.status},
        )
    try:
        return json.loads(text)
    except ValueError:
        why = "exceeded the 2 MB read cap" if raw.capped else "is not valid JSON"
        raise ToolFailure(
            "API_RESPONSE_INVALID_JSON",
            f"response body {why} (HTTP {raw.status}): {text[:HTML_PREVIEW_CHARS]}",
            details={"status": raw.status},
        ) from None


def _first_error(envelope: Envelope, document: Any) -> str | None:
    for name in envelope.errorFields:
        value = dot_path(document, name)
        if value is not _MISSING and value not in (None, "", [], {}):
            return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return None


def _unwrap(envelope: Envelope | None, document: Any, status: int) -> Any:
    if envelope is None:
        return document
    if envelope.codeField:
        code = dot_path(document, envelope.codeField)
        if code is _MISSING or loose(code) not in {loose(v) for v in envelope.success}:
            shown = None if code is _MISSING else code
            message = _first_error(envelope, document) or f"{envelope.codeField}={shown!r}"
            raise ToolFailure(
                "API_ENVELOPE_ERROR",
                f"upstream reported failure (HTTP {status}): {message}",
                details={"status": status, "code": shown},
            )
    if not envelope.payloadField:
        return document
    payload = dot_path(document, envelope.payloadField)
    if payload is _MISSING:
        raise ToolFailure(
            "API_PAYLOAD_MISSING",
            f"response has no payload field {envelope.payloadField!r} (HTTP {status})",
            details={"status": status},
        )
    return payload


def _non2xx(raw: RawResponse, text: str) -> ToolFailure:
    shown, _ = truncate(text, NON2XX_BODY_CHARS)
    return ToolFailure(
        "API_HTTP_ERROR",
        f"HTTP {raw.status}: {shown}",
        retryable=raw.status == 429 or raw.status >= 500,
        details={"status": raw.status},
    )


def interpret(tool: Tool, raw: RawResponse) -> dict[str, Any]:
    """Turn ``raw`` into the tool result, or raise the tool error it represents."""
    text = raw.body.decode("utf-8", "replace")
    ok = 200 <= raw.status < 300
    envelope = tool.response.envelope
    if 300 <= raw.status < 400:
        raise ToolFailure(
            "API_REDIRECT_REFUSED",
            f"upstream answered HTTP {raw.status} (redirects are not followed)",
            details={"status": raw.status},
        )
    if not ok and not (envelope is not None and envelope.treatBodyOnNon2xx):
        raise _non2xx(raw, text)
    if tool.response.type == "text":
        content = text
    else:
        payload = _unwrap(envelope, _parse_json(raw, text), raw.status)
        if not ok and not (envelope is not None and envelope.codeField):
            raise _non2xx(raw, text)
        content = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    content, truncated = truncate(content, tool.maxResultChars)
    return {"status": raw.status, "content": content, "truncated": truncated or raw.capped}
