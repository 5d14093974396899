"""Dotted-path lookup into JSON-shaped data (``objects.cube.position``, ``items.0.name``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MISSING: Any = object()
"""Returned by :func:`lookup` when the path does not resolve."""


def lookup(data: Any, path: str) -> Any:
    """The value at ``path`` in ``data``, or :data:`MISSING`; never raises.

    Segments index mappings by key and sequences (not strings) by a non-negative integer.
    """
    current = data
    for segment in path.split("."):
        current = _step(current, segment)
        if current is MISSING:
            return MISSING
    return current


def _step(current: Any, segment: str) -> Any:
    if isinstance(current, Mapping):
        return current.get(segment, MISSING)
    is_list = isinstance(current, Sequence) and not isinstance(current, str | bytes)
    if is_list and segment.isdigit() and int(segment) < len(current):
        return current[int(segment)]
    return MISSING
