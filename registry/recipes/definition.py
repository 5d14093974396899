"""A recipe definition: its closed model, its bindings and the limits a save enforces.

A definition is what an operator writes::

    {"name": "recipe.<slug>", "description": "...", "input_schema": {closed object},
     "steps": [{"tool": "<canonical read tool>", "arguments": {...}}, ...],
     "output": [1, 3]}

Step arguments are JSON in which a binding object stands for a value known only at call
time: ``{"$input": "<field>"}`` (a field of the recipe's own arguments) or
``{"$step": k, "pointer": "/json/pointer"}`` (part of the result of an earlier step ``k``,
numbered from 1). Any other object with a key starting with ``$`` is refused, so a
binding is never mistaken for a literal or the reverse. ``output`` names the steps whose
results the recipe returns (default: the last). Everything here is checked without the
catalog; ``registry.recipes.validate`` checks the steps against the registered tools.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from doraforge.registry.errors import Unprocessable
from doraforge.registry.model import CANONICAL_NAME

MAX_STEPS = 5
MAX_DESCRIPTION_CHARS = 1000
MAX_POINTER_CHARS = 500
#: The most canonical-JSON characters a definition may take (schema and arguments included).
MAX_DEFINITION_CHARS = 32_000
PREFIX = "recipe."
#: ``recipe.<slug>``; the provider name ``recipe_<slug>`` stays within 64 characters.
NAME_PATTERN = r"^recipe\.[a-z0-9][a-z0-9_-]{0,47}$"
MAX_REPORTED_ERRORS = 10


class Step(BaseModel):
    """One read-tool call: a canonical tool name and arguments that may hold bindings."""

    model_config = ConfigDict(extra="forbid", strict=True)
    tool: Annotated[str, Field(pattern=CANONICAL_NAME)]
    arguments: dict[str, Any] = {}


class Definition(BaseModel):
    """A recipe definition as saved (see the module text); strict, closed, bounded."""

    model_config = ConfigDict(extra="forbid", strict=True)
    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    description: Annotated[str, Field(min_length=1, max_length=MAX_DESCRIPTION_CHARS)]
    input_schema: dict[str, Any]
    steps: Annotated[list[Step], Field(min_length=1, max_length=MAX_STEPS)]
    output: list[Annotated[int, Field(ge=1, le=MAX_STEPS)]] = []

    @model_validator(mode="after")
    def _coherent(self) -> Definition:
        schema = self.input_schema
        if schema.get("type") != "object" or schema.get("additionalProperties") is not False:
            raise ValueError(
                "input_schema must be closed: type 'object' with additionalProperties false"
            )
        if not isinstance(schema.get("properties", {}), dict):
            raise ValueError("input_schema.properties must be an object")
        if len(set(self.output)) != len(self.output):
            raise ValueError("output names a step twice")
        beyond = [k for k in self.output if k > len(self.steps)]
        if beyond:
            raise ValueError(f"output names step {beyond[0]}, beyond the {len(self.steps)} steps")
        return self

    @property
    def slug(self) -> str:
        """The name without ``recipe.``; also the file the library keeps it in."""
        return self.name.removeprefix(PREFIX)

    @property
    def provider_name(self) -> str:
        """``recipe_<slug>``: the provider-format name."""
        return f"recipe_{self.slug}"

    def returned_steps(self) -> list[int]:
        """The step numbers whose results the recipe returns (the last when unsaid)."""
        return list(self.output) or [len(self.steps)]

    def tools(self) -> list[str]:
        """The canonical tool of each step, in step order."""
        return [step.tool for step in self.steps]

    def document(self) -> dict[str, Any]:
        """The definition as JSON data, as it is stored and shown to the operator."""
        return self.model_dump(mode="json")


@dataclass(frozen=True)
class InputBinding:
    """``{"$input": field}``: the recipe argument ``field`` (absent when not given)."""

    field: str


@dataclass(frozen=True)
class StepBinding:
    """``{"$step": k, "pointer": p}``: the value at ``p`` in step ``k``'s result."""

    step: int
    pointer: str


type Binding = InputBinding | StepBinding
type ArgPath = tuple[str | int, ...]


def invalid(message: str, **details: Any) -> Unprocessable:
    """The one refusal of a malformed definition: ``RECIPE_INVALID`` with what to fix."""
    return Unprocessable("RECIPE_INVALID", message, details=details)


def parse_definition(document: Any) -> Definition:
    """The definition in ``document``; :class:`Unprocessable` ``RECIPE_TOO_MANY_STEPS`` for
    more than :data:`MAX_STEPS` steps, ``RECIPE_INVALID`` for anything else malformed
    (every problem named by its field), including a binding that is not well-formed."""
    if not isinstance(document, dict):
        raise invalid("a recipe definition must be a JSON object")
    steps = document.get("steps")
    if isinstance(steps, list) and len(steps) > MAX_STEPS:
        raise Unprocessable(
            "RECIPE_TOO_MANY_STEPS",
            f"a recipe has at most {MAX_STEPS} steps, this one {len(steps)}; split it",
            details={"max": MAX_STEPS, "steps": len(steps)},
        )
    if len(json.dumps(document, separators=(",", ":"))) > MAX_DEFINITION_CHARS:
        raise invalid(
            f"the definition is over {MAX_DEFINITION_CHARS} characters of JSON",
            maxChars=MAX_DEFINITION_CHARS,
        )
    try:
        definition = Definition.model_validate(document)
    except ValidationError as exc:
        errors = [
            {"loc": ".".join(str(p) for p in e["loc"]) or "(definition)", "msg": e["msg"]}
            for e in exc.errors()[:MAX_REPORTED_ERRORS]
        ]
        first = errors[0]
        raise invalid(f"{first['loc']}: {first['msg']}", errors=errors) from exc
    for number, step in enumerate(definition.steps, start=1):
        for _path, binding in bindings(step.arguments, number):
            _check_binding(definition, number, binding)
    return definition


def _check_binding(definition: Definition, number: int, binding: Binding) -> None:
    where = f"steps.{number - 1}.arguments"
    if isinstance(binding, InputBinding):
        if binding.field not in definition.input_schema.get("properties", {}):
            raise invalid(
                f"{where}: $input {binding.field!r} is not a property of input_schema",
                step=number,
            )
    elif binding.step >= number:
        raise invalid(
            f"{where}: $step {binding.step} is not an earlier step than {number}", step=number
        )


def binding_of(value: Mapping[str, Any], number: int) -> Binding | None:
    """The binding ``value`` is, ``None`` for a literal object; ``RECIPE_INVALID`` for an
    object that claims a ``$`` key without being a well-formed binding."""
    if not any(str(key).startswith("$") for key in value):
        return None
    where = f"step {number}"
    if set(value) == {"$input"} and isinstance(value["$input"], str) and value["$input"]:
        return InputBinding(value["$input"])
    if set(value) == {"$step", "pointer"}:
        step, pointer = value["$step"], value["pointer"]
        counted = isinstance(step, int) and not isinstance(step, bool) and step >= 1
        if counted and isinstance(pointer, str) and _is_pointer(pointer):
            return StepBinding(step, pointer)
    raise invalid(
        f"{where}: a binding is {{'$input': field}} or {{'$step': k, 'pointer': '/json/pointer'}}"
        " (k an earlier step, from 1); no other object may use a '$' key",
        step=number,
    )


def _is_pointer(pointer: str) -> bool:
    return len(pointer) <= MAX_POINTER_CHARS and (pointer == "" or pointer.startswith("/"))


def bindings(value: Any, number: int, path: ArgPath = ()) -> Iterator[tuple[ArgPath, Binding]]:
    """Every binding in the step arguments ``value`` with its path there (step ``number``
    for messages), outermost first; raises ``RECIPE_INVALID`` for a malformed one."""
    if isinstance(value, dict):
        binding = binding_of(value, number)
        if binding is not None:
            yield path, binding
            return
        for key, item in value.items():
            yield from bindings(item, number, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from bindings(item, number, (*path, index))
