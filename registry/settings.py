"""Settings of the registry server (``doraforge serve``): where it listens and what it grants.

Built once at the entry point from command-line options and an optional config file, read
as strict YAML or (``.json``) strict JSON by :mod:`doraforge.wire`; below that, code takes
a :class:`ServerSettings`. The bearer token itself never lives in the config file, only the
name of the environment variable that holds it.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from doraforge.registry.context.source import Scope
from doraforge.registry.egress import EgressSettings, PrincipalKey
from doraforge.wire import strict_json, strict_yaml
from doraforge.wire.tokens import TokenError, load_token

ROBOT_GRANTS = frozenset({"robot.read", "robot.write"})
#: The context scopes enabled unless the operator names others: what an agent needs to
#: orient itself. Tasks and evidence (what was done, and its records) are opt-in.
DEFAULT_CONTEXT_SCOPES: frozenset[Scope] = frozenset({"navigation", "skills", "tools", "runtime"})
type ContextProfile = Literal["metadata", "summaries"]
type TaskSlots = Literal["global", "per_runtime"]
_GRANT_PATTERN = r"^[a-z][A-Za-z0-9_.-]{0,63}$"
_PERMISSION_TYPE = r"[a-z][a-z0-9_.-]{0,63}"
_PERMISSION_SCOPE = r"[!-~]{1,200}"


class SettingsError(ValueError):
    """A config file or option that cannot be used; the message names the field."""


class ServerSettings(BaseModel):
    """What the server listens on, which capabilities it grants, and its result budgets.

    ``outbound`` is the API-tools outbound policy (deny by default) and ``secrets`` the
    credential values API-tool bundles reference by name (read from the environment).
    ``grants`` are the capabilities every caller of this server holds (both default off).
    The MCP endpoint is off until ``mcp_enabled`` is set (``--mcp`` or the config file);
    the agent manifest stays readable either way.
    ``approvals`` are tool names approved for high/critical risk; ``"*"`` approves every
    registered tool (standing rules for unattended runs). Any other high-risk call waits
    at most ``approval_timeout_s`` for an operator's decision, then is denied
    ``TOOL_APPROVAL_TIMEOUT``; ``0`` denies it ``TOOL_APPROVAL_REQUIRED`` without asking.
    ``token`` (when set) is required on every route, reads included.
    ``operator_token`` (which needs ``token`` and must differ from it) is the operator's
    own credential: with it set, deciding approvals and the console's routes need it, and
    the agent token there is refused ``OPERATOR_REQUIRED``; it is accepted everywhere else.
    ``context_profile`` is the context tools' disclosure profile (``metadata`` unless the
    operator opts in to redacted ``summaries``) and ``context_scopes`` the scopes they read.
    ``server_names`` and ``allowed_origins`` widen the transport guard's Host and Origin
    checks; ``insecure`` lets a non-loopback bind run without a token (lab networks only).
    ``egress`` is the operator's part of the egress policy at start (``registry.egress``:
    off by default, an allowlist, ``allow_any``, per-principal overlays);
    ``permissions`` the ``(type, scope)`` permissions each principal holds, written
    ``"type:scope"`` in the file (``network:*``; a ``*`` scope covers any).
    ``task_slots`` sets the PAOS home's task slots at start (``paos.store.slots``):
    ``global``, one non-terminal AgentTask in the home (the spec's rule and a new home's
    default), or ``per_runtime``, one per running skill (cell), so an agent can drive
    several cells at once; ``None`` leaves the home's setting as it is.
    ``task_idle_timeout_s`` is how long an agent's task may go without a call before the
    next start (or the next ``forge_task_create``) cancels it ``idle_timeout``
    (:mod:`registry.task_owner`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    grants: frozenset[str] = frozenset()
    approvals: frozenset[str] = frozenset()
    approval_timeout_s: float = Field(120.0, ge=0, le=3600, allow_inf_nan=False)
    token: str | None = Field(default=None, min_length=16, repr=False)
    operator_token: str | None = Field(default=None, min_length=16, repr=False)
    server_names: frozenset[str] = frozenset()
    allowed_origins: frozenset[str] = frozenset()
    insecure: bool = False
    mcp_enabled: bool = False
    task_slots: TaskSlots | None = None
    task_idle_timeout_s: float = Field(600.0, gt=0, le=7 * 86400, allow_inf_nan=False)
    context_profile: ContextProfile = "metadata"
    context_scopes: frozenset[Scope] = DEFAULT_CONTEXT_SCOPES
    max_result_chars: int = Field(20_000, ge=256, le=1_000_000)
    max_result_items: int = Field(25, ge=1, le=10_000)
    max_body_bytes: int = Field(1_048_576, ge=1024, le=64 * 1_048_576)
    outbound: dict[str, Any] = Field(default_factory=lambda: {"default": "deny"})
    secrets: dict[str, str] = Field(default_factory=dict, repr=False)
    # Tool sources and their governance; each section is validated by the module that owns
    # it (registry.egress, registry.sources.mcp_servers, registry.builtins).
    egress: EgressSettings = Field(default_factory=EgressSettings)
    permissions: dict[PrincipalKey, frozenset[tuple[str, str]]] = Field(default_factory=dict)
    mcp_servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    builtins: dict[str, Any] = Field(default_factory=dict)

    @field_validator("grants")
    @classmethod
    def _grant_names(cls, grants: frozenset[str]) -> frozenset[str]:
        for grant in grants:
            if not re.fullmatch(_GRANT_PATTERN, grant):
                raise ValueError(f"grant {grant!r} is not a capability name")
        return grants

    @field_validator("permissions", mode="before")
    @classmethod
    def _permission_grants(cls, permissions: Any) -> Any:
        """``{principal: ["type:scope", …]}`` as held ``(type, scope)`` pairs."""
        if not isinstance(permissions, Mapping):
            return permissions
        return {key: _permission_pairs(key, value) for key, value in permissions.items()}

    def permissions_of(self, scope: str) -> frozenset[tuple[str, str]]:
        """The permissions the caller of ``scope`` holds (none unless granted)."""
        held = {str(key): pairs for key, pairs in self.permissions.items()}
        return held.get(scope, frozenset())

    @model_validator(mode="after")
    def _separate_operator(self) -> ServerSettings:
        """An operator token separates the operator from agents only beside a different
        agent token: alone it would guard nothing, equal it would separate nobody."""
        if self.operator_token is None:
            return self
        if self.token is None:
            raise ValueError(
                "operator_token needs the agent token too; give --token-env or --token-file"
            )
        if hmac.compare_digest(self.token.encode(), self.operator_token.encode()):
            raise ValueError("operator_token must differ from the agent token; make a new one")
        return self


def _permission_pairs(key: Any, values: Any) -> Any:
    """One principal's ``"type:scope"`` strings as pairs; ``ValueError`` naming the entry."""
    if not isinstance(values, list | tuple | frozenset | set):
        raise ValueError(f"{key}: a list of type:scope strings, such as network:*")
    pairs = set()
    for index, value in enumerate(values):
        if isinstance(value, tuple) and len(value) == 2:
            value = f"{value[0]}:{value[1]}"
        kind, _, scope = value.partition(":") if isinstance(value, str) else ("", "", "")
        if not re.fullmatch(_PERMISSION_TYPE, kind) or not re.fullmatch(_PERMISSION_SCOPE, scope):
            raise ValueError(
                f"{key}[{index}]: {str(value)[:80]!r} is not type:scope "
                "(a lower-case type, a colon, a scope or *; e.g. network:* or fs.read:/data)"
            )
        pairs.add((kind, scope))
    return frozenset(pairs)


class _ConfigFile(BaseModel):
    """The config file's closed schema (every key optional)."""

    model_config = ConfigDict(extra="forbid")

    host: str | None = None
    port: int | None = None
    grants: list[str] | None = None
    approvals: list[str] | None = None
    approval_timeout_s: float | None = None
    token_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    token_file: str | None = Field(default=None, min_length=1, max_length=4096)
    operator_token_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    operator_token_file: str | None = Field(default=None, min_length=1, max_length=4096)
    server_names: list[str] | None = None
    allowed_origins: list[str] | None = None
    insecure: bool | None = None
    mcp_enabled: bool | None = None
    task_slots: TaskSlots | None = None
    task_idle_timeout_s: float | None = None
    context_profile: str | None = None
    context_scopes: list[str] | None = None
    max_result_chars: int | None = None
    max_result_items: int | None = None
    outbound: dict[str, Any] | None = None
    secret_env: dict[str, str] | None = None
    egress: dict[str, Any] | None = None
    permissions: dict[str, list[str]] | None = None
    mcp_servers: dict[str, dict[str, Any]] | None = None
    builtins: dict[str, Any] | None = None


def _read_config(path: Path) -> _ConfigFile:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read the config file ({exc.strerror})") from exc
    raw = _parse(text, path)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise SettingsError(f"{path}: the config file must be a mapping")
    try:
        return _ConfigFile.model_validate(raw)
    except ValidationError as exc:
        raise SettingsError(f"{path}: {_first_problem(exc)}") from exc


def _parse(text: str, path: Path) -> Any:
    """The file's document under the wire's strict JSON or strict YAML rules."""
    if path.suffix == ".json":
        try:
            return strict_json.loads(text)
        except strict_json.JSONRefused as exc:
            raise SettingsError(f"{path}: not valid JSON: {exc.message}") from exc
    try:
        return strict_yaml.load(text)
    except strict_yaml.YAMLRefused as exc:
        raise SettingsError(f"{path}: {exc.field}: {exc.message}") from exc


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    field = ".".join(str(p) for p in error["loc"] if p != "[key]") or "(root)"
    return f"{field}: {str(error['msg']).removeprefix('Value error, ')}"


def _token(
    options: tuple[str | None, Path | None],
    configured: tuple[str | None, str | None],
    env: Mapping[str, str],
    *,
    prefix: str = "",
) -> str | None:
    """A bearer token from ``(env, file)`` options, else the config file's pair; never
    from a command line. ``prefix`` names the token's fields in a refusal."""
    sources = options if options != (None, None) else configured
    try:
        return load_token(env=sources[0], file=sources[1], environ=env)
    except TokenError as exc:
        # "token_env: …" reads "operator_token_env: …" for the operator's token.
        raise SettingsError(f"{prefix}{exc}") from exc


def _check_operator_token(token: str | None, operator_token: str | None) -> None:
    """The model's rule, refused here first with a code and what to do (one line)."""
    if operator_token is None:
        return
    if token is None:
        raise SettingsError(
            "OPERATOR_TOKEN_ALONE: an operator token needs the agent token too; "
            "give --token-env or --token-file as well"
        )
    if hmac.compare_digest(token.encode(), operator_token.encode()):
        raise SettingsError(
            "OPERATOR_TOKEN_SAME: the operator token equals the agent token, so agents could "
            "approve their own calls; give the operator a different token"
        )


def load_settings(
    *,
    config: Path | None = None,
    environ: Mapping[str, str] | None = None,
    host: str | None = None,
    port: int | None = None,
    grants: list[str] | None = None,
    approvals: list[str] | None = None,
    approval_timeout_s: float | None = None,
    mcp: bool = False,
    token_env: str | None = None,
    token_file: Path | None = None,
    operator_token_env: str | None = None,
    operator_token_file: Path | None = None,
    insecure: bool = False,
    context_profile: str | None = None,
    context_scopes: list[str] | None = None,
    task_slots: str | None = None,
    task_idle_timeout_s: float | None = None,
) -> ServerSettings:
    """Settings from ``config`` overridden by explicit options (grants and approvals add up;
    ``mcp`` turns the MCP endpoint on whatever the file says; ``context_scopes``, when
    given, replaces the file's or the default set).

    Raises :class:`SettingsError` naming the file and field on any problem, including a
    ``token_env`` that names an unset or empty variable.
    """
    file = _read_config(config) if config is not None else _ConfigFile()
    values: dict[str, Any] = {
        k: v
        for k, v in file.model_dump(
            exclude={
                "grants",
                "approvals",
                "token_env",
                "token_file",
                "operator_token_env",
                "operator_token_file",
                "secret_env",
            }
        ).items()
        if v is not None
    }
    if host is not None:
        values["host"] = host
    if port is not None:
        values["port"] = port
    if approval_timeout_s is not None:
        values["approval_timeout_s"] = approval_timeout_s
    values["grants"] = frozenset((file.grants or []) + (grants or []))
    values["approvals"] = frozenset((file.approvals or []) + (approvals or []))
    env = environ or {}
    secrets = {}
    for name, source in (file.secret_env or {}).items():
        if not env.get(source):
            raise SettingsError(f"secret_env.{name}: the environment variable {source} is not set")
        secrets[name] = env[source]
    values["secrets"] = secrets
    if mcp:
        values["mcp_enabled"] = True
    if context_profile is not None:
        values["context_profile"] = context_profile
    if task_slots is not None:
        values["task_slots"] = task_slots
    if task_idle_timeout_s is not None:
        values["task_idle_timeout_s"] = task_idle_timeout_s
    if context_scopes:
        values["context_scopes"] = context_scopes
    if insecure:
        values["insecure"] = True
    values["token"] = _token((token_env, token_file), (file.token_env, file.token_file), env)
    values["operator_token"] = _token(
        (operator_token_env, operator_token_file),
        (file.operator_token_env, file.operator_token_file),
        env,
        prefix="operator_",
    )
    _check_operator_token(values["token"], values["operator_token"])
    try:
        return ServerSettings.model_validate(values)
    except ValidationError as exc:
        where = f"{config}: " if config is not None else ""
        raise SettingsError(f"{where}{_first_problem(exc)}") from exc
