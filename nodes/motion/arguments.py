"""Strict reading of untrusted Action arguments; every failure is a pre-motion rejection.

The Gateway validates against the ToolSpec schema first, but a provider never trusts its
caller: a direct Wire client, or a loose schema, must still be unable to send NaN, a
boolean for a number, or a vector of the wrong length to a robot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from forge_tool import ToolEndpointError

from doraforge.nodes.motion.errors import rejection


class ArgumentReader:
    """Reads named arguments, raising ``ToolEndpointError(code)`` on the first problem."""

    def __init__(self, arguments: Mapping[str, Any], *, code: str, allowed: set[str]) -> None:
        self._arguments = arguments
        self.code = code
        unknown = sorted(set(arguments) - allowed)
        if unknown:
            raise self.error(f"unknown argument(s): {', '.join(unknown)}")

    def error(self, message: str, **details: Any) -> ToolEndpointError:
        return rejection(self.code, message, **details)

    def has(self, name: str) -> bool:
        return name in self._arguments

    def raw(self, name: str) -> Any:
        return self._arguments.get(name)

    def number(self, name: str, *, low: float, high: float, default: float) -> float:
        """A finite number in ``[low, high]``; ``default`` when absent."""
        value = self._arguments.get(name, default)
        return self.check_number(value, name, low=low, high=high)

    def check_number(self, value: Any, name: str, *, low: float, high: float) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(f"{name} must be a number")
        if not math.isfinite(value):
            raise self.error(f"{name} must be finite")
        if not low <= value <= high:
            raise self.error(f"{name} must be within [{low:g}, {high:g}]", value=value)
        return float(value)

    def positive(self, name: str, *, high: float, default: float) -> float:
        """A finite number in ``(0, high]`` (speeds, forces)."""
        value = self.number(name, low=-math.inf, high=high, default=default)
        if value <= 0:
            raise self.error(f"{name} must be greater than 0")
        return value

    def choice(self, name: str, options: tuple[str, ...], *, default: str) -> str:
        """One of ``options`` (an enum argument); ``default`` when absent."""
        value = self._arguments.get(name, default)
        if not isinstance(value, str) or value not in options:
            raise self.error(f"{name} must be one of {', '.join(options)}", allowed=list(options))
        return value

    def vector(self, value: Any, name: str, length: int) -> np.ndarray:
        """A list of exactly ``length`` finite numbers."""
        if not isinstance(value, list | tuple) or len(value) != length:
            raise self.error(f"{name} must be a list of {length} numbers")
        bound = math.inf
        return np.array(
            [
                self.check_number(v, f"{name}[{i}]", low=-bound, high=bound)
                for i, v in enumerate(value)
            ]
        )
