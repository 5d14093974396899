"""SearXNG: a self-hosted metasearch instance's JSON API (``/search?format=json``).

The instance must enable the JSON format (``search.formats: [html, json]`` in its
``settings.yml``); otherwise it answers 403, reported as a provider error.
"""

from __future__ import annotations

from urllib.parse import urlencode

from doraforge.registry.builtins.providers import Endpoint, Hit, hits_from


class SearxngProvider:
    """Searches one SearXNG instance at ``base_url``."""

    name = "searxng"

    def __init__(self, base_url: str, timeout_s: float) -> None:
        self._endpoint = Endpoint(self.name, base_url, timeout_s)
        self.endpoint = self._endpoint.base_url

    async def search(self, query: str, limit: int) -> list[Hit]:
        params = urlencode({"q": query, "format": "json", "pageno": 1})
        raw = await self._endpoint.send(
            "GET", f"/search?{params}", headers={"Accept": "application/json"}
        )
        document = self._endpoint.json(raw)
        results = document.get("results") if isinstance(document, dict) else None
        return hits_from(results)[: limit + 1]
