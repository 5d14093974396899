"""Execute a rendered request against the vetted address, never following redirects."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from doraforge.registry.api_tools.bundle import Bundle, Tool
from doraforge.registry.api_tools.errors import ToolFailure
from doraforge.registry.api_tools.outbound import DEFAULT_PORTS, OutboundPolicy, Resolver, Scheme
from doraforge.registry.api_tools.render import RenderedRequest, render
from doraforge.registry.api_tools.response import RAW_READ_CAP, RawResponse, interpret

REDACTED = "[REDACTED]"


def redact(value: Any, secrets: Mapping[str, str]) -> Any:
    """Replace every secret value inside strings (recursively) with a marker."""
    if isinstance(value, str):
        for secret in sorted((s for s in secrets.values() if s), key=len, reverse=True):
            value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {key: redact(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [redact(item, secrets) for item in value]
    return value


def _pinned(
    request: RenderedRequest, address: str
) -> tuple[httpx.URL, dict[str, str], dict[str, str]]:
    parts = urlsplit(request.url)
    host = parts.hostname or ""
    url = httpx.URL(request.url).copy_with(host=address)
    headers = {"Host": parts.netloc.rsplit("@", 1)[-1], **request.headers}
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    return url, headers, extensions


async def _read_capped(response: httpx.Response, cap: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            return b"".join(chunks)[:cap], True
    return b"".join(chunks), False


class ApiClient:
    """Vets each target with the outbound policy and dials the vetted address."""

    def __init__(
        self,
        policy: OutboundPolicy,
        *,
        resolver: Resolver | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        read_cap: int = RAW_READ_CAP,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.policy, self.resolver = policy, resolver
        self.transport, self.read_cap, self.verify = transport, read_cap, verify

    async def send(self, request: RenderedRequest, timeout_s: float) -> RawResponse:
        """Vet the target (host and port) and send; raises :class:`OutboundDenied` when the
        policy refuses it and ``ValueError`` for a URL with no usable host or port."""
        parts = urlsplit(request.url)
        scheme: Scheme = "https" if parts.scheme == "https" else "http"
        port = parts.port or DEFAULT_PORTS[scheme]
        address = await self.policy.vet(parts.hostname or "", port, self.resolver, scheme=scheme)
        url, headers, extensions = _pinned(request, str(address))
        async with httpx.AsyncClient(
            transport=self.transport,
            verify=self.verify,
            follow_redirects=False,
            trust_env=False,
            timeout=timeout_s,
        ) as client:
            built = client.build_request(
                request.method, url, headers=headers, content=request.body, extensions=extensions
            )
            response = await client.send(built, stream=True)
            try:
                body, capped = await _read_capped(response, self.read_cap)
            finally:
                await response.aclose()
        content_type = response.headers.get("content-type", "")
        return RawResponse(response.status_code, content_type, body, capped)


async def execute(
    bundle: Bundle,
    tool: Tool,
    arguments: Mapping[str, Any],
    *,
    secrets: Mapping[str, str],
    client: ApiClient,
) -> dict[str, Any]:
    """Run one tool call; the result and every error are secret-redacted."""
    started = time.monotonic()
    try:
        request = render(bundle, tool, arguments, secrets)
        async with asyncio.timeout(tool.timeoutMs / 1000):
            raw = await client.send(request, tool.timeoutMs / 1000)
        result: dict[str, Any] = redact(interpret(tool, raw), secrets)  # same shape, redacted
        return result
    except ToolFailure as failure:
        raise _redacted(failure, secrets) from None
    except (TimeoutError, httpx.TimeoutException):
        raise _io_failure("API_TIMEOUT", "timed out", started) from None
    except httpx.HTTPError as exc:
        message = redact(f"{type(exc).__name__}: {exc}", secrets)
        raise _io_failure("API_IO_ERROR", message, started) from None
    except (httpx.InvalidURL, ValueError) as exc:
        # A target no saved bundle can produce (bundles are validated at save); still a
        # tool error naming the kind of fault, never a crash or an echo of internals.
        raise ToolFailure(
            "API_REQUEST_INVALID",
            f"the request could not be sent to this target ({type(exc).__name__})",
        ) from None


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def _io_failure(code: str, what: str, started: float) -> ToolFailure:
    elapsed = _elapsed_ms(started)
    return ToolFailure(
        code, f"request {what} after {elapsed} ms", retryable=True, details={"durationMs": elapsed}
    )


def _redacted(failure: ToolFailure, secrets: Mapping[str, str]) -> ToolFailure:
    return type(failure)(
        failure.code,
        redact(failure.message, secrets),
        retryable=failure.retryable,
        details=redact(dict(failure.details), secrets),
    )
