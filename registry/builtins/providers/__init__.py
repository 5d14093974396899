"""Search providers behind ``builtin.web_search``: one small class per backend.

Every provider talks to exactly one operator-configured endpoint through the API tools'
outbound client (:class:`~doraforge.registry.api_tools.client.ApiClient`): the name is
resolved once, every address vetted, the vetted address dialled, redirects never followed,
the body read up to a cap. The client's outbound policy whitelists that endpoint's host
and port alone (:func:`endpoint_policy`), so a provider can reach nothing else, and
link-local or metadata addresses stay refused. Results are normalised to
``{title, url, snippet}``; their URLs are data for the caller, never fetched here.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from doraforge.registry.api_tools.client import ApiClient
from doraforge.registry.api_tools.outbound import OutboundPolicy
from doraforge.registry.api_tools.render import RenderedRequest
from doraforge.registry.api_tools.response import RawResponse
from doraforge.registry.errors import ToolFailure

#: The most any provider answer is read (bytes); a results page is far smaller.
READ_CAP = 2 * 1024 * 1024
MAX_TITLE = 300
MAX_SNIPPET = 1000
MAX_URL = 2048
USER_AGENT = "doraforge-web_search/1"


@dataclass(frozen=True)
class Hit:
    """One normalised search result."""

    title: str
    url: str
    snippet: str

    def public(self) -> dict[str, str]:
        return {"title": self.title, "url": self.url, "snippet": self.snippet}


class Provider(Protocol):
    """A search backend: its name, the endpoint it calls, and the search itself."""

    name: str
    endpoint: str

    async def search(self, query: str, limit: int) -> list[Hit]:
        """Up to ``limit`` results (at least ``limit + 1`` when more exist, so the caller
        can say ``truncated``); :class:`ToolFailure` when the backend fails."""
        ...


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine (``localhost`` or a loopback address)."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def endpoint_host(endpoint: str) -> str:
    """The lower-case host of an endpoint URL (no port, IPv6 without brackets)."""
    return (urlsplit(endpoint).hostname or "").lower()


def egress_host(endpoint: str) -> str | None:
    """The host the registry's egress gate must allow for ``endpoint``; ``None`` for a
    loopback endpoint, which never leaves the machine (so a local SearXNG works with
    egress off; the outbound guard still vets the address it dials)."""
    host = endpoint_host(endpoint)
    return None if is_loopback(host) else host


def endpoint_policy(endpoint: str) -> OutboundPolicy:
    """An outbound policy that whitelists ``endpoint``'s host and port and nothing else,
    on both network sides (a loopback SearXNG is ``internal``, a public API ``external``)."""
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    shown = f"[{host}]" if ":" in host else host
    rule = f"{shown}:{parts.port}" if parts.port is not None else shown
    return OutboundPolicy(default="deny", internal=[rule], external=[rule])


class Endpoint:
    """One provider endpoint and the guarded client that reaches it."""

    def __init__(self, provider: str, base_url: str, timeout_s: float) -> None:
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.client = ApiClient(endpoint_policy(self.base_url), read_cap=READ_CAP)

    async def send(
        self,
        method: str,
        path_and_query: str,
        *,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
    ) -> RawResponse:
        """The provider's answer to one request; non-2xx, redirects and I/O failures are
        :class:`ToolFailure` ``WEB_SEARCH_PROVIDER_ERROR`` naming the provider."""
        request = RenderedRequest(
            method,
            self.base_url + path_and_query,
            {"User-Agent": USER_AGENT, "Accept-Encoding": "identity", **(headers or {})},
            body,
        )
        try:
            raw = await self.client.send(request, self.timeout_s)
        except httpx.TimeoutException:
            raise self.failure("did not answer in time", retryable=True) from None
        except httpx.HTTPError as exc:
            raise self.failure(f"could not be reached ({type(exc).__name__})", True) from None
        if not 200 <= raw.status < 300:
            retry = raw.status == 429 or raw.status >= 500
            raise self.failure(f"answered HTTP {raw.status}", retry, status=raw.status)
        if raw.capped:
            raise self.failure(f"answered more than {READ_CAP} bytes", False)
        return raw

    def failure(self, what: str, retryable: bool, **details: Any) -> ToolFailure:
        return ToolFailure(
            "WEB_SEARCH_PROVIDER_ERROR",
            f"search provider {self.provider} {what}; retry later or configure another "
            "provider (builtins.web_search.provider)",
            retryable=retryable,
            details={"provider": self.provider, **details},
        )

    def json(self, raw: RawResponse) -> Any:
        """The answer's JSON document; ``WEB_SEARCH_PROVIDER_ERROR`` when it is not one."""
        try:
            return json.loads(raw.body)
        except (ValueError, UnicodeDecodeError):
            raise self.failure("answered something that is not JSON", False) from None


def _text(value: Any, limit: int) -> str:
    return " ".join(value.split())[:limit] if isinstance(value, str) else ""


def hit(title: Any, url: Any, snippet: Any) -> Hit | None:
    """A normalised result, or ``None`` when it has no http(s) URL (such an entry is not a
    web result; its URL is never fetched either way)."""
    link = url.strip() if isinstance(url, str) else ""
    if urlsplit(link).scheme not in ("http", "https") or len(link) > MAX_URL:
        return None
    return Hit(_text(title, MAX_TITLE) or link[:MAX_TITLE], link, _text(snippet, MAX_SNIPPET))


def hits_from(results: Any) -> list[Hit]:
    """Normalised hits of a JSON ``results`` list of ``{title, url, content}`` objects
    (SearXNG and Tavily share that shape); entries of any other shape are skipped."""
    if not isinstance(results, list):
        return []
    found = [
        hit(item.get("title"), item.get("url"), item.get("content"))
        for item in results
        if isinstance(item, dict)
    ]
    return [h for h in found if h is not None]
