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
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from doraforge.paos.binding import identity_document
from doraforge.paos.errors import PaosError
from doraforge.paos.home import PaosHome
from doraforge.registry.errors import ToolFailure

type RuntimeFactory = Callable[[], Any]
#: ``GET /tools`` of a Gateway URL through a long-lived client (raises PaosError).
type Lister = Callable[[str], Awaitable[Mapping[str, Any]]]
#: Told each listing whose identity matched the recorded one, and for how long it holds.
type Vouch = Callable[[str, Mapping[str, Any], float], None]

#: How long (seconds) one passed health check of a running skill is trusted. The runtime
#: state file is still read on every call, so a stop or a restart (new
#: ``runtime_instance_id``) is seen at once, and only a Gateway that dies without its state
#: changing goes unseen this long (a transport failure then drops the entry: :meth:`forget`).
HEALTH_CHECK_LIFETIME_S: Final = 1.5
#: How long the runtime manager's full check (``dora list``, a fresh HTTP client and the
#: Gateway's ``GET /tools``: ~0.3 s of CPU, most of it the ``dora`` CLI starting) stands
#: in for it. Within this, an expired check is renewed by reading ``GET /tools`` through
#: the shared pooled client and comparing the Gateway's identity with the one recorded at
#: start; a renewal that fails for any reason runs the full check, whose error the caller
#: gets. A lost dataflow takes its Gateway with it, so the renewal sees it too.
FULL_CHECK_LIFETIME_S: Final = 30.0

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


@dataclass(frozen=True, slots=True)
class _Checked:
    """One passed health check: for which start of the skill, its URL, the Gateway
    identity recorded at start, until when it is trusted, until when the full check is."""

    runtime_instance_id: str
    url: str
    identity: Mapping[str, Any] | None
    expires: float
    full_expires: float


class SkillGateways:
    """Resolves a skill name to its running Gateway's URL (never a caller's).

    A passed health check is kept per skill for :data:`HEALTH_CHECK_LIFETIME_S`, keyed by
    the runtime's ``runtime_instance_id``; concurrent calls for one skill share one check
    (a lock per skill), and all file and subprocess work runs off the event loop. With a
    ``lister`` an expired check is renewed by the Gateway's identity alone (see
    :data:`FULL_CHECK_LIFETIME_S`), and ``vouch`` is given each listing that passed.
    """

    def __init__(
        self,
        home: PaosHome,
        runtime_factory: RuntimeFactory,
        *,
        clock: Callable[[], float] = time.monotonic,
        lister: Lister | None = None,
        vouch: Vouch | None = None,
    ) -> None:
        self._home = home
        self._runtime_factory = runtime_factory
        self._clock = clock
        self._lister = lister
        self._vouch = vouch
        self._checked: dict[str, _Checked] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def forget(self, skill: str) -> None:
        """Drop ``skill``'s passed check (its Gateway failed to answer, answered 503 or with
        another identity), so the next call runs the full check again."""
        self._checked.pop(skill, None)

    async def url(self, skill: str) -> str:
        """The Gateway URL of the installed, running ``skill``.

        Raises :class:`ToolFailure` ``SKILL_NOT_INSTALLED``, ``SKILL_MANIFEST_INVALID``,
        ``SKILL_NOT_RUNNING`` or ``SKILL_RUNTIME_UNHEALTHY``; nothing the caller said is
        dialled, only the runtime's own health probe of the recorded Gateway.
        """
        instance = await asyncio.to_thread(self._running_instance, skill)
        cached = self._fresh(skill, instance)
        if cached is not None:
            return cached
        async with self._locks.setdefault(skill, asyncio.Lock()):
            cached = self._fresh(skill, instance)  # a concurrent call may just have checked
            if cached is not None:
                return cached
            previous = self._checked.pop(skill, None)
            checked = await self._check(skill, previous, instance)
            self._checked[skill] = checked
            return checked.url

    def _fresh(self, skill: str, instance: str | None) -> str | None:
        """The URL of a passed check of this very start that has not expired, if any."""
        checked = self._checked.get(skill)
        if checked is None or not instance or checked.runtime_instance_id != instance:
            return None
        return checked.url if self._clock() < checked.expires else None

    async def _check(self, skill: str, previous: _Checked | None, instance: str | None) -> _Checked:
        """Renew ``previous`` by identity while its full check stands, else the full check
        (renewed at once, so its listing is vouched for)."""
        if (
            previous is not None
            and instance
            and previous.runtime_instance_id == instance
            and self._clock() < previous.full_expires
        ):
            renewed = await self._renew(previous)
            if renewed is not None:
                return renewed
        checked = await asyncio.to_thread(self._resolve, skill)
        return await self._renew(checked) or checked

    async def _renew(self, checked: _Checked) -> _Checked | None:
        """``checked`` trusted anew when its Gateway lists the identity recorded at start;
        ``None`` when it does not (or cannot be asked)."""
        if self._lister is None or not checked.identity:
            return None
        try:
            listing = await self._lister(checked.url)
            if identity_document(listing) != checked.identity:
                return None
        except PaosError:
            return None
        if self._vouch is not None:
            self._vouch(checked.url, listing, HEALTH_CHECK_LIFETIME_S)
        return replace(checked, expires=self._clock() + HEALTH_CHECK_LIFETIME_S)

    def _running_instance(self, skill: str) -> str | None:
        """The ``runtime_instance_id`` the state file records for a cleanly running
        ``skill`` (read on every call: cheap, and how a stop or restart is seen at once);
        ``None`` otherwise, and the passed check, if any, is dropped."""
        from doraforge.skill_runtime.runtime_state import read_state

        try:
            state = read_state(self._home.runtime_dir, skill)
        except PaosError:
            state = None  # the full check below reports it
        if state is None or state.state != "running" or state.error is not None:
            self._checked.pop(skill, None)
            return None
        return str(state.runtime_instance_id)

    def _resolve(self, skill: str) -> _Checked:
        from doraforge.skill_runtime import installed_manifest

        try:
            installed_manifest(self._home, skill)  # refuses a skill not (validly) installed
            state = self._runtime_factory().healthy_runtime(skill)
        except PaosError as exc:
            raise _skill_failure(skill, exc) from exc
        url = str(state.gateway_url).rstrip("/")
        now = self._clock()
        identity = getattr(state, "gateway_identity", None)
        return _Checked(
            str(getattr(state, "runtime_instance_id", "")),
            url,
            dict(identity) if isinstance(identity, Mapping) else None,
            now + HEALTH_CHECK_LIFETIME_S,
            now + FULL_CHECK_LIFETIME_S,
        )
