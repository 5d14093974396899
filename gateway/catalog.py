"""The ToolSpec catalog: caller-facing tools, their schemas and their endpoint bindings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from forge_tool import ToolEndpointDescriptor, ToolOperationDescriptor
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from doraforge.gateway.config import ToolSpecConfig
from doraforge.gateway.errors import ConfigError, NotFound
from doraforge.wire.canonical import canonical_bytes, sha256_hex
from doraforge.wire.schema_fast import compile_schema
from doraforge.wire.schema_words import expected_text, json_path, located
from doraforge.wire.suggest import closest, did_you_mean


@dataclass(frozen=True)
class SchemaViolation:
    """The first failing location of a JSON Schema check and what the schema expects
    there (``expected``: the sub-schema of that location, ``{}`` when it says nothing)."""

    path: str
    message: str
    expected: dict[str, Any] = field(default_factory=dict)

    def expected_text(self) -> str:
        """What belongs at :attr:`path`, in a few words (``number 0..3600``), or ``""``."""
        return expected_text(self.expected)


class CompiledSchema:
    """A JSON Schema checked once at load time and reused for every call."""

    def __init__(self, schema: Mapping[str, Any], where: str) -> None:
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise ConfigError(f"{where}: invalid JSON Schema: {exc.message}") from exc
        self._validator = Draft202012Validator(dict(schema))
        # Exact for the keywords it compiles; ``None`` leaves every check to jsonschema.
        self._conforms = compile_schema(schema)

    def first_violation(self, instance: Any) -> SchemaViolation | None:
        """Return the shallowest violation, or ``None`` when ``instance`` conforms."""
        if self._conforms is not None and self._conforms(instance):
            return None
        errors = sorted(self._validator.iter_errors(instance), key=lambda e: len(e.path))
        if not errors:
            return None
        error = errors[0]
        where, expected = located(error, instance)
        return SchemaViolation(path=json_path(where), message=error.message, expected=expected)


class ToolSpec:
    """One configured tool: its public document, schemas and byte-stable identity."""

    def __init__(self, config: ToolSpecConfig) -> None:
        self.config = config
        self.tool_id = config.tool_id
        self.endpoint_id = config.endpoint_id
        self.operation = config.operation
        self.semantics = config.semantics
        self.document: dict[str, Any] = config.model_dump(mode="json", exclude_none=False)
        self.document["readiness"] = list(config.readiness)
        self.canonical = canonical_bytes(self.document)
        self.sha256 = sha256_hex(self.document)
        self.input_schema = CompiledSchema(config.input_schema, f"tools.{self.tool_id}.input")
        self.output_schema = CompiledSchema(config.output_schema, f"tools.{self.tool_id}.output")

    def binding_error(self, descriptor: ToolEndpointDescriptor | None) -> str | None:
        """Explain why this spec cannot bind to ``descriptor``; ``None`` when it binds."""
        if descriptor is None:
            return f"endpoint {self.endpoint_id!r} has no current registered instance"
        operation = self.descriptor_operation(descriptor)
        if operation is None:
            return f"endpoint {self.endpoint_id!r} does not declare operation {self.operation!r}"
        if operation.semantics != self.semantics:
            return (
                f"ToolSpec semantics {self.semantics!r} does not match the endpoint's "
                f"{operation.semantics!r}"
            )
        return None

    def descriptor_operation(
        self, descriptor: ToolEndpointDescriptor
    ) -> ToolOperationDescriptor | None:
        """Return this spec's operation in ``descriptor`` when it exists there."""
        if descriptor.endpoint_id != self.endpoint_id:
            return None
        for operation in descriptor.operations:
            if operation.name == self.operation:
                return operation
        return None


class Catalog:
    """Immutable lookup of ToolSpecs by ``tool_id`` and by ``(endpoint_id, operation)``."""

    def __init__(self, configs: Iterable[ToolSpecConfig]) -> None:
        specs = [ToolSpec(config) for config in configs]
        self._by_id = {spec.tool_id: spec for spec in specs}
        self._by_route = {(spec.endpoint_id, spec.operation): spec for spec in specs}
        if len(self._by_id) != len(specs) or len(self._by_route) != len(specs):
            raise ConfigError("tool_id and (endpoint_id, operation) must each be unique")

    def get(self, tool_id: str) -> ToolSpec | None:
        """Return the spec with ``tool_id``."""
        return self._by_id.get(tool_id)

    def not_found(self, tool_id: str) -> NotFound:
        """``FORGE_TOOL_NOT_FOUND`` for ``tool_id``, offering the closest tool ids (a typo
        is then one look away) in the message and ``details.suggestions``."""
        return NotFound(
            "FORGE_TOOL_NOT_FOUND",
            f"no tool {tool_id!r}{did_you_mean(tool_id, self._by_id)}",
            details={"tool_id": tool_id, "suggestions": closest(tool_id, self._by_id)},
        )

    def by_route(self, endpoint_id: str, operation: str) -> ToolSpec | None:
        """Return the spec bound to ``endpoint_id``/``operation``."""
        return self._by_route.get((endpoint_id, operation))

    def all(self) -> list[ToolSpec]:
        """Return every spec ordered by ``tool_id``."""
        return [self._by_id[key] for key in sorted(self._by_id)]

    def revision(self) -> str:
        """Return a digest of the whole catalog, stable across restarts."""
        return sha256_hex([spec.sha256 for spec in self.all()])[:16]
