"""Which Gateway a ``skill`` argument reaches, and what an agent may read of a failure.

An agent never names a URL. The Gateway of a governed or diagnostic call is the installed
skill's: the URL its runtime state recorded at start (copied then from the manifest's
``gateway_url``, the only source of a URL), where the running instance really listens. A
skill that is not installed or not running (or whose Gateway does not answer with the
identity recorded at start) is a :class:`ToolFailure` raised before anything is dialled.

Failures reach agents without internal text: an exception's own words (httpx errors,
SQLite messages, file paths) are replaced by a fixed sentence per code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from doraforge.paos.errors import PaosError
from doraforge.paos.home import PaosHome
from doraforge.registry.errors import ToolFailure

type RuntimeFactory = Callable[[], Any]

_UNKNOWN = "; the remote state is unknown: reconcile by reading, do not retry"
#: Codes whose PAOS message quotes a foreign exception or a path, and what agents read.
_FIXED_MESSAGES: Mapping[str, str] = {
    "FORGE_CLIENT_TRANSPORT": "the connection to the Gateway failed" + _UNKNOWN,
    "FORGE_CLIENT_TIMEOUT": "the Gateway did not answer in time" + _UNKNOWN,
    "PAOS_UNCLASSIFIED_FAULT": "an internal fault struck" + _UNKNOWN,
    "PAOS_RECORD_INDETERMINATE": "the request was sent but its outcome could not be recorded"
    + _UNKNOWN,
    "PAOS_STORE_UNAVAILABLE": "the task store is unavailable",
    "PAOS_STORE_CONFLICT": "the task store refused the change",
    "EVIDENCE_WRITE_FAILED": "evidence could not be written",
    "SKILL_MANIFEST_INVALID": "the installed skill's manifest is invalid",
    "SKILL_RUNTIME_STATE_INVALID": "the skill's runtime state is unreadable",
    "SKILL_START_FAILED": "the skill failed to start",
}
#: Detail keys that may hold a file path; dropped whenever the message is replaced.
_PATH_KEYS = frozenset({"path", "source", "bundle", "file"})


def agent_safe(failure: ToolFailure) -> ToolFailure:
    """``failure`` as an agent may read it: same code, retryability and ids; a fixed message
    (and no path details) for the codes whose message carries internal text."""
    fixed = _FIXED_MESSAGES.get(failure.code)
    if fixed is None:
        return failure
    details = {k: v for k, v in failure.details.items() if k not in _PATH_KEYS}
    return ToolFailure(failure.code, fixed, retryable=failure.retryable, details=details)


def _skill_failure(skill: str, exc: PaosError) -> ToolFailure:
    messages = {
        "SKILL_NOT_INSTALLED": f"skill {skill!r} is not installed",
        "SKILL_NOT_RUNNING": f"skill {skill!r} is not running; start it first",
        "SKILL_RUNTIME_UNHEALTHY": (
            f"skill {skill!r} is running but its Gateway does not answer as recorded at start"
        ),
        "SKILL_RUNTIME_BUSY": f"a lifecycle command for skill {skill!r} is in progress",
    }
    message = messages.get(exc.code) or _FIXED_MESSAGES.get(exc.code)
    return ToolFailure(
        exc.code,
        message or f"skill {skill!r} cannot be reached ({exc.code})",
        retryable=exc.retryable,
        details={"skill": skill},
    )


class SkillGateways:
    """Resolves a skill name to its running Gateway's URL (never a caller's)."""

    def __init__(self, home: PaosHome, runtime_factory: RuntimeFactory) -> None:
        self._home = home
        self._runtime_factory = runtime_factory

    async def url(self, skill: str) -> str:
        """The Gateway URL of the installed, running ``skill``.

        Raises :class:`ToolFailure` ``SKILL_NOT_INSTALLED``, ``SKILL_MANIFEST_INVALID``,
        ``SKILL_NOT_RUNNING`` or ``SKILL_RUNTIME_UNHEALTHY``; nothing the caller said is
        dialled, only the runtime's own health probe of the recorded Gateway.
        """
        return await asyncio.to_thread(self._resolve, skill)

    def _resolve(self, skill: str) -> str:
        from doraforge.skill_runtime import installed_manifest

        try:
            installed_manifest(self._home, skill)  # refuses a skill not (validly) installed
            state = self._runtime_factory().healthy_runtime(skill)
        except PaosError as exc:
            raise _skill_failure(skill, exc) from exc
        return str(state.gateway_url).rstrip("/")
