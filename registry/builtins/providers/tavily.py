"""Tavily: the hosted search API (``POST /search`` with a JSON body, bearer API key).

The key is read from the credential store (or the server's secrets) by name on every
call, so a rotated key applies at once; it is sent only in the ``Authorization`` header
and never appears in a result, an error or a log line.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from doraforge.registry.builtins.providers import Endpoint, Hit, hits_from
from doraforge.registry.errors import ToolFailure

DEFAULT_BASE_URL = "https://api.tavily.com"


class TavilyProvider:
    """Searches Tavily with the key ``api_key()`` returns (``None``: no longer stored)."""

    name = "tavily"

    def __init__(
        self, api_key: Callable[[], str | None], timeout_s: float, base_url: str | None = None
    ) -> None:
        self._endpoint = Endpoint(self.name, base_url or DEFAULT_BASE_URL, timeout_s)
        self.endpoint = self._endpoint.base_url
        self._api_key = api_key

    async def search(self, query: str, limit: int) -> list[Hit]:
        key = self._api_key()
        if not key:
            raise ToolFailure(
                "WEB_SEARCH_CREDENTIAL_MISSING",
                "the Tavily API key credential is no longer stored; store it again "
                "(builtins.web_search.api_key_credential)",
            )
        body = json.dumps({"query": query, "max_results": limit + 1, "search_depth": "basic"})
        raw = await self._endpoint.send(
            "POST",
            "/search",
            headers={
                "Authorization": f"Bearer {key}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
            body=body.encode(),
        )
        document = self._endpoint.json(raw)
        results = document.get("results") if isinstance(document, dict) else None
        return hits_from(results)[: limit + 1]
