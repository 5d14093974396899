"""The ``doraforge`` command line: skills, tasks, tools, dataflows and the demo.

Global options: ``--home DIR`` (else ``$DORAFORGE_HOME``, else ``~/.doraforge``) and
``--json`` for scripts. Failures print one line on stderr and exit non-zero.

Gateway tokens: a skill started here has its own per-start token, which every command
presents to it. For other Gateways the operator's token comes from
``$DORAFORGE_GATEWAY_TOKEN`` (a value) or ``$DORAFORGE_GATEWAY_TOKEN_FILE`` (a 0600
file); ``doraforge run`` hands the same token to the dataflow's Gateway.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from doraforge.cli import serve_command, skill_commands, task_commands
from doraforge.cli.context import Context
from doraforge.paos.errors import PaosError
from doraforge.paos.gateway_auth import dataflow_auth
from doraforge.skill_runtime.dora_run import Dataflow, dora_environment


def _run(ctx: Context, args: argparse.Namespace) -> int:
    with dataflow_auth(ctx.environ) as auth:
        dataflow = Dataflow(args.dataflow, dora_environment(auth.environment(ctx.environ)))
        ctx.out.say(f"running {dataflow.path} (Ctrl-C stops it)")
        ctx.out.say(f"Gateway authentication: {auth.mode}")
        dataflow.start()

        def forward(signum: int, _frame: object) -> None:
            ctx.out.say(f"stopping the dataflow ({signal.Signals(signum).name})")
            dataflow.stop()

        signal.signal(signal.SIGINT, forward)
        signal.signal(signal.SIGTERM, forward)
        # The token file (for a $DORAFORGE_GATEWAY_TOKEN value) lives until Dora exits.
        return dataflow.wait()


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
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run",
        help="run a development dataflow in the foreground",
        description="Run a dataflow under `dora run`. Its Gateway requires the bearer token "
        "in $DORAFORGE_GATEWAY_TOKEN or the file $DORAFORGE_GATEWAY_TOKEN_FILE when set.",
    )
    run.add_argument("dataflow", help="a dataflow YAML file, e.g. dataflows/sim.yml")
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
