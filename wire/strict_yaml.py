"""One strict YAML reader for every configuration and manifest doraforge reads.

YAML files here are input, often untrusted (a ``skill.yaml`` or ``gateway.yml`` arrives
inside a downloaded bundle). Refused, each with its own code and the dotted field of the
problem: text over ``max_bytes`` (before parsing), duplicate mapping keys at any depth,
keys that are not scalars, aliases (unless a caller allows them, and then their expansion
is bounded), nesting deeper than ``max_depth``, ``NaN``/``.inf``, and any tag outside
YAML's safe schema. Only ``true``/``false`` are booleans: YAML 1.1's ``yes``/``no``/``on``/
``off`` stay strings (as in YAML 1.2 and in Dora), so a strict schema refuses them where a
boolean is expected. Every refusal is a :class:`YAMLRefused` (a ``ValueError``); nothing
escapes as ``yaml.YAMLError``, ``RecursionError`` or ``TypeError``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import yaml

from doraforge.wire.errors import StructuredError

#: A configuration is a few pages; a bundle's gateway.yml is about 13 KB.
MAX_BYTES = 1024 * 1024
#: Mappings and sequences nested deeper than this are refused.
MAX_DEPTH = 32
#: With aliases allowed, the document as expanded may hold at most this many nodes.
MAX_NODES = 100_000
_BOOL_TAG = "tag:yaml.org,2002:bool"


class YAMLRefused(StructuredError, ValueError):
    """YAML that the strict rules refuse.

    ``code`` names the rule, ``field`` the dotted path of the problem (``<root>`` when
    the document as a whole is at fault) and ``line`` the 1-based line when known; both are
    also in ``details``. ``message`` names neither the file nor the field, so a caller can
    prefix them in its own error's wording.
    """

    def __init__(self, code: str, message: str, *, field: str = "<root>", line: int | None = None):
        details: dict[str, Any] = {"field": field}
        if line is not None:
            details["line"] = line
        super().__init__(code, message, details=details)
        self.field = field
        self.line = line


def load(
    text: str | bytes,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    aliases: bool = False,
    max_nodes: int = MAX_NODES,
) -> Any:
    """Parse one YAML document under the strict rules; an empty document is ``None``.

    ``aliases=True`` admits anchors and aliases (hand-written Gateway configurations and
    Dora dataflows use them) but refuses a cycle and an expansion beyond ``max_nodes``
    nodes or ``max_depth`` levels, so a small file cannot unfold into a huge tree.
    Raises :class:`YAMLRefused`.
    """
    text = _bounded_text(text, max_bytes)
    loader = _StrictLoader(text, max_depth=max_depth, aliases=aliases)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if aliases:
            _check_expansion(node, max_nodes=max_nodes, max_depth=max_depth)
        return loader.construct_document(node)
    except YAMLRefused:
        raise
    except yaml.YAMLError as exc:
        raise YAMLRefused("YAML_INVALID", f"invalid YAML: {exc}", line=_line(exc)) from exc
    except RecursionError as exc:  # belt and braces: the depth check runs first
        raise YAMLRefused("YAML_TOO_DEEP", f"nesting deeper than {max_depth} levels") from exc
    finally:
        loader.dispose()


def _bounded_text(text: str | bytes, max_bytes: int) -> str:
    if isinstance(text, bytes):
        if len(text) > max_bytes:
            raise YAMLRefused("YAML_TOO_LARGE", f"larger than {max_bytes} bytes")
        try:
            return text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise YAMLRefused("YAML_INVALID", "not valid UTF-8") from exc
    # A character is at least one byte, so only text this long needs encoding to measure.
    if len(text) > max_bytes or (
        len(text) * 4 > max_bytes and len(text.encode("utf-8", "surrogatepass")) > max_bytes
    ):
        raise YAMLRefused("YAML_TOO_LARGE", f"larger than {max_bytes} bytes")
    return text


def _line(exc: yaml.YAMLError) -> int | None:
    mark = getattr(exc, "problem_mark", None)
    return None if mark is None else mark.line + 1


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader with the strict rules; ``_path`` is the field being constructed."""

    def __init__(self, stream: str, *, max_depth: int, aliases: bool) -> None:
        super().__init__(stream)
        self._max_depth = max_depth
        self._aliases = aliases
        self._depth = 0
        self._path: list[str] = []

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent) and not self._aliases:
            # Aliases let a small document expand into a huge tree ("billion laughs").
            line = self._next_line()
            raise YAMLRefused(
                "YAML_ALIAS", f"YAML aliases are not allowed (line {line})", line=line
            )
        self._depth += 1
        try:
            if self._depth > self._max_depth:
                line = self._next_line()
                raise YAMLRefused(
                    "YAML_TOO_DEEP", f"nesting deeper than {self._max_depth} levels", line=line
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def _next_line(self) -> int:
        """The 1-based line of the event about to be composed."""
        event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in the stubs
        return int(event.start_mark.line) + 1

    @property
    def field(self) -> str:
        """The dotted path of the value under construction."""
        return ".".join(self._path) or "<root>"

    @contextmanager
    def at(self, part: str) -> Iterator[None]:
        """Construct the enclosed value as ``part`` of the current field."""
        self._path.append(part)
        try:
            yield
        finally:
            self._path.pop()


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        try:
            repeated = key in mapping
        except TypeError:  # a mapping or sequence used as a key
            raise YAMLRefused(
                "YAML_KEY_NOT_SCALAR",
                f"a mapping key must be a scalar (line {line})",
                field=loader.field,
                line=line,
            ) from None
        with loader.at(str(key)):
            if repeated:
                raise YAMLRefused(
                    "YAML_DUPLICATE_KEY",
                    f"duplicate key {key!r} at line {line}",
                    field=loader.field,
                    line=line,
                )
            mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


def _construct_sequence(loader: _StrictLoader, node: yaml.SequenceNode) -> list[Any]:
    items: list[Any] = []
    for index, child in enumerate(node.value):
        with loader.at(str(index)):
            items.append(loader.construct_object(child, deep=True))
    return items


def _construct_float(loader: _StrictLoader, node: yaml.ScalarNode) -> float:
    number = yaml.SafeLoader.construct_yaml_float(loader, node)
    if not math.isfinite(number):
        # A JSON dump of the value would publish NaN/Infinity as null, or fail later.
        line = node.start_mark.line + 1
        raise YAMLRefused(
            "YAML_NON_FINITE",
            f"non-finite numbers are not allowed (line {line})",
            field=loader.field,
            line=line,
        )
    return number


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)
_StrictLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != _BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictLoader.add_implicit_resolver(
    _BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expansion(root: yaml.Node, *, max_nodes: int, max_depth: int) -> None:
    """Refuse a node graph whose expansion is cyclic, too big or too deep.

    Aliases make the composed document a graph that shares nodes; sizes and heights are
    memoised per node, so this runs in time linear in the graph however far it expands.
    """
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    entered: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            entered.discard(key)
            kids = [id(kid) for kid in _children(node)]
            size[key] = 1 + sum(size[kid] for kid in kids)
            height[key] = 1 + max((height[kid] for kid in kids), default=0)
            if size[key] > max_nodes:
                raise YAMLRefused("YAML_TOO_LARGE", f"aliases expand beyond {max_nodes} nodes")
            if height[key] > max_depth:
                raise YAMLRefused("YAML_TOO_DEEP", f"aliases nest deeper than {max_depth} levels")
        elif key not in size:
            if key in entered:
                line = node.start_mark.line + 1
                raise YAMLRefused("YAML_ALIAS", f"a recursive alias (line {line})", line=line)
            entered.add(key)
            stack.append((node, True))
            stack.extend((kid, False) for kid in _children(node) if id(kid) not in size)
