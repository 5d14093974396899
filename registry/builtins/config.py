"""The ``builtins`` section of the server settings, validated strictly here.

``ServerSettings.builtins`` is a raw mapping the settings module leaves to its owner; this
model is that owner's closed schema::

    builtins:
      enabled: [calculator, http_fetch, web_search]   # default: all three
      web_search:
        provider: duckduckgo | searxng | tavily        # default duckduckgo
        base_url: http://127.0.0.1:8888                # searxng: required
        max_results: 5                                 # default result count (1-10)
        api_key_credential: TAVILY_KEY                 # tavily: the credential's name
        timeout_s: 10
      http_fetch:
        timeout_s: 10
        max_bytes: 1048576
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from doraforge.registry.settings import SettingsError

type Builtin = Literal["calculator", "http_fetch", "web_search"]
type ProviderName = Literal["duckduckgo", "searxng", "tavily"]
ALL_BUILTINS: tuple[Builtin, ...] = ("calculator", "http_fetch", "web_search")
#: The capability a caller needs to see and call any built-in (``--grant builtin.read``):
#: like every other tool source, a server that grants nothing exposes none of them.
CAPABILITY = "builtin.read"
#: The most results any web_search call returns, whatever it asks for.
MAX_RESULTS_CAP = 10
#: The permission every built-in that opens a connection declares.
NETWORK = {"type": "network", "scope": "*"}


def read_policy(risk: str, timeout_ms: int, *, network: bool, **extra: Any) -> dict[str, Any]:
    """A built-in's policy: an idempotent read in the agent and ui scopes behind
    :data:`CAPABILITY`; with ``network`` it also needs :data:`NETWORK`."""
    return {
        "scopes": ["agent", "ui"],
        "requiredCapabilities": [CAPABILITY],
        "sideEffect": "read",
        "idempotent": True,
        "risk": risk,
        "permissions": [NETWORK] if network else [],
        "timeoutMs": timeout_ms,
        **extra,
    }


_CREDENTIAL_NAME = r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$"
_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)


class WebSearchSettings(BaseModel):
    """Which provider ``web_search`` uses and how. ``base_url`` is the SearXNG instance;
    for DuckDuckGo and Tavily it replaces their public endpoint (a mirror, or a local
    server standing in for it in tests), never a tool argument."""

    model_config = _STRICT

    provider: ProviderName = "duckduckgo"
    base_url: str | None = Field(default=None, max_length=2048)
    max_results: int = Field(5, ge=1, le=MAX_RESULTS_CAP)
    api_key_credential: str | None = Field(default=None, pattern=_CREDENTIAL_NAME)
    timeout_s: float = Field(10.0, gt=0, le=60)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        """An http(s) URL with a host and nothing after its path: results pages and API
        routes are appended to it."""
        if url is None:
            return None
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base_url must be an http:// or https:// URL with a host")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError("base_url takes no query, fragment or credentials")
        try:
            parts.port  # noqa: B018 - parsing the port is the check
        except ValueError:
            raise ValueError("base_url has an invalid port") from None
        return url.rstrip("/")


class HttpFetchSettings(BaseModel):
    """``http_fetch``'s limits: the whole request's time and the body bytes read."""

    model_config = _STRICT

    timeout_s: float = Field(10.0, gt=0, le=60)
    max_bytes: int = Field(1_048_576, ge=1024, le=8 * 1_048_576)


class BuiltinsSettings(BaseModel):
    """Which built-in tools are registered, and their settings."""

    model_config = _STRICT

    enabled: list[Builtin] = Field(default_factory=lambda: list(ALL_BUILTINS))
    web_search: WebSearchSettings = Field(default_factory=WebSearchSettings)
    http_fetch: HttpFetchSettings = Field(default_factory=HttpFetchSettings)

    @field_validator("enabled")
    @classmethod
    def _unique(cls, enabled: list[Builtin]) -> list[Builtin]:
        if len(set(enabled)) != len(enabled):
            raise ValueError("enabled names a built-in twice")
        return enabled

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> BuiltinsSettings:
        """The section from the settings' raw mapping; :class:`SettingsError` naming the
        first bad field (``builtins.web_search.provider: ...``) otherwise."""
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in ("builtins", *error["loc"]))
            raise SettingsError(
                f"BUILTINS_INVALID: {where}: {error['msg']}; fix the builtins section of the "
                "config file"
            ) from None
