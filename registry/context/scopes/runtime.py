"""The ``runtime`` scope: each recorded skill runtime's state and its Gateway's identity.

Each item: the cell (skill and the runtime instance of its current start), version,
profile, lifecycle state, times, the error code of a
failure, and the Gateway's identity (its id, instance id, catalog revision and loopback
port), live-checked by the home's RuntimeManager. Never the Gateway token, its file, the
launch copy's or any other path, nor an error's message (which may quote them).

A runtime whose live check could not be made, or whose Gateway did not answer with the
identity recorded at start, is reported from its recorded file and the snapshot says
``stale``: what it shows was true at start, not now.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from doraforge.paos.errors import PaosError
from doraforge.paos.home import PaosHome
from doraforge.registry.context.scopes._common import bounded, scan_limit
from doraforge.registry.context.source import (
    MAX_SCAN_ITEMS,
    ContextItem,
    Scalar,
    Scope,
    Snapshot,
    SourceError,
    opaque_ref,
)

if TYPE_CHECKING:
    from doraforge.skill_runtime import RuntimeState

ROUTE = "/console/#/skills"
#: The live check's finding that the Gateway did not answer as recorded at start.
UNHEALTHY = "SKILL_RUNTIME_UNHEALTHY"


class Runtime(Protocol):
    """The part of the Skill Runtime's ``RuntimeManager`` this scope reads."""

    def status(self, name: str) -> RuntimeState | None:
        """The recorded state of ``name`` checked against reality, or ``None``."""
        ...


type RuntimeFactory = Callable[[], Runtime]


def _port(url: str) -> int | None:
    try:
        return urlsplit(url).port
    except ValueError:
        return None


def _identity(state: RuntimeState) -> dict[str, Scalar]:
    identity = state.gateway_identity or {}
    revision = identity.get("catalog_revision")
    return {
        "gateway_id": str(identity["gateway_id"]) if "gateway_id" in identity else None,
        "gateway_instance_id": (
            str(identity["instance_id"]) if "instance_id" in identity else None
        ),
        "gateway_catalog_revision": str(revision) if revision is not None else None,
        "gateway_port": _port(state.gateway_url),
    }


def _item(state: RuntimeState, live_check: str) -> ContextItem:
    error_code = state.error.code if state.error is not None else None
    return ContextItem(
        ref=opaque_ref("runtime", state.name),
        scope="runtime",
        kind="runtime",
        label=f"{state.name} {state.version} runtime: {state.state}"
        + (f" ({error_code})" if error_code else ""),
        route=ROUTE,
        metadata={
            "skill": state.name,
            "runtime_instance_id": state.runtime_instance_id,
            "version": state.version,
            "profile": state.profile,
            "state": state.state,
            "live_check": live_check,
            "error_code": error_code,
            "started_at": state.started_at.isoformat(),
            "updated_at": state.updated_at.isoformat(),
            **_identity(state),
        },
    )


def _checked(runtime: Runtime, recorded: RuntimeState) -> tuple[ContextItem, bool]:
    """The item of one runtime and whether it is stale (only the recorded file)."""
    try:
        live = runtime.status(recorded.name)
    except PaosError as exc:
        return _item(recorded, f"failed: {exc.code}"), True
    if live is None:  # removed between the listing and the check
        return _item(recorded, "failed: SKILL_NOT_RUNNING"), True
    if live.error is not None and live.error.code == UNHEALTHY:
        return _item(live, f"failed: {UNHEALTHY}"), True
    return _item(live, "ok"), False


def _read(home: PaosHome, runtime_factory: RuntimeFactory, limit: int) -> Snapshot:
    from doraforge.skill_runtime import all_states

    try:
        kept, more = bounded(all_states(home.runtime_dir), limit)
        runtime = runtime_factory() if kept else None
    except (OSError, PaosError) as exc:
        raise SourceError(
            "CONTEXT_RUNTIME_UNAVAILABLE",
            "the runtime states cannot be read; check them with `doraforge skill status`",
        ) from exc
    checked = [_checked(runtime, state) for state in kept] if runtime is not None else []
    stale = any(is_stale for _, is_stale in checked)
    return Snapshot(
        tuple(item for item, _ in checked),
        source_truncated=more,
        status="stale" if stale else "fresh",
    )


class RuntimeSource:
    """The runtime scope of ``home``, live-checked through ``runtime_factory`` (the home's
    RuntimeManager); raises :class:`SourceError` ``CONTEXT_RUNTIME_UNAVAILABLE`` when the
    runtime folder cannot be read."""

    def __init__(self, home: PaosHome, runtime_factory: RuntimeFactory) -> None:
        self._home = home
        self._runtime_factory = runtime_factory

    @property
    def scope(self) -> Scope:
        return "runtime"

    async def snapshot(self, limit: int = MAX_SCAN_ITEMS) -> Snapshot:
        return await asyncio.to_thread(_read, self._home, self._runtime_factory, scan_limit(limit))
