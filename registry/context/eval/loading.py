"""Reading a fixture: strict YAML, the schema, and the line of each case and problem."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from doraforge.registry.context.eval.schema import Expectation, Fixture, check_macros
from doraforge.wire import strict_yaml
from doraforge.wire.errors import StructuredError

#: The suite shipped with doraforge (package data of ``doraforge.registry.context``).
SHIPPED_FIXTURE = "fixtures/agent_context.yml"


class FixtureError(StructuredError, ValueError):
    """``EVAL_FIXTURE_UNREADABLE`` or ``EVAL_FIXTURE_INVALID``; the message names the file,
    the line when known, the field, and what to do."""


@dataclass(frozen=True)
class LoadedFixture:
    """A validated fixture, the name its report gives it, and each case's 1-based line."""

    fixture: Fixture
    name: str
    lines: Mapping[str, int]


def load_fixture(path: Path | None = None) -> LoadedFixture:
    """The fixture at ``path`` (default: the shipped suite), validated.

    Raises :class:`FixtureError`: ``EVAL_FIXTURE_UNREADABLE`` when the file cannot be read,
    ``EVAL_FIXTURE_INVALID`` (with the line and field) when it is not strict YAML or does
    not fit :class:`Fixture`."""
    name, data = _read(path)
    try:
        raw = strict_yaml.load(data)
    except strict_yaml.YAMLRefused as exc:
        raise _invalid(name, exc.line, exc.field, exc.message) from exc
    # The strict reader accepted the text, so composing it again for line numbers is safe.
    root = yaml.compose(data, Loader=yaml.SafeLoader)
    try:
        fixture = Fixture.model_validate(raw)
    except ValidationError as exc:
        # A misspelt key is also a missing one: name the misspelling, which is at fault.
        errors = exc.errors()
        problem = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        loc = tuple(problem["loc"])
        field_name = ".".join(str(part) for part in loc) or "<root>"
        message = str(problem["msg"]).removeprefix("Value error, ")
        raise _invalid(name, _line_at(root, loc), field_name, message) from exc
    for index, case in enumerate(fixture.cases):
        try:
            check_macros(case.request.arguments, *(_values_of(e) for e in case.expect))
        except ValueError as exc:
            line = _line_at(root, ("cases", index))
            raise _invalid(name, line, f"cases.{index}", str(exc)) from exc
    return LoadedFixture(fixture, name, _case_lines(root, fixture))


def _read(path: Path | None) -> tuple[str, bytes]:
    if path is None:
        shipped = resources.files("doraforge.registry.context").joinpath(SHIPPED_FIXTURE)
        return f"doraforge/registry/context/{SHIPPED_FIXTURE}", shipped.read_bytes()
    try:
        return str(path), path.read_bytes()
    except OSError as exc:
        raise FixtureError(
            "EVAL_FIXTURE_UNREADABLE",
            f"{path}: cannot read the fixture ({exc.strerror or exc}); "
            "pass a readable YAML file to --fixture",
        ) from exc


def _invalid(name: str, line: int | None, field_name: str, message: str) -> FixtureError:
    where = f"{name}:{line}" if line is not None else name
    return FixtureError(
        "EVAL_FIXTURE_INVALID",
        f"{where}: {field_name}: {message}; fix the fixture (its schema is in the README)",
        details={"file": name, "line": line, "field": field_name},
    )


def _values_of(expectation: Expectation) -> list[Any]:
    values = [expectation.equals, expectation.not_equals, expectation.contains]
    values += [expectation.set_equals, expectation.includes]
    if expectation.same_as is not None:
        values.append(expectation.same_as.request.arguments)
    return values


def _line_at(root: yaml.Node | None, loc: Sequence[Any]) -> int | None:
    """The 1-based line of the YAML node at validation location ``loc`` (the deepest one
    that exists: a missing key is reported at its mapping)."""
    node, line = root, None
    for part in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        node = _child(node, part)
    if node is not None:
        line = node.start_mark.line + 1
    return line


def _child(node: yaml.Node, part: Any) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        return next((v for k, v in node.value if k.value == str(part)), None)
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        child: yaml.Node = node.value[part]
        return child
    return None


def _case_lines(root: yaml.Node | None, fixture: Fixture) -> dict[str, int]:
    cases = _child(root, "cases") if root is not None else None
    lines: dict[str, int] = {}
    for index, case in enumerate(fixture.cases):
        node = _child(cases, index) if cases is not None else None
        lines[case.id] = node.start_mark.line + 1 if node is not None else 0
    return lines
