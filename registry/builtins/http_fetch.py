"""``builtin.http_fetch``: one HTTP GET to a host the egress policy allows for the caller.

doraforge's rule is that no tool argument is ever a URL the server will call, while the
spec's ``http_fetch`` fetches what the caller names. Both hold because the arguments are
not a URL but its parts, each judged before anything is dialled: ``host`` (a bare host,
``host:port`` or ``[v6]:port``), ``path``, optional ``query`` pairs and ``scheme``. The
host and the port dialled must be on the operator's egress allowlist for this caller
(checked here, per call, because the entry cannot declare it statically; an entry with a
port admits that port only; a host an API bundle or MCP server declared serves that
source's tools, never this one; refused ``TOOL_EGRESS_DENIED`` like the registry's own
gate, the message naming ``host:port`` and the operator's allow route), and the request goes
through the API tools' outbound client, which resolves the name once, vets every address
against the operator's outbound policy (no link-local or metadata targets in any mode),
dials the vetted address and never follows a redirect.
The URL is assembled by this adapter from those vetted parts, so a model can never smuggle
credentials, another host, or a scheme the tool does not speak.

A redirect answers ``HTTP_FETCH_REDIRECT_REFUSED``; the body is read as a stream up to
``max_bytes`` and cut there (``truncated``); only text and JSON bodies are returned.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol
from urllib.parse import quote, urlencode

import httpx

from doraforge.registry.api_tools.addresses import canonical_host, split_port
from doraforge.registry.api_tools.client import ApiClient
from doraforge.registry.api_tools.errors import OutboundDenied
from doraforge.registry.api_tools.outbound import DEFAULT_PORTS, OutboundPolicy
from doraforge.registry.api_tools.render import RenderedRequest
from doraforge.registry.api_tools.response import RawResponse
from doraforge.registry.builtins.config import HttpFetchSettings, read_policy
from doraforge.registry.errors import ToolFailure
from doraforge.registry.model import CallContext, Principal

NAME = "builtin.http_fetch"
USER_AGENT = "doraforge-http_fetch/1"
#: A name or IPv4 address, or a bracketed IPv6 address, each with an optional port.
_HOST_PATTERN = r"^([A-Za-z0-9.\-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(:[0-9]{1,5})?$"
_TEXT_TYPES = ("application/json", "application/xml", "application/javascript")

ENTRY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "host": {
            "type": "string",
            "pattern": _HOST_PATTERN,
            "description": "The host to fetch from, e.g. 'example.com' or 'example.com:8080'; "
            "it must be on the egress allowlist.",
        },
        "path": {
            "type": "string",
            "pattern": r"^/[^?#\s]*$",
            "maxLength": 2048,
            "description": "The path, starting with '/', without query or fragment.",
        },
        "query": {
            "type": "object",
            "maxProperties": 50,
            "additionalProperties": {"type": ["string", "number", "boolean"]},
            "description": "Query parameters as name/value pairs.",
        },
        "scheme": {"type": "string", "enum": ["https", "http"], "default": "https"},
    },
    "required": ["host", "path"],
    "additionalProperties": False,
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {"type": "integer"},
        "contentType": {"type": "string"},
        "content": {"type": "string"},
        "truncated": {"type": "boolean"},
    },
    "required": ["status", "contentType", "content", "truncated"],
    "additionalProperties": False,
}


class EgressCheck(Protocol):
    """The part of the registry's egress policy (``service.egress``) the adapter asks."""

    def check(self, host: str, principal: Principal | str | None, *, what: str) -> None:
        """Raise ``ToolFailure`` ``TOOL_EGRESS_DENIED`` unless ``principal`` may reach it."""
        ...


def entry(settings: HttpFetchSettings) -> dict[str, Any]:
    """The catalog entry: GET, network permission, high risk (an operator approves)."""
    return {
        "name": NAME,
        "providerName": "http_fetch",
        "description": (
            "Fetch one text or JSON document with HTTP GET from an allowed host: give host, "
            "path and optional query pairs (not a URL). Redirects are refused; bodies over "
            f"{settings.max_bytes} bytes are cut."
        ),
        "input_schema": ENTRY_SCHEMA,
        "output_schema": OUTPUT_SCHEMA,
        "policy": read_policy("high", round(settings.timeout_s * 1000) + 1000, network=True),
    }


def _bad(message: str) -> ToolFailure:
    return ToolFailure("HTTP_FETCH_INVALID_TARGET", f"{message}; give host, path and query parts")


def target(arguments: dict[str, Any]) -> tuple[str, str]:
    """``(host:port, url)``: the canonical host and the port dialled (the scheme's default
    when none is given), which the egress policy judges together, and the URL built from
    the vetted parts (path re-quoted, query encoded)."""
    try:
        name, port = split_port(arguments["host"])
        host = canonical_host(name)
    except (ValueError, OutboundDenied) as exc:
        raise _bad(f"host is not a host name or address ({exc})") from None
    scheme = arguments.get("scheme", "https")
    authority = f"{host}:{port if port is not None else DEFAULT_PORTS[scheme]}"
    netloc = f"{host}:{port}" if port is not None else host  # the Host header as written
    path = quote(arguments["path"], safe="/%:@!$&'()*+,;=-._~")
    query = urlencode({k: _text(v) for k, v in arguments.get("query", {}).items()})
    return authority, f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _content(raw: RawResponse) -> str:
    """The body as text, when it is text or JSON; ``HTTP_FETCH_UNSUPPORTED_TYPE`` otherwise."""
    media, _, params = raw.content_type.partition(";")
    media = media.strip().lower()
    if not (media.startswith("text/") or media in _TEXT_TYPES or media.endswith("+json")):
        raise ToolFailure(
            "HTTP_FETCH_UNSUPPORTED_TYPE",
            f"the answer is {media or 'untyped'}, not text or JSON; fetch a text or JSON URL",
            details={"status": raw.status, "contentType": media},
        )
    charset = "utf-8"
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key.lower() == "charset" and value:
            charset = value.strip("\"'")
    try:
        return raw.body.decode(charset, "replace" if not raw.capped else "ignore")
    except LookupError:
        return raw.body.decode("utf-8", "replace")


class HttpFetch:
    """The adapter: egress check for the caller, then one guarded GET."""

    def __init__(
        self, settings: HttpFetchSettings, policy: OutboundPolicy, egress: EgressCheck
    ) -> None:
        self._settings = settings
        self._client = ApiClient(policy, read_cap=settings.max_bytes)
        self._egress = egress

    async def __call__(self, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
        host, url = target(arguments)
        self._egress.check(host, context.principal, what=NAME)
        raw = await self._get(url)
        if 300 <= raw.status < 400:
            raise ToolFailure(
                "HTTP_FETCH_REDIRECT_REFUSED",
                f"{host} answered a redirect (HTTP {raw.status}); redirects are not followed, "
                "fetch the final location directly",
                details={"status": raw.status},
            )
        return {
            "status": raw.status,
            "contentType": raw.content_type,
            "content": _content(raw),
            "truncated": raw.capped,
        }

    async def _get(self, url: str) -> RawResponse:
        timeout = self._settings.timeout_s
        headers = {
            "User-Agent": USER_AGENT,
            "Accept": "text/*, application/json;q=0.9",
            "Accept-Encoding": "identity",
        }
        try:
            async with asyncio.timeout(timeout):
                return await self._client.send(RenderedRequest("GET", url, headers, None), timeout)
        except (TimeoutError, httpx.TimeoutException):
            raise ToolFailure(
                "HTTP_FETCH_TIMEOUT",
                f"no complete answer within {timeout:g} s; retry or raise http_fetch.timeout_s",
                retryable=True,
            ) from None
        except httpx.HTTPError as exc:
            raise ToolFailure(
                "HTTP_FETCH_IO_ERROR",
                f"the request failed ({type(exc).__name__}); check the host and retry",
                retryable=True,
            ) from None
