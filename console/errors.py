"""One translation of PAOS and Skill Runtime errors into the registry's error tree.

The console's routes raise registry errors only, so the registry edge's one status table
(``registry.http.STATUS_FOR_ERROR``) answers them: a refusal is a structured 4xx that keeps
the original code, and a failure whose remote state is unknown says so in its details.
"""

from __future__ import annotations

from collections.abc import Mapping

from doraforge.paos.errors import ForgeHttpError, PaosError
from doraforge.registry.errors import (
    Conflict,
    InvalidRequest,
    NotFound,
    RegistryError,
    ToolFailure,
    Unprocessable,
)

type ErrorClass = type[RegistryError] | type[ToolFailure]

#: Skill Runtime and PAOS codes whose class is not a failure of the tool itself.
_CLASS_FOR_CODE: Mapping[str, ErrorClass] = {
    "SKILL_NAME_INVALID": InvalidRequest,
    "SKILL_NOT_INSTALLED": NotFound,
    "PAOS_NOT_FOUND": NotFound,
    "SKILL_NOT_RUNNING": Conflict,
    "SKILL_RUNTIME_BUSY": Conflict,
    "SKILL_RUNTIME_IN_USE": Conflict,
    "SKILL_ALREADY_RUNNING": Conflict,
    "SKILL_GATEWAY_IN_USE": Conflict,
    "SKILL_RUNTIME_UNHEALTHY": Conflict,
    "SKILL_PROFILE_UNKNOWN": Unprocessable,
    "SKILL_PROFILE_REQUIRED": Unprocessable,
    "SKILL_PREFLIGHT_FAILED": Unprocessable,
    "SKILL_MANIFEST_INVALID": Unprocessable,
}
#: A Gateway refusal keeps its meaning; anything else it answered is a tool failure.
_CLASS_FOR_STATUS: Mapping[int, ErrorClass] = {
    400: InvalidRequest,
    404: NotFound,
    409: Conflict,
    410: Conflict,
    422: Unprocessable,
}


def translated(exc: PaosError | ToolFailure) -> RegistryError | ToolFailure:
    """``exc`` as the registry error a console route raises (same code and details)."""
    cls = _CLASS_FOR_CODE.get(exc.code)
    if cls is None and isinstance(exc, ForgeHttpError):
        cls = _CLASS_FOR_STATUS.get(exc.status_code)
    details = dict(exc.details)
    if getattr(exc, "remote_state", None) == "unknown":
        details["remoteState"] = "unknown"
    return (cls or ToolFailure)(exc.code, exc.message, retryable=exc.retryable, details=details)
