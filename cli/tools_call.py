"""``doraforge tools call TOOL --args JSON``: run any tool of a running skill or a Gateway.

A Query answers at once. An Action or Session is admitted, then its status is read every
:data:`POLL_S` (a bounded wait each time) and each change of phase or progress is printed.
Ctrl-C (or SIGTERM) *requests* a cancel (Action) or stop (Session) and keeps reading until
the Gateway reports a terminal phase, which is printed; a second one stops waiting at
once, leaving the outcome to ``GET /invocations/{id}``.

Exit status, from the terminal phase: 0 ``completed`` (or a Query that succeeded, or a
Session stopped on request), 1 ``failed`` (or a Query that did not succeed, or the Gateway
refused the call), 2 bad usage (``--args`` not a JSON object), 3 ``cancelled``, 4
``unknown`` (the outcome is not known, also when the Gateway stops answering while the
invocation runs: never read as failed), 130 interrupted without
waiting for the terminal phase.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import uuid
from collections.abc import Callable
from typing import Any

from doraforge.cli.context import Context
from doraforge.paos.errors import ForgeTimeout, ForgeTransportError

POLL_S = 0.2
#: Exit status of each terminal phase; a phase not listed (none today) is ``unknown``'s.
EXIT_CODES = {"completed": 0, "stopped": 0, "failed": 1, "cancelled": 3, "unknown": 4}
EXIT_USAGE = 2
EXIT_ABANDONED = 130
EPILOG = (
    "exit status: 0 completed (a Query that succeeded, a Session stopped on request), "
    "1 failed, 2 bad --args, 3 cancelled, 4 unknown (outcome not known), "
    "130 interrupted twice (the terminal phase was not awaited). Ctrl-C requests a cancel "
    "(Action) or stop (Session) and waits for the terminal phase."
)

type Say = Callable[[str], None]


class ArgumentsRefused(ValueError):
    """``--args`` is not a JSON object (the message says why)."""


class Abandoned(Exception):
    """A second interrupt: stop waiting for the terminal phase."""


class OutcomeUnknown(Exception):
    """The Gateway stopped answering while an admitted invocation ran: its outcome is
    not known here (never reported as failed)."""

    def __init__(self, invocation_id: str, cause: Exception) -> None:
        super().__init__(f"{invocation_id}: {cause}")
        self.invocation_id = invocation_id


def parse_arguments(text: str) -> dict[str, Any]:
    """The ``--args`` object; raises :class:`ArgumentsRefused` for anything else."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ArgumentsRefused(f"--args is not JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise ArgumentsRefused(f"--args must be a JSON object, not {type(value).__name__}")
    return value


class Interrupts:
    """Counts SIGINT/SIGTERM on the running loop: the first requests a cancel, the second
    abandons the wait."""

    def __init__(self) -> None:
        self.requested = asyncio.Event()
        self.abandoned = asyncio.Event()
        #: The first signal received (``None`` until one arrives).
        self.signum: signal.Signals | None = None
        self._previous: dict[signal.Signals, Any] = {}

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.getsignal(signum)
            loop.add_signal_handler(signum, self._on_signal, signum)

    def remove(self, loop: asyncio.AbstractEventLoop) -> None:
        """Give the signals back to the handlers they had before :meth:`install` (the
        loop alone would leave SIGTERM at its default, which skips every cleanup)."""
        for signum, previous in self._previous.items():
            loop.remove_signal_handler(signum)
            if previous is not None:
                signal.signal(signum, previous)

    def _on_signal(self, signum: signal.Signals = signal.SIGINT) -> None:
        if self.requested.is_set():
            self.abandoned.set()
        self.signum = self.signum or signum
        self.requested.set()

    async def pause(self, seconds: float) -> None:
        """Wait up to ``seconds``, less when an interrupt arrives; raise :class:`Abandoned`
        on the second."""
        waiting = self.abandoned if self.requested.is_set() else self.requested
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(waiting.wait(), timeout=seconds)
        if self.abandoned.is_set():
            raise Abandoned


async def call_tool(
    client: Any, tool_id: str, arguments: dict[str, Any], say: Say, interrupts: Interrupts
) -> tuple[int, dict[str, Any]]:
    """Run ``tool_id`` to its end; the exit status and what to print as data."""
    spec, _ = await client.tool_spec(tool_id)
    caller_id = f"doraforge-cli:{uuid.uuid4().hex}"
    if spec["semantics"] == "query":
        data = await client.query(
            spec["endpoint_id"], spec["operation"], arguments, caller_id=caller_id
        )
        status = (data.get("response") or {}).get("result", {}).get("status")
        return (0 if status == "succeeded" else 1), data
    admitted = await client.invoke(tool_id, arguments, caller_id=caller_id)
    invocation_id = str(admitted["invocation_id"])
    say(f"{tool_id}: {spec['semantics']} {invocation_id} admitted ({admitted.get('phase')})")
    try:
        final = await _until_terminal(client, invocation_id, spec["semantics"], say, interrupts)
    except (ForgeTransportError, ForgeTimeout) as exc:
        raise OutcomeUnknown(invocation_id, exc) from exc
    return EXIT_CODES.get(str(final["phase"]), EXIT_CODES["unknown"]), final


async def _until_terminal(
    client: Any, invocation_id: str, semantics: str, say: Say, interrupts: Interrupts
) -> dict[str, Any]:
    shown: tuple[Any, ...] = ()
    asked = False
    while True:
        if interrupts.requested.is_set() and not asked:
            asked = True
            await _request_end(client, invocation_id, semantics, say)
        status = await client.invocation(invocation_id)
        seen = (status.get("phase"), _fraction(status))
        if seen != shown:
            shown = seen
            say(_progress_line(status))
        if status.get("terminal"):
            return dict(status)
        await interrupts.pause(POLL_S)


async def _request_end(client: Any, invocation_id: str, semantics: str, say: Say) -> None:
    command = "stop" if semantics == "session" else "cancel"
    answer = await (client.stop if command == "stop" else client.cancel)(invocation_id)
    say(
        f"{command} requested ({answer.get('status')}); waiting for the terminal phase "
        "(Ctrl-C again to stop waiting)"
    )


def _fraction(status: dict[str, Any]) -> float | None:
    progress = status.get("progress")
    fraction = progress.get("fraction") if isinstance(progress, dict) else None
    return float(fraction) if isinstance(fraction, int | float) else None


def _progress_line(status: dict[str, Any]) -> str:
    fraction = _fraction(status)
    shown = "" if fraction is None else f" {fraction:4.0%}"
    ended = " (terminal)" if status.get("terminal") else ""
    return f"  phase {status.get('phase')}{shown}{ended}"


def register(tools: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``tools call`` to the ``tools`` subcommands; returns its parser for the
    ``--skill``/``--gateway`` group the other tools commands share."""
    command = tools.add_parser(
        "call",
        help="run a Query, Action or Session (Ctrl-C requests cancel/stop)",
        description="Run TOOL with --args. A Query answers; an Action or Session shows its "
        "phase and progress until it ends.",
        epilog=EPILOG,
    )
    command.add_argument("tool_id")
    command.add_argument("--args", default="{}", help="the tool's arguments as a JSON object")
    command.set_defaults(handler=run_call)
    return command


def run_call(ctx: Context, args: argparse.Namespace) -> int:
    """The ``tools call`` handler (see the module docstring for the exit status)."""
    from doraforge.cli.task_commands import gateway_client

    try:
        arguments = parse_arguments(args.args)
    except ArgumentsRefused as exc:
        ctx.out.fail(f"TOOLS_ARGS_INVALID: {exc}")
        return EXIT_USAGE

    async def work(client: Any) -> tuple[int, dict[str, Any]]:
        loop = asyncio.get_running_loop()
        interrupts = Interrupts()
        interrupts.install(loop)
        try:
            return await call_tool(client, args.tool_id, arguments, ctx.out.say, interrupts)
        finally:
            interrupts.remove(loop)

    try:
        outcome: tuple[int, dict[str, Any]] = gateway_client(ctx, args, work)
    except Abandoned:
        ctx.out.fail("INTERRUPTED: stopped waiting; the invocation's outcome is not known here")
        return EXIT_ABANDONED
    except OutcomeUnknown as exc:
        ctx.out.fail(
            f"TOOL_OUTCOME_UNKNOWN: the Gateway stopped answering while "
            f"{exc.invocation_id} ran; read GET /invocations/{exc.invocation_id} once it is back"
        )
        return EXIT_CODES["unknown"]
    code, data = outcome
    ctx.out.data(data)
    return code
