"""The simulator's error tree: one base, subclasses carrying a stable ``code``."""

from __future__ import annotations

from typing import Any


class SimError(RuntimeError):
    """Base of every error ``sim`` raises on purpose (argument errors stay ``ValueError``)."""

    code = "SIM_ERROR"
    retryable = False

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details or {}


class PhysicsDiverged(SimError):
    """The simulation became non-finite or absurdly fast; the world refuses to step until
    ``World.reset``."""

    code = "SIM_PHYSICS_DIVERGED"


class RenderUnavailable(SimError):
    """No headless OpenGL backend can be used in this process."""

    code = "SIM_RENDER_UNAVAILABLE"


class DuplicateTask(SimError, ValueError):
    """A task name was registered twice."""

    code = "SIM_DUPLICATE_TASK"


class UnknownTask(SimError, LookupError):
    """No task is registered under the requested name."""

    code = "SIM_UNKNOWN_TASK"
