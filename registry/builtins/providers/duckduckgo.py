"""DuckDuckGo: the key-free HTML results page (``https://html.duckduckgo.com/html/``).

The page is parsed with the standard library's tolerant HTML parser, keyed on the result
classes the page has used for years: each result's link is an ``a.result__a`` (its text
the title, its ``href`` a ``//duckduckgo.com/l/?uddg=<target>`` redirect or the target
itself), its snippet the following ``.result__snippet``. Results inside an ad container
(``result--ad``) or pointing at DuckDuckGo's ad redirect (``/y.js``) are skipped. Markup
that matches none of this yields no results, never an error.
"""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import parse_qs, urlencode, urlsplit

from doraforge.registry.builtins.providers import Endpoint, Hit, hit

DEFAULT_BASE_URL = "https://html.duckduckgo.com"
#: Elements without an end tag: they never open a level inside a captured element.
VOID = frozenset({"area", "br", "col", "embed", "hr", "img", "input", "link", "meta", "wbr"})


def target_of(href: str) -> str:
    """The destination of a result link: the ``uddg`` parameter of DuckDuckGo's redirect
    link, else the link itself (protocol-relative links made ``https``)."""
    link = "https:" + href if href.startswith("//") else href
    parts = urlsplit(link)
    if parts.hostname and parts.hostname.endswith("duckduckgo.com") and parts.path == "/l/":
        return parse_qs(parts.query).get("uddg", [""])[0]
    return link


def _is_ad_link(href: str) -> bool:
    parts = urlsplit("https:" + href if href.startswith("//") else href)
    return bool(parts.hostname and parts.hostname.endswith("duckduckgo.com")) and (
        parts.path == "/y.js"
    )


class ResultsParser(HTMLParser):
    """Collects ``(title, href, snippet)`` from a DuckDuckGo HTML results page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.results: list[list[str]] = []  # [title, href, snippet]
        self._ads: list[bool] = []  # one per open div: whether it is an ad container
        self._capture: tuple[str, int] | None = None  # ("title"|"snippet", result index)
        self._depth = 0  # tags open inside the captured element
        self._buffer: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = set((dict(attrs).get("class") or "").split())
        if tag == "div":
            self._ads.append("result--ad" in classes)
        if self._capture is not None:
            self._depth += tag not in VOID
            return
        if any(self._ads):
            return
        href = dict(attrs).get("href") or ""
        if tag == "a" and "result__a" in classes and not _is_ad_link(href):
            self.results.append(["", href, ""])
            self._start("title")
        elif "result__snippet" in classes and self.results and not self.results[-1][2]:
            self._start("snippet")

    def _start(self, kind: str) -> None:
        self._capture, self._depth, self._buffer = (kind, len(self.results) - 1), 0, []

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._ads:
            self._ads.pop()
        if self._capture is None or tag in VOID:
            return
        if self._depth:
            self._depth -= 1
            return
        kind, index = self._capture
        self.results[index][0 if kind == "title" else 2] = "".join(self._buffer)
        self._capture = None

    def handle_data(self, data: str) -> None:
        if self._capture is not None:
            self._buffer.append(data)


def parse_results(page: str) -> list[Hit]:
    """The organic results of a results page, in page order."""
    parser = ResultsParser()
    parser.feed(page)
    parser.close()
    found = [hit(title, target_of(href), snippet) for title, href, snippet in parser.results]
    return [h for h in found if h is not None]


class DuckDuckGoProvider:
    """Searches DuckDuckGo's HTML endpoint (``base_url`` only to point at a mirror or a
    test server standing in for it)."""

    name = "duckduckgo"

    def __init__(self, timeout_s: float, base_url: str | None = None) -> None:
        self._endpoint = Endpoint(self.name, base_url or DEFAULT_BASE_URL, timeout_s)
        self.endpoint = self._endpoint.base_url

    async def search(self, query: str, limit: int) -> list[Hit]:
        raw = await self._endpoint.send(
            "GET", "/html/?" + urlencode({"q": query}), headers={"Accept": "text/html"}
        )
        page = raw.body.decode("utf-8", "replace")
        return parse_results(page)[: limit + 1]
