"""The console's static shell: ``/console/`` and ``/console/static/*`` from package data.

The pages hold no data, so they load without the bearer token (the operator types it into
the login form once); Host and Origin are still checked by the same transport guard
policy, only its token is dropped. Every other path passes through untouched to the
registry app, whose guard requires the token on every JSON route. Only the files shipped
in ``console/static`` are served (a fixed table read once at start, so no request path
ever reaches the file system), each with a Content-Security-Policy that allows this
origin's scripts, styles, images and fetches and nothing else: no inline script, no other
origin, no framing.
"""

from __future__ import annotations

import dataclasses
from importlib.resources import files
from importlib.resources.abc import Traversable

from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from doraforge.registry.http import render_refusal
from doraforge.wire.guard import TransportGuard, TransportPolicy

PREFIX = "/console"
STATIC = f"{PREFIX}/static/"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
    "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}
_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}


def _walk(folder: Traversable, prefix: str) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for entry in folder.iterdir():
        name = f"{prefix}{entry.name}"
        if entry.is_dir():
            found |= _walk(entry, f"{name}/")
        elif any(name.endswith(suffix) for suffix in _MEDIA_TYPES):
            found[name] = entry.read_bytes()
    return found


def static_files() -> dict[str, bytes]:
    """Every shipped static file by its path below ``console/static`` (``js/app.js``)."""
    return _walk(files("doraforge.console") / "static", "")


def _refusal(status: int, code: str, message: str, headers: dict[str, str]) -> Response:
    error = {"code": code, "message": message, "retryable": False, "details": {}}
    return JSONResponse({"ok": False, "error": error}, status, headers=headers)


def _file_response(name: str, body: bytes) -> Response:
    media = next(t for suffix, t in _MEDIA_TYPES.items() if name.endswith(suffix))
    return Response(body, media_type=media, headers=SECURITY_HEADERS)


class ShellMiddleware:
    """Serves the static shell in front of ``app`` (see the module text); ``policy`` is
    the registry's transport policy, applied here without its token."""

    #: What it serves, for the registry's inventory documents (a middleware is not a route).
    inventory_routes = (
        ("GET", PREFIX, "Redirect to the console"),
        ("GET", f"{PREFIX}/", "The console's page shell"),
        ("GET", f"{STATIC}{{file}}", "A static file of the console"),
    )

    def __init__(self, app: ASGIApp, *, policy: TransportPolicy) -> None:
        self.app = app
        self.files = static_files()
        tokenless = dataclasses.replace(policy, token=None)
        self.shell = TransportGuard(self._serve, policy=tokenless, render=render_refusal)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._is_shell(scope["path"]):
            await self.shell(scope, receive, send)
            return
        await self.app(scope, receive, send)

    @staticmethod
    def _is_shell(path: str) -> bool:
        return path in (PREFIX, f"{PREFIX}/") or path.startswith(STATIC)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._response(scope)(scope, receive, send)

    def _response(self, scope: Scope) -> Response:
        path = scope["path"]
        if scope["method"] not in ("GET", "HEAD"):
            allow = {**SECURITY_HEADERS, "Allow": "GET, HEAD"}
            return _refusal(405, "METHOD_NOT_ALLOWED", "the console's pages are read-only", allow)
        if path == PREFIX:
            return RedirectResponse(f"{PREFIX}/", 308)
        name = "index.html" if path == f"{PREFIX}/" else path.removeprefix(STATIC)
        body = self.files.get(name)
        if body is None:
            return _refusal(404, "NOT_FOUND", "no such console page or file", SECURITY_HEADERS)
        return _file_response(name, body)
