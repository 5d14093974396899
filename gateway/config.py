"""Strict Gateway configuration.

The YAML file is hostile-input-safe and strict (:mod:`doraforge.wire.strict_yaml`):
duplicate keys, unknown keys, string booleans, non-finite numbers, unbounded aliases and
wrong types are rejected with the field path and file named in the message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from doraforge.gateway.errors import ConfigError
from doraforge.wire import strict_yaml
from doraforge.wire.frames import AxisDirection

Semantics = Literal["query", "action", "session"]
Identifier = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:/-]+$")]
DoraId = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")]

#: Readiness requirements a ToolSpec may declare; each is checked live by the Gateway.
READINESS_REQUIREMENTS = frozenset(
    {
        "endpoint_registered",  # a current, unexpired endpoint instance exists
        "endpoint_ready",  # its latest status snapshot is ready or busy
        "operation_capacity",  # the operation is below its max_concurrency
    }
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class RobotFrameProfile(_Strict):
    """Frames and axis conventions a caller needs to interpret poses for a tool."""

    robot_id: Annotated[str, Field(min_length=1)]
    base_frame: Annotated[str, Field(min_length=1)]
    tool_frame: Annotated[str, Field(min_length=1)] | None = None
    frames: dict[str, Annotated[str, Field(min_length=1)]] = Field(default_factory=dict)
    directions: dict[str, AxisDirection] = Field(default_factory=dict)


class ToolSpecConfig(_Strict):
    """One caller-facing tool bound to exactly one endpoint operation."""

    tool_id: Identifier
    implementation_id: Identifier
    endpoint_id: Identifier
    operation: Identifier
    semantics: Semantics
    description: str = ""
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    readiness: list[str] = Field(default_factory=lambda: ["endpoint_registered"])
    robot_frame_profile: RobotFrameProfile | None = None

    @model_validator(mode="after")
    def _known_readiness(self) -> ToolSpecConfig:
        unknown = sorted(set(self.readiness) - READINESS_REQUIREMENTS)
        if unknown:
            raise ValueError(
                f"readiness has unknown requirement(s) {unknown}; "
                f"known: {sorted(READINESS_REQUIREMENTS)}"
            )
        if len(set(self.readiness)) != len(self.readiness):
            raise ValueError("readiness entries must be unique")
        return self


class ProviderRoute(_Strict):
    """The trusted Dora route of one endpoint: it alone authorises that endpoint_id."""

    endpoint_id: Identifier
    input: DoraId  # the Gateway input carrying this provider's messages
    output: DoraId  # the Gateway output carrying requests to this provider


class RetentionConfig(_Strict):
    """Bounds that keep Gateway memory flat however long it runs."""

    max_invocations: Annotated[int, Field(ge=16, le=1_000_000)] = 4096
    max_age_s: Annotated[float, Field(gt=0, le=7 * 24 * 3600)] = 3600.0
    max_events_per_invocation: Annotated[int, Field(ge=8, le=100_000)] = 256
    dedupe_window_s: Annotated[float, Field(gt=0, le=7 * 24 * 3600)] = 600.0
    evicted_ids_remembered: Annotated[int, Field(ge=0, le=1_000_000)] = 8192


class ImageSource(_Strict):
    """A camera stream the Gateway subscribes to: its name and its Dora input."""

    source: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]
    input: DoraId


class ObservationsConfig(_Strict):
    """Data-plane observations served over HTTP and WebSocket (images, joint state)."""

    images: list[ImageSource] = Field(default_factory=list)
    joint_state_input: DoraId | None = None
    image_format: Literal["jpeg", "png"] = "jpeg"
    jpeg_quality: Annotated[int, Field(ge=10, le=100)] = 85
    ws_image_max_hz: Annotated[float, Field(gt=0, le=60)] = 15.0
    ws_state_max_hz: Annotated[float, Field(gt=0, le=500)] = 30.0

    @model_validator(mode="after")
    def _unique_sources(self) -> ObservationsConfig:
        _unique([image.source for image in self.images], "observations.images[].source")
        _unique([image.input for image in self.images], "observations.images[].input")
        return self


class SecurityConfig(_Strict):
    """Who may reach the HTTP and WebSocket edge (see ``doraforge.wire.guard``).

    The bearer token comes from the environment variable ``token_env`` names or from the
    file ``token_file`` names (mode 0600), never from the file itself or a command line.
    ``server_names`` are extra ``Host`` names this Gateway answers to (its DNS name behind
    a LAN bind); ``allowed_origins`` are browser origins besides its own. ``insecure``
    lets a non-loopback bind start without a token, logged loudly: lab networks only.
    """

    token_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")] | None = None
    token_file: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    server_names: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9.:\[\]-]{1,253}$")]] = Field(
        default_factory=list
    )
    allowed_origins: list[Annotated[str, Field(pattern=r"^https?://[^/\s]{1,260}$")]] = Field(
        default_factory=list
    )
    insecure: bool = False

    @model_validator(mode="after")
    def _one_token_source(self) -> SecurityConfig:
        if self.token_env is not None and self.token_file is not None:
            raise ValueError("security: name either token_env or token_file, not both")
        return self


class GatewayConfig(_Strict):
    """The whole Gateway configuration file."""

    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 9001
    gateway_id: Identifier = "doraforge-gateway"
    lease_ttl_ms: Annotated[int, Field(ge=100, le=3_600_000)] = 5000
    default_timeout_ms: Annotated[int, Field(ge=1, le=86_400_000)] = 30_000
    invoke_timeout_cap_ms: Annotated[int, Field(ge=1, le=86_400_000)] = 600_000
    admission_timeout_ms: Annotated[int, Field(ge=10, le=600_000)] = 5000
    status_poll_interval_ms: Annotated[int, Field(ge=50, le=600_000)] = 1000
    cancel_on_deadline: bool = True
    max_body_bytes: Annotated[int, Field(ge=1024, le=16 * 1024 * 1024)] = 1_048_576
    journal_path: str | None = None
    security: SecurityConfig = Field(default_factory=SecurityConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    observations: ObservationsConfig = Field(default_factory=ObservationsConfig)
    providers: list[ProviderRoute] = Field(default_factory=list)
    tools: list[ToolSpecConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> GatewayConfig:
        _unique([p.endpoint_id for p in self.providers], "providers[].endpoint_id")
        _unique([p.input for p in self.providers], "providers[].input")
        _unique([p.output for p in self.providers], "providers[].output")
        observed = [i.input for i in self.observations.images]
        if self.observations.joint_state_input:
            observed.append(self.observations.joint_state_input)
        _unique([p.input for p in self.providers] + observed, "Dora input ids")
        _unique([t.tool_id for t in self.tools], "tools[].tool_id")
        _unique([(t.endpoint_id, t.operation) for t in self.tools], "tools[].(endpoint, op)")
        routed = {p.endpoint_id for p in self.providers}
        for index, tool in enumerate(self.tools):
            if tool.endpoint_id not in routed:
                raise ValueError(
                    f"tools[{index}].endpoint_id: tool {tool.tool_id!r} names endpoint "
                    f"{tool.endpoint_id!r}, which has no providers[] route"
                )
        if self.default_timeout_ms > self.invoke_timeout_cap_ms:
            raise ValueError("default_timeout_ms must not exceed invoke_timeout_cap_ms")
        return self


def _unique(values: list[Any], name: str) -> None:
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{name} must be unique; {value!r} repeats")
        seen.add(value)


def parse_config(text: str, source: str = "<string>") -> GatewayConfig:
    """Parse and validate configuration text; raise :class:`ConfigError` naming the field.

    The text is read by :mod:`doraforge.wire.strict_yaml` with aliases allowed (the shipped
    configurations share schemas by anchor) and their expansion bounded.
    """
    try:
        raw = strict_yaml.load(text, aliases=True)
    except strict_yaml.YAMLRefused as exc:
        raise ConfigError(f"{source}: {exc.field}: {exc.message}") from exc
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping")
    try:
        return GatewayConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc)}") from exc


def load_config(path: str | Path) -> GatewayConfig:
    """Read and validate a Gateway configuration file."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read: {exc.strerror}") from exc
    return parse_config(text, str(file))


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        location = ".".join(str(item) for item in error["loc"]) or "<root>"
        parts.append(f"{location}: {error['msg']}")
    return "; ".join(parts)
