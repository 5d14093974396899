"""The ``doraforge`` command line: skills, tasks, tools, dataflows and the demo.

Global options: ``--home DIR`` (else ``$DORAFORGE_HOME``, else ``~/.doraforge``),
``--json`` for scripts and ``--version``. Failures print one line on stderr and exit
non-zero.

Gateway tokens: a skill started here has its own per-start token, which every command
presents to it. For other Gateways the operator's token comes from
``$DORAFORGE_GATEWAY_TOKEN`` (a value) or ``$DORAFORGE_GATEWAY_TOKEN_FILE`` (a 0600
file); ``doraforge run`` hands the same token to the dataflow's Gateway.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from doraforge import dataflows
from doraforge.cli import doctor_command, serve_command, skill_commands, task_commands
from doraforge.cli.context import Context
from doraforge.paos.errors import PaosError
from doraforge.paos.gateway_auth import dataflow_auth
from doraforge.skill_runtime import dora_generation
from doraforge.skill_runtime.dora import dora_version
from doraforge.skill_runtime.dora_run import (
    Dataflow,
    dora_binary,
    dora_environment,
    new_run_directory,
    private_copy,
)
from doraforge.skill_runtime.errors import RuntimeStateError

# How long a stopped dataflow may take to exit before its process group is killed.
_STOP_GRACE_S = 15.0


def distribution_version() -> str:
    """The installed doraforge distribution's version (``unknown`` when not installed)."""
    try:
        return version("doraforge")
    except PackageNotFoundError:
        return "unknown"


def _runnable(ctx: Context, spec: str) -> Path:
    # A shipped dataflow may sit in a read-only site-packages, and `dora run` writes its
    # out/ logs next to the file: run a private copy. The user's own files run in place.
    path = dataflows.locate(spec)
    if not dataflows.is_shipped(path):
        return path
    copy = private_copy(path, new_run_directory(ctx.environ, path.stem))
    ctx.out.say(f"the shipped dataflow {path.stem} runs from {copy.parent} (logs in its out/)")
    return copy


class _SignalStop:
    """SIGINT or SIGTERM stops ``dataflow`` gracefully; a second signal, or ``grace_s``
    without an exit, kills its process group.

    The handler only sends signals: it interrupts the main frame inside
    :meth:`Dataflow.wait`, which holds the process's wait lock, so waiting here would
    never see Dora exit.
    """

    def __init__(self, ctx: Context, dataflow: Dataflow, grace_s: float = _STOP_GRACE_S):
        self._ctx, self._dataflow, self._grace_s = ctx, dataflow, grace_s
        self._timer: threading.Timer | None = None

    def install(self) -> None:
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self._timer is not None:
            self._ctx.out.say("killing the dataflow (second signal)")
            self._dataflow.kill()
            return
        self._ctx.out.say(f"stopping the dataflow ({signal.Signals(signum).name})")
        self._dataflow.interrupt()
        self._timer = threading.Timer(self._grace_s, self._dataflow.kill)
        self._timer.daemon = True
        self._timer.start()


def _refuse_other_generation(ctx: Context, path: Path) -> None:
    """Refuse, before ``dora run``, a dataflow of another Dora generation than the CLI's."""
    installed = dora_version(dora_binary(), dora_environment(ctx.environ), minimum=None)
    refused = dora_generation.refusal(path, installed)
    if refused is not None:
        raise RuntimeStateError("SKILL_DORA_GENERATION", refused)


def _run(ctx: Context, args: argparse.Namespace) -> int:
    path = _runnable(ctx, args.dataflow)
    _refuse_other_generation(ctx, path)
    with dataflow_auth(ctx.environ) as auth:
        dataflow = Dataflow(path, dora_environment(auth.environment(ctx.environ)))
        ctx.out.say(f"running {dataflow.path} (Ctrl-C stops it)")
        ctx.out.say(f"Gateway authentication: {auth.mode}")
        dataflow.start()
        stopper = _SignalStop(ctx, dataflow)
        stopper.install()
        try:
            # The token file (for a $DORAFORGE_GATEWAY_TOKEN value) lives until Dora exits.
            return dataflow.wait()
        finally:
            stopper.cancel()


def _demo(ctx: Context, args: argparse.Namespace) -> int:
    if args.mock:
        from doraforge.cli.demos.mock import run_mock_demo

        return run_mock_demo(port=args.port, environ=ctx.environ)
    from doraforge.cli.demos.sim import run_demo

    return run_demo(ctx, out_dir=args.out, seed=args.seed)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``doraforge``."""
    parser = argparse.ArgumentParser(prog="doraforge", description="doraforge robot tool stack")
    parser.add_argument("--home", type=Path, default=None, help="PAOS home (default ~/.doraforge)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--version", action="version", version=f"doraforge {distribution_version()}"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run",
        help="run a development dataflow in the foreground",
        description="Run a dataflow under `dora run`. Its Gateway requires the bearer token "
        "in $DORAFORGE_GATEWAY_TOKEN or the file $DORAFORGE_GATEWAY_TOKEN_FILE when set. "
        "A shipped dataflow runs from a private copy under "
        "$XDG_STATE_HOME/doraforge/runs/ (else ~/.local/state/doraforge/runs/), which keeps "
        "its logs.",
    )
    run.add_argument(
        "dataflow",
        help=f"a dataflow YAML file, or a shipped one: {', '.join(dataflows.names())} "
        "(also spelled dataflows/sim.yml)",
    )
    run.set_defaults(handler=_run)
    demo = commands.add_parser("demo", help="the main job: pack, install, start, run, verify")
    demo.add_argument("--mock", action="store_true", help="the Tool API tour on the mock")
    demo.add_argument("--port", type=int, default=None, help="Gateway port for --mock")
    demo.add_argument("--seed", type=int, default=0, help="scenario seed (cube placement)")
    demo.add_argument("--out", type=Path, default=Path("out") / "demo", help="report folder")
    demo.set_defaults(handler=_demo)
    skill_commands.register(commands)
    task_commands.register(commands)
    serve_command.register(commands)
    doctor_command.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``doraforge`` console script."""
    args = build_parser().parse_args(argv)
    ctx = Context.from_args(args)
    try:
        return int(args.handler(ctx, args))
    except PaosError as exc:
        ctx.out.fail(f"{exc.code}: {exc.message}")
        return 1
    except (OSError, ValueError) as exc:
        ctx.out.fail(str(exc) or type(exc).__name__)
        return 1
    except KeyboardInterrupt:
        ctx.out.fail("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
