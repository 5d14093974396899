"""Render a tool call into an HTTP request.

Secret substitution and argument substitution are structurally separate: secrets fill only
``{{secret:NAME}}`` slots of the bundle's own header values, arguments fill only declared
param slots, and no text produced from an argument is ever expanded again. A path parameter
fills exactly one segment (percent-encoded whole, never ``.`` or ``..``), and the final URL's
path must stay under the bundle's base path (``API_PATH_ESCAPE`` otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlencode, urlsplit

from doraforge.registry.api_tools.bundle import DOT_SEGMENTS, PATH_SLOT, SECRET_SLOT, Bundle, Tool
from doraforge.registry.api_tools.errors import ToolFailure

MASK = "****"


@dataclass(frozen=True)
class RenderedRequest:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None
    masked_headers: dict[str, str] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        """The request as a reviewer may see it: secret header values masked."""
        body = self.body.decode("utf-8", "replace") if self.body is not None else None
        return {
            "method": self.method,
            "url": self.url,
            "headers": dict(self.masked_headers),
            "body": body,
        }


def _bad_argument(name: str, why: str) -> ToolFailure:
    return ToolFailure("API_ARGUMENT_INVALID", f"argument {name!r} {why}", details={"param": name})


def _text(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise _bad_argument(name, "must be a string, number or boolean")


def _check_arguments(tool: Tool, arguments: Mapping[str, Any]) -> None:
    declared = {p.name for p in tool.params}
    unknown = sorted(set(arguments) - declared)
    if unknown:
        raise ToolFailure(
            "API_ARGUMENT_UNKNOWN", f"undeclared arguments: {unknown}", details={"names": unknown}
        )
    missing = [p.name for p in tool.params if p.required and p.name not in arguments]
    if missing:
        raise ToolFailure(
            "API_ARGUMENT_MISSING",
            f"missing required arguments: {missing}",
            details={"names": missing},
        )


def _fill_secrets(template: str, lookup: Callable[[str], str]) -> str:
    return SECRET_SLOT.sub(lambda match: lookup(match.group(1)), template)


def _secret_lookup(secrets: Mapping[str, str]) -> Callable[[str], str]:
    def lookup(name: str) -> str:
        value = secrets.get(name)
        if value is None:
            raise ToolFailure(
                "API_CREDENTIAL_MISSING",
                f"credential {name!r} is not configured",
                details={"credential": name},
            )
        if any(ch in value for ch in "\r\n\0"):
            raise ToolFailure("API_CREDENTIAL_INVALID", f"credential {name!r} has control chars")
        return value

    return lookup


def _headers(
    bundle: Bundle, tool: Tool, arguments: Mapping[str, Any], secrets: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    lookup = _secret_lookup(secrets)
    items = bundle.headers.items()
    real = {key: _fill_secrets(value, lookup) for key, value in items}
    masked = {key: _fill_secrets(value, lambda _name: MASK) for key, value in items}
    for param in tool.params:
        if param.in_ == "header" and param.name in arguments:
            value = _text(param.name, arguments[param.name])
            if any(ch in value for ch in "\r\n\0"):
                raise _bad_argument(param.name, "contains control characters")
            real[param.name] = masked[param.name] = value
    return real, masked


def _segment(name: str, value: Any) -> str:
    """One path parameter as exactly one segment: percent-encoded whole (a ``/`` in it is
    ``%2F``), never ``.`` or ``..``, which a dialler or server would resolve upward."""
    text = _text(name, value)
    if text in DOT_SEGMENTS:
        raise ToolFailure(
            "API_PATH_ESCAPE",
            f"argument {name!r} may not be {text!r}: a path parameter is one segment and "
            "cannot climb out of the service's base path",
            details={"param": name},
        )
    return quote(text, safe="")


def _contained(bundle: Bundle, url: str) -> str:
    """``url`` when its path stays under the bundle's base path with no dot segment left
    to resolve; ``API_PATH_ESCAPE`` otherwise (a check on the final URL, whatever built it)."""
    path, base = urlsplit(url).path, bundle.base_path
    segments = [unquote(segment) for segment in path.split("/")]
    under = path == base or path.startswith(f"{base}/")
    if not under or any(segment in DOT_SEGMENTS for segment in segments):
        raise ToolFailure(
            "API_PATH_ESCAPE",
            f"the request path would leave the service's base path {base or '/'!r}",
            details={"basePath": base or "/"},
        )
    return url


def _url(bundle: Bundle, tool: Tool, arguments: Mapping[str, Any]) -> str:
    def slot(match: Any) -> str:
        name = match.group(1)
        return _segment(name, arguments[name])

    url = _contained(bundle, bundle.baseUrl + PATH_SLOT.sub(slot, tool.path))
    query: list[tuple[str, str]] = []
    for param in tool.params:
        if param.in_ != "query" or param.name not in arguments:
            continue
        value = arguments[param.name]
        values = value if isinstance(value, list) else [value]
        query.extend((param.name, _text(param.name, item)) for item in values)
    return f"{url}?{urlencode(query)}" if query else url


def _body(tool: Tool, arguments: Mapping[str, Any]) -> tuple[bytes | None, str | None]:
    names = [p.name for p in tool.params if p.in_ == "body" and p.name in arguments]
    fields = {name: arguments[name] for name in names}
    if tool.method == "GET" or (not fields and tool.method == "DELETE"):
        return None, None
    if tool.body == "form":
        pairs = [(name, _text(name, value)) for name, value in fields.items()]
        return urlencode(pairs).encode(), "application/x-www-form-urlencoded"
    return json.dumps(fields, ensure_ascii=False).encode(), "application/json"


def render(
    bundle: Bundle, tool: Tool, arguments: Mapping[str, Any], secrets: Mapping[str, str]
) -> RenderedRequest:
    """Build the request for ``tool`` from validated ``arguments``."""
    _check_arguments(tool, arguments)
    headers, masked = _headers(bundle, tool, arguments, secrets)
    body, content_type = _body(tool, arguments)
    accept = "application/json" if tool.response.type == "json" else "*/*"
    for target in (headers, masked):
        if not any(key.lower() == "accept" for key in target):
            target["Accept"] = accept
        if content_type is not None:
            target["Content-Type"] = content_type
    return RenderedRequest(tool.method, _url(bundle, tool, arguments), headers, body, masked)
