"""The Skills routes: installed skills, their runtime state and reason, start, stop, logs.

Start and stop go through the home's ``RuntimeManager`` exactly as ``doraforge skill
start|stop`` do, so the same guards answer: a stop while a task is bound or an invocation
is live is refused with ``SKILL_RUNTIME_IN_USE`` and its blockers, and only a second
request with ``force`` (which the page sends after the operator confirms) stops anyway,
audited by the runtime. Lifecycle commands block, so they run in a worker thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi.responses import JSONResponse
from starlette.requests import Request

from doraforge.console.errors import translated
from doraforge.console.params import body_object, only_params, query_int
from doraforge.console.state import Console, console_of
from doraforge.paos.errors import PaosError
from doraforge.registry.errors import InvalidRequest

MAX_LOG_LINES = 2000


def _runtime_row(console: Console, name: str) -> dict[str, Any] | None:
    state = console.runtime().status(name)
    return None if state is None else state.model_dump(mode="json")


def _running_gateway(skill: Any, runtime: dict[str, Any] | None) -> str | None:
    """Where the skill's Gateway listens while it runs (its runtime state, so a start on
    another port is followed); ``None`` when it does not run, also when the live check
    just found it lost."""
    if runtime is None or runtime.get("state") != skill.state:
        return None
    url: str | None = skill.running_gateway_url
    return url


def _skill_rows(console: Console) -> list[dict[str, Any]]:
    from doraforge.skill_runtime import installed_manifest, installed_skills

    rows = []
    for skill in installed_skills(console.home):
        row: dict[str, Any] = {"name": skill.name, "version": skill.version, "profiles": []}
        if skill.error_code is not None:
            row["error"] = {"code": skill.error_code}
        else:  # the profiles a start may choose, as `skill start --profile` offers them
            row["profiles"] = sorted(installed_manifest(console.home, skill.name).profiles)
        try:
            row["runtime"] = _runtime_row(console, skill.name)
        except PaosError as exc:
            row["runtime"] = None
            row["runtime_error"] = exc.to_payload()
        row["gateway_url"] = _running_gateway(skill, row["runtime"])
        rows.append(row)
    return rows


async def _blocking(work: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return await asyncio.to_thread(work, *args, **kwargs)
    except PaosError as exc:
        raise translated(exc) from exc


async def skills(request: Request) -> JSONResponse:
    """Every installed skill, its version and its live-checked runtime state."""
    only_params(request, ())
    rows = await _blocking(_skill_rows, console_of(request))
    return JSONResponse({"ok": True, "skills": rows})


async def start(name: str, request: Request) -> JSONResponse:
    profile = body_object(request, ("profile",)).get("profile")
    if profile is not None and not isinstance(profile, str):
        raise InvalidRequest("CONSOLE_INVALID_BODY", "profile must be a string")
    state = await _blocking(console_of(request).runtime().start, name, profile)
    return JSONResponse({"ok": True, "runtime": state.model_dump(mode="json")})


async def stop(name: str, request: Request) -> JSONResponse:
    force = body_object(request, ("force",)).get("force", False)
    if not isinstance(force, bool):
        raise InvalidRequest("CONSOLE_INVALID_BODY", "force must be true or false")
    state = await _blocking(console_of(request).runtime().stop, name, force=force)
    return JSONResponse({"ok": True, "runtime": state.model_dump(mode="json")})


async def logs(name: str, request: Request) -> JSONResponse:
    only_params(request, ("lines",))
    lines = query_int(request, "lines", 200, 1, MAX_LOG_LINES)
    text = await _blocking(console_of(request).runtime().logs, name, lines)
    return JSONResponse({"ok": True, "name": name, "text": text})
