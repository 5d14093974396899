"""``builtin.web_search``: a web search behind the configured provider.

Arguments are ``query`` (required) and ``max_results`` (optional; the registry's repair
clamps anything above 10 to 10, the default comes from the settings). Any other argument a
model invents is dropped by the registry before validation (the policy's
``ignoreUnknownArguments``; the one-argument rename repair still runs first, so ``q``
becomes ``query``). The entry's ``egressHosts`` is the active provider's host, so the
registry's egress gate judges the host actually contacted; a loopback endpoint (a local
SearXNG) declares none, since it never leaves the machine.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from doraforge.registry.builtins.config import MAX_RESULTS_CAP, WebSearchSettings, read_policy
from doraforge.registry.builtins.providers import Provider, egress_host
from doraforge.registry.builtins.providers.duckduckgo import DuckDuckGoProvider
from doraforge.registry.builtins.providers.searxng import SearxngProvider
from doraforge.registry.builtins.providers.tavily import TavilyProvider

NAME = "builtin.web_search"
MAX_QUERY_CHARS = 400

log = logging.getLogger("doraforge.registry.builtins")

type Secret = Callable[[str], str | None]


def choose_provider(settings: WebSearchSettings, secret: Secret) -> Provider:
    """The configured provider, or DuckDuckGo (with one warning) when a setting it needs
    is missing: SearXNG's ``base_url``, Tavily's stored API key."""
    timeout = settings.timeout_s
    if settings.provider == "searxng":
        if settings.base_url is not None:
            return SearxngProvider(settings.base_url, timeout)
        missing = "builtins.web_search.base_url"
    elif settings.provider == "tavily":
        name = settings.api_key_credential
        if name is not None and secret(name):
            return TavilyProvider(lambda: secret(name), timeout, settings.base_url)
        missing = f"the credential {name!r}" if name else "builtins.web_search.api_key_credential"
    else:
        return DuckDuckGoProvider(timeout, settings.base_url)
    log.warning(
        "WEB_SEARCH_PROVIDER_FALLBACK: web_search provider %s needs %s; using duckduckgo "
        "instead (set it and restart to use %s)",
        settings.provider,
        missing,
        settings.provider,
    )
    return DuckDuckGoProvider(timeout)


def entry(provider: Provider) -> dict[str, Any]:
    """The catalog entry for ``provider``: its egress host, network permission, medium risk."""
    host = egress_host(provider.endpoint)
    return {
        "name": NAME,
        "providerName": "web_search",
        "description": (
            "Search the web and return result titles, URLs and snippets "
            f"(provider: {provider.name}). Arguments: query (required), max_results "
            f"(optional, at most {MAX_RESULTS_CAP}). Result URLs are not fetched."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_QUERY_CHARS,
                    "pattern": r"\S",
                },
                "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS_CAP},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        "output_schema": OUTPUT_SCHEMA,
        "policy": read_policy(
            "medium",
            30_000,
            network=True,
            egressHosts=[host] if host else [],
            ignoreUnknownArguments=True,
        ),
    }


_HIT = {
    "type": "object",
    "properties": {key: {"type": "string"} for key in ("title", "url", "snippet")},
    "required": ["title", "url", "snippet"],
    "additionalProperties": False,
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "results": {"type": "array", "items": _HIT, "maxItems": MAX_RESULTS_CAP},
        "provider": {"type": "string"},
        "truncated": {"type": "boolean"},
    },
    "required": ["results", "provider", "truncated"],
    "additionalProperties": False,
}


def adapter(provider: Provider, default_results: int) -> Callable[[dict[str, Any]], Any]:
    """The tool's adapter: the count capped, results normalised
    (``truncated`` when the provider had more than were returned)."""

    async def search(arguments: dict[str, Any]) -> dict[str, Any]:
        query: str = arguments["query"].strip()
        limit = min(int(arguments.get("max_results", default_results)), MAX_RESULTS_CAP)
        hits = await provider.search(query, limit)
        return {
            "results": [h.public() for h in hits[:limit]],
            "provider": provider.name,
            "truncated": len(hits) > limit,
        }

    return search
