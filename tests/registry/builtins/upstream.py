"""A real local HTTP upstream (Starlette under uvicorn on 127.0.0.1, port 0) that answers in
each search provider's documented response format, plus the pages ``http_fetch`` tests
read: text, JSON, a redirect, an oversize stream, a slow answer and a binary body.

Every request it receives is recorded (method, path, query, headers, body), so a test can
assert what a provider really sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.live_server import LiveServer

#: DuckDuckGo's HTML results page markup (``html.duckduckgo.com/html/``): an ad first, then
#: organic results whose links go through the ``/l/?uddg=`` redirect.
DDG_RESULT = """
<div class="result results_links results_links_deep web-result ">
  <div class="links_main links_deep result__body">
    <h2 class="result__title">
      <a rel="nofollow" class="result__a"
         href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample{n}.org%2Fpage%3Fa%3D1&amp;rut=x{n}">
         Result <b>{n}</b> &amp; more</a>
    </h2>
    <div class="result__extras"><a class="result__url" href="https://example{n}.org">
      example{n}.org</a></div>
    <a class="result__snippet" href="//duckduckgo.com/l/?uddg=x">Snippet <b>{n}</b><br>
      about robots.</a>
  </div>
</div>"""
DDG_AD = """
<div class="result results_links results_links_deep result--ad ">
  <div class="links_main links_deep result__body">
    <h2 class="result__title"><a rel="nofollow" class="result__a"
      href="https://duckduckgo.com/y.js?ad_provider=x&amp;u3=https%3A%2F%2Fads.example">
      Sponsored</a></h2>
    <a class="result__snippet" href="https://duckduckgo.com/y.js?x">Buy things</a>
  </div>
</div>"""


def ddg_page(count: int) -> str:
    results = "".join(DDG_RESULT.format(n=n) for n in range(1, count + 1))
    return (
        "<!DOCTYPE html><html><head><title>q at DuckDuckGo</title></head><body>"
        f'<div id="links" class="results">{DDG_AD}{results}</div></body></html>'
    )


def json_results(count: int, prefix: str) -> list[dict[str, Any]]:
    return [
        {
            "title": f"{prefix} result {n}",
            "url": f"https://{prefix}{n}.example/doc",
            "content": f"{prefix} snippet {n}",
            "score": 1 / n,
            "engine": "test",
        }
        for n in range(1, count + 1)
    ]


BIG_BYTES = 3 * 1024 * 1024


@dataclass
class Upstream:
    """What the upstream serves and what it saw."""

    results: int = 15
    seen: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    port: int = 0

    async def _record(self, request: Request) -> None:
        body = await request.body()
        self.seen.append(
            {
                "method": request.method,
                "path": request.url.path,
                "query": dict(request.query_params),
                "headers": {k.lower(): v for k, v in request.headers.items()},
                "body": body.decode() if body else None,
            }
        )

    async def ddg(self, request: Request) -> Response:
        await self._record(request)
        return HTMLResponse(ddg_page(self.results))

    async def searxng(self, request: Request) -> Response:
        await self._record(request)
        if request.query_params.get("format") != "json":
            return Response("format not allowed", status_code=403)
        query = request.query_params.get("q", "")
        return JSONResponse(
            {
                "query": query,
                "number_of_results": self.results,
                "results": json_results(self.results, "searx"),
                "answers": [],
                "suggestions": [],
                "unresponsive_engines": [],
            }
        )

    async def tavily(self, request: Request) -> Response:
        await self._record(request)
        if request.headers.get("authorization") != "Bearer tvly-test-key":
            return JSONResponse({"detail": {"error": "Unauthorized"}}, status_code=401)
        asked = json.loads(await request.body())
        count = min(int(asked.get("max_results", 5)), self.results)
        return JSONResponse(
            {
                "query": asked["query"],
                "answer": None,
                "images": [],
                "results": json_results(count, "tavily"),
                "response_time": 0.5,
            }
        )

    async def text(self, request: Request) -> Response:
        await self._record(request)
        return Response("héllo from upstream", media_type="text/plain; charset=utf-8")

    async def document(self, request: Request) -> Response:
        await self._record(request)
        return JSONResponse({"query": dict(request.query_params)})

    async def redirect(self, request: Request) -> Response:
        await self._record(request)
        return Response(status_code=302, headers={"Location": "http://169.254.169.254/"})

    async def big(self, request: Request) -> Response:
        await self._record(request)

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(BIG_BYTES // 65536):
                yield b"a" * 65536

        return StreamingResponse(chunks(), media_type="text/plain")

    async def slow(self, request: Request) -> Response:
        await self._record(request)
        await asyncio.sleep(30)  # the upstream's behaviour under test: it never answers in time
        return Response("late", media_type="text/plain")

    async def binary(self, request: Request) -> Response:
        await self._record(request)
        return Response(b"\x89PNG\r\n\x1a\n", media_type="image/png")

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/html/", self.ddg),
                Route("/search", self.searxng, methods=["GET"]),
                Route("/tavily/search", self.tavily, methods=["POST"]),
                Route("/text", self.text),
                Route("/doc.json", self.document),
                Route("/redirect", self.redirect),
                Route("/big", self.big),
                Route("/slow", self.slow),
                Route("/binary", self.binary),
            ]
        )


@contextmanager
def upstream(results: int = 15) -> Iterator[Upstream]:
    """An :class:`Upstream` listening on a free loopback port for the block."""
    served = Upstream(results=results)
    config = uvicorn.Config(
        served.app(), host="127.0.0.1", port=0, log_level="warning", lifespan="off"
    )
    config.timeout_graceful_shutdown = 1
    with LiveServer(config) as server:
        served.url, served.port = server.url, server.port
        yield served
