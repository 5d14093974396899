"""The versioned JSON service bundle (``schemaVersion: 1``) and its strict validation.

A bundle is refused at save, not at its first call, when its ``baseUrl`` could be read two
ways: whitespace or control characters anywhere, a port outside 1-65535 or not numeric, or
a host not in canonical form (octal, hex, zero-padded or short IPv4, IPv4 inside an IPv6
form, a trailing dot). Upper case in the host is folded to lower case, so the saved
``baseUrl`` carries the one spelling that outbound rules and the egress allowlist compare.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Literal
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from doraforge.registry.api_tools.addresses import canonical_host, split_port
from doraforge.registry.api_tools.errors import NotFound, OutboundDenied, Unprocessable

SECRET_SLOT = re.compile(r"\{\{secret:([A-Za-z_][A-Za-z0-9_]*)\}\}")
PATH_SLOT = re.compile(r"\{([^{}]*)\}")
#: Path segments a dialler or server resolves upward or away: never sent.
DOT_SEGMENTS = frozenset({".", ".."})
_IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"
_SNAKE = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$"
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

Scalar = str | int | float | bool


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class Param(_Strict):
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]*$", max_length=64)
    in_: Literal["path", "query", "header", "body"] = Field(alias="in")
    required: bool = False
    schema_: dict[str, Any] = Field(default_factory=lambda: {"type": "string"}, alias="schema")
    description: str | None = None

    @model_validator(mode="after")
    def _header_name(self) -> Param:
        if self.in_ == "header" and not _HEADER_NAME.match(self.name):
            raise ValueError(f"header param name {self.name!r} is not a valid header name")
        return self


class Envelope(_Strict):
    codeField: str | None = Field(default=None, min_length=1)
    success: list[Scalar] = Field(default_factory=list)
    payloadField: str | None = Field(default=None, min_length=1)
    errorFields: list[str] = Field(default_factory=list)
    treatBodyOnNon2xx: bool = False

    @model_validator(mode="after")
    def _code_needs_success(self) -> Envelope:
        if self.codeField and not self.success:
            raise ValueError("success must list at least one value when codeField is set")
        return self


class Response(_Strict):
    type: Literal["json", "text"] = "json"
    envelope: Envelope | None = None

    @model_validator(mode="after")
    def _envelope_needs_json(self) -> Response:
        if self.envelope is not None and self.type != "json":
            raise ValueError("envelope is only allowed with type 'json'")
        return self


class Tool(_Strict):
    name: str = Field(pattern=_SNAKE, max_length=48)
    description: str = Field(min_length=1, max_length=2000)
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "GET"
    path: str = Field(pattern=r"^/", max_length=2000)
    params: list[Param] = Field(default_factory=list)
    body: Literal["json", "form"] = "json"
    timeoutMs: int = Field(default=30_000, ge=100, le=120_000)
    maxResultChars: int = Field(default=10_000, ge=100, le=1_000_000)
    response: Response = Field(default_factory=Response)

    @field_validator("path")
    @classmethod
    def _no_secret_in_path(cls, path: str) -> str:
        if "{{" in path or "?" in path or "#" in path:
            raise ValueError("path may hold only {param} slots (no secrets, query or fragment)")
        if any(unquote(segment) in DOT_SEGMENTS for segment in path.split("/")):
            raise ValueError("path may not hold '.' or '..' segments (it stays under baseUrl)")
        return path

    @model_validator(mode="after")
    def _params_consistent(self) -> Tool:
        names = [p.name for p in self.params]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate param names: {dupes}")
        path_params = {p.name for p in self.params if p.in_ == "path"}
        slots = PATH_SLOT.findall(self.path)
        undeclared = [s for s in slots if s not in path_params]
        if undeclared:
            raise ValueError(f"path slots {undeclared} are not declared as 'path' params")
        unused = sorted(path_params - set(slots))
        if unused:
            raise ValueError(f"path params {unused} have no slot in path")
        if any(p.in_ == "path" and not p.required for p in self.params):
            raise ValueError("path params must be required")
        if self.method == "GET" and any(p.in_ == "body" for p in self.params):
            raise ValueError("GET tools cannot declare body params")
        return self


class Bundle(_Strict):
    schemaVersion: Literal[1]
    name: str = Field(pattern=_SNAKE, max_length=48)
    description: str | None = None
    baseUrl: str = Field(max_length=2000)
    headers: dict[str, str] = Field(default_factory=dict)
    credentials: list[str] = Field(default_factory=list)
    tools: list[Tool] = Field(min_length=1, max_length=200)

    @field_validator("baseUrl")
    @classmethod
    def _base_url(cls, url: str) -> str:
        # urlsplit silently drops TAB, CR and LF, so a URL holding them would be checked in
        # one spelling and stored (and later sent) in another.
        if any(unicodedata.category(ch)[0] in "CZ" for ch in url):
            raise ValueError("must not contain whitespace or control characters")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an absolute http or https URL with a host")
        if parts.username or parts.password or parts.query or parts.fragment or "{" in url:
            raise ValueError("must not carry credentials, query, fragment or template slots")
        if any(unquote(segment) in DOT_SEGMENTS for segment in parts.path.split("/")):
            raise ValueError("must not hold '.' or '..' path segments")
        return urlunsplit((parts.scheme, _canonical_netloc(parts), parts.path, "", "")).rstrip("/")

    @field_validator("credentials")
    @classmethod
    def _credential_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not re.match(_IDENT, name):
                raise ValueError(f"credential name {name!r} is not an identifier")
        return names

    @model_validator(mode="after")
    def _headers_and_tools(self) -> Bundle:
        for key, value in self.headers.items():
            if key.lower() == "host":
                raise ValueError("headers.Host: the Host header comes from baseUrl")
            if not _HEADER_NAME.match(key) or "\r" in value or "\n" in value:
                raise ValueError(f"headers.{key}: invalid header name or value")
            for ref in SECRET_SLOT.findall(value):
                if ref not in self.credentials:
                    raise ValueError(f"headers.{key}: secret {ref!r} is not in credentials")
        lowered = {k.lower() for k in self.headers}
        names = [t.name for t in self.tools]
        for tool in self.tools:
            if names.count(tool.name) > 1:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            for param in tool.params:
                if param.in_ == "header" and param.name.lower() in lowered | {"host"}:
                    raise ValueError(
                        f"tool {tool.name!r}: header param {param.name!r} shadows a bundle header"
                    )
        return self

    @property
    def host(self) -> str:
        """The canonical host (IPv6 without brackets)."""
        return urlsplit(self.baseUrl).hostname or ""

    @property
    def scheme(self) -> Literal["http", "https"]:
        return "https" if urlsplit(self.baseUrl).scheme == "https" else "http"

    @property
    def port(self) -> int:
        """The port dialled: the explicit one, else the scheme's default."""
        return urlsplit(self.baseUrl).port or (443 if self.scheme == "https" else 80)

    @property
    def authority(self) -> str:
        """``host:port`` as the egress policy spells it (the port always written, IPv6 in
        brackets): the one host and port this bundle's tools reach."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def origin(self) -> str:
        """``scheme://host:port``: what the bundle declares to the egress policy."""
        return f"{self.scheme}://{self.authority}"

    @property
    def base_path(self) -> str:
        """The ``baseUrl``'s path (``""`` for none), which no call may climb out of."""
        return urlsplit(self.baseUrl).path

    def tool(self, name: str) -> Tool:
        for tool in self.tools:
            if tool.name == name:
                return tool
        raise NotFound("API_TOOL_NOT_FOUND", f"service {self.name!r} has no tool {name!r}")


def _canonical_netloc(parts: SplitResult) -> str:
    """``host[:port]`` in canonical form; ``ValueError`` for a bad port or host spelling."""
    host, port = split_port(parts.netloc)
    try:
        host = canonical_host(host)
    except OutboundDenied as exc:
        raise ValueError(exc.message) from None
    return host if port is None else f"{host}:{port}"


def _field(loc: tuple[Any, ...]) -> str:
    """A field path as a reader writes it: ``tools[0].params[1].in``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "<root>"


def compact_errors(error: Unprocessable) -> list[str]:
    """A validation refusal as short ``field: message`` lines, the form an assistant fixes
    verbatim (``tools[0].path: String should match pattern '^/'``)."""
    errors = error.details.get("errors") if isinstance(error.details, dict) else None
    if not isinstance(errors, list):
        return [error.message]
    return [f"{e['field']}: {e['message']}" for e in errors]


def parse_bundle(data: Any) -> Bundle:
    """Validate a bundle document; errors name each failing field."""
    try:
        return Bundle.model_validate(data)
    except ValidationError as exc:
        errors = [{"field": _field(e["loc"]), "message": e["msg"]} for e in exc.errors()]
        summary = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:5])
        raise Unprocessable(
            "API_BUNDLE_INVALID",
            f"invalid API bundle: {summary}",
            details={"errors": errors},
        ) from None
