"""Ctrl-C or SIGTERM on ``task run`` cancels and finalizes the task it opened, says so in
one line, and exits 130 / 143; a second signal cuts the bounded wait short and still
leaves the task finalized (what is not known is recorded ``unknown``), or says it could not.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from doraforge.cli.tools_call import Interrupts
from doraforge.paos.errors import PaosError
from doraforge.paos.finalize import cancel_task, end_cancelled, request_ends
from doraforge.paos.store.models import LIVE_RECORD_STATES
from doraforge.paos.tasks import TaskService

#: How long the cancelled calls may take to report their end before the task is ended
#: with their outcome ``unknown`` (a second Ctrl-C stops waiting at once).
CLEANUP_S = 20.0
#: How long a second signal still lets the cancel requests take to be sent.
REQUEST_S = 2.0
REASON = "interrupted"

type Run = Callable[[Callable[[str], None]], Awaitable[dict[str, Any]]]
type Say = Callable[[str], None]


@dataclass
class Interrupted(Exception):
    """The run was stopped by a signal; ``described`` is its task as it ended (``None``
    when no task had been opened, or when it could not be finalized: ``problem`` says)."""

    signum: int
    task_id: str | None = None
    described: dict[str, Any] | None = None
    running: list[str] = field(default_factory=list)
    forced: bool = False
    problem: str | None = None

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


async def run_interruptible(service: TaskService, run: Run, say: Say) -> dict[str, Any]:
    """``run(opened)``'s answer, or :class:`Interrupted` once SIGINT/SIGTERM stopped it
    and the task it had opened (``opened(task_id)``) was cancelled and finalized."""
    loop = asyncio.get_running_loop()
    signals = Interrupts()
    signals.install(loop)
    opened: list[str] = []
    try:
        runner = asyncio.ensure_future(run(opened.append))
        waiter = asyncio.ensure_future(signals.requested.wait())
        await asyncio.wait({runner, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if not signals.requested.is_set():
            return runner.result()
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await runner  # whatever it was doing, it stops here; the task is ended below
        raise await _ended(service, opened[0] if opened else None, signals, say)
    finally:
        signals.remove(loop)


async def _ended(
    service: TaskService, task_id: str | None, signals: Interrupts, say: Say
) -> Interrupted:
    """Cancel and finalize ``task_id`` within :data:`CLEANUP_S`; a second signal ends it
    at once with whatever was still running recorded ``unknown``."""
    signum = int(signals.signum or signal.SIGINT)
    if task_id is None:
        return Interrupted(signum)
    running = [r.tool_id for r in service.store.records(task_id) if r.state in LIVE_RECORD_STATES]
    stopped = Interrupted(signum, task_id, running=running)
    if not service.store.task(task_id).terminal:  # else it ended as the signal came
        what = f"the running {', '.join(running)} to stop" if running else "the task to end"
        say(
            f"cancelling task {task_id}: waiting up to {CLEANUP_S:.0f} s for {what} "
            "(Ctrl-C again to stop waiting)"
        )
        try:
            stopped.forced = await _cancelled(service, task_id, signals)
        except PaosError as exc:
            stopped.problem = exc.message
    if service.store.task(task_id).terminal:  # however it came to end
        stopped.described = service.describe(task_id)
    return stopped


async def _cancelled(service: TaskService, task_id: str, signals: Interrupts) -> bool:
    """Cancel the task, bounded; on a second signal end it at once. Whether it was forced."""
    cleanup = asyncio.ensure_future(
        cancel_task(service, task_id, settle_timeout_s=CLEANUP_S, reason=REASON)
    )
    second = asyncio.ensure_future(signals.abandoned.wait())
    await asyncio.wait({cleanup, second}, return_when=asyncio.FIRST_COMPLETED)
    second.cancel()
    if cleanup.done():
        cleanup.result()  # its error, if it failed
        return False
    cleanup.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await cleanup
    await _at_once(service, task_id)
    return True


async def _at_once(service: TaskService, task_id: str) -> None:
    """End the task now (a second signal): the cancels are still sent (bounded by
    :data:`REQUEST_S`), nothing more is awaited, and what still runs is ``unknown``."""
    if service.store.task(task_id).terminal:
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(REQUEST_S):
            await request_ends(service, task_id)
    end_cancelled(service, task_id, reason=REASON)


def lines(stopped: Interrupted, skill: str) -> list[str]:
    """What the operator is told: how the task ended, what it was doing, what next."""
    name = signal.Signals(stopped.signum).name
    if stopped.task_id is None:
        return [f"interrupted by {name} before a task was opened; nothing was started"]
    if stopped.described is None:
        return [
            f"task {stopped.task_id} could NOT be finalized after {name} ({stopped.problem}); "
            f"end it with `doraforge task cancel {stopped.task_id}` before the next run"
        ]
    task = stopped.described["task"]
    how = f"interrupted by {name}"
    if stopped.forced:
        how = f"interrupted twice by {name}, its end not awaited"
    outcomes = {r["tool_id"]: r["state"] for r in stopped.described["records"]}
    ran = [f"the running {tool} {_outcome(outcomes.get(tool))}" for tool in stopped.running]
    what = "; ".join(ran) if ran else "no Action was running"
    unknown = any(outcomes.get(tool) == "unknown" for tool in stopped.running)
    advice = (
        f"check the cell before the next run (`doraforge task get {stopped.task_id}`)"
        if unknown
        else f"`doraforge task run {skill}` starts the next task"
    )
    return [f"task {stopped.task_id} {task['state']} ({how}); {what}; {advice}"]


def _outcome(state: str | None) -> str:
    if state in (None, "unknown"):
        return "has an unknown outcome (the provider did not confirm it stopped)"
    return f"was {state}" if state != "completed" else "had completed"
