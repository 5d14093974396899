"""The ``doraforge`` command line: skills, tasks, tools, dataflows and the demo.

Global options: ``--home DIR`` (else ``$DORAFORGE_HOME``, else ``~/.doraforge``) and
``--json`` for scripts, accepted before or after the subcommand (the one after wins), and
``--version``. ``doraforge completion bash|zsh|tcsh`` prints the shell completion of this
very parser. Failures print one line on stderr and exit non-zero (2 for bad usage).

Gateway tokens: a skill started here has its own per-start token, which every command
presents to it. For other Gateways the operator's token comes from
``$DORAFORGE_GATEWAY_TOKEN`` (a value) or ``$DORAFORGE_GATEWAY_TOKEN_FILE`` (a 0600
file); ``doraforge run`` hands the same token to the dataflow's Gateway.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from doraforge.cli import (
    approvals_command,
    credentials_command,
    doctor_command,
    errors,
    eval_command,
    recipes_command,
    run_command,
    serve_command,
    skill_commands,
    task_commands,
)
from doraforge.cli.context import Context
from doraforge.cli.parser import Parser
from doraforge.skill_runtime.dora_run import exit_on_sigterm
from doraforge.wire.errors import StructuredError

SHELLS = ("bash", "zsh", "tcsh")


def distribution_version() -> str:
    """The installed doraforge distribution's version (``unknown`` when not installed)."""
    try:
        return version("doraforge")
    except PackageNotFoundError:
        return "unknown"


def _demo(ctx: Context, args: argparse.Namespace) -> int:
    if args.mock:
        from doraforge.cli.demos.mock import run_mock_demo

        return run_mock_demo(port=args.port, environ=ctx.environ)
    from doraforge.cli.demos.sim import run_demo

    return run_demo(ctx, out_dir=args.out, seed=args.seed, port=args.port, robot=args.robot)


def _register_demo(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser("demo", help="the main job: pack, install, start, run, verify")
    demo.add_argument("--mock", action="store_true", help="the Tool API tour on the mock")
    demo.add_argument(
        "--port", type=int, default=None, help="the Gateway's port (default: a free one)"
    )
    demo.add_argument("--seed", type=int, default=0, help="scenario seed (cube placement)")
    demo.add_argument(
        "--robot",
        choices=("sim_arm", "openarm"),
        default="sim_arm",
        help="the shipped robot the demo's cell runs (default: sim_arm)",
    )
    demo.add_argument("--out", type=Path, default=Path("out") / "demo", help="report folder")
    demo.set_defaults(handler=_demo)


def _completion(ctx: Context, args: argparse.Namespace) -> int:
    import shtab

    print(shtab.complete(build_parser(), shell=args.shell), end="")
    return 0


def _register_completion(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    completion = commands.add_parser(
        "completion",
        help="print the shell completion script",
        description="Print the completion script for SHELL, generated from this parser. "
        'bash: eval "$(doraforge completion bash)" in ~/.bashrc; zsh: doraforge completion '
        "zsh > a file named _doraforge on $fpath; tcsh: eval `doraforge completion tcsh`.",
    )
    completion.add_argument("shell", choices=SHELLS)
    completion.set_defaults(handler=_completion)


def _add_global_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    # Below the top level the defaults are suppressed: an option given after the
    # subcommand replaces the one given before it, and one not given changes nothing.
    # A subcommand that declares one itself (serve's --home) keeps its own.
    declared = parser._option_string_actions
    if "--home" not in declared:
        parser.add_argument(
            "--home",
            type=Path,
            default=None if top else argparse.SUPPRESS,
            help="PAOS home (default $DORAFORGE_HOME, else ~/.doraforge)",
        )
    if "--json" not in declared:
        parser.add_argument(
            "--json",
            action="store_true",
            default=False if top else argparse.SUPPRESS,
            help="machine-readable output",
        )


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every parser below ``parser``, at any depth (each subcommand and sub-subcommand)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                yield child
                yield from _subparsers(child)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``doraforge``."""
    parser = Parser(prog="doraforge", description="doraforge robot tool stack")
    _add_global_options(parser, top=True)
    parser.add_argument(
        "--version", action="version", version=f"doraforge {distribution_version()}"
    )
    # Typed as the commands' register functions take it; each subparser is a Parser.
    commands: argparse._SubParsersAction[argparse.ArgumentParser] = parser.add_subparsers(
        dest="command", required=True
    )  # type: ignore[assignment]
    run_command.register(commands)
    _register_demo(commands)
    skill_commands.register(commands)
    task_commands.register(commands)
    serve_command.register(commands)
    doctor_command.register(commands)
    approvals_command.register(commands)
    credentials_command.register(commands)
    recipes_command.register(commands)
    eval_command.register(commands)
    _register_completion(commands)
    for child in _subparsers(parser):
        _add_global_options(child, top=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``doraforge`` console script.

    SIGTERM unwinds like Ctrl-C (``KeyboardInterrupt``), so an interrupted ``skill start``
    or demo still stops what it started; ``run``, ``tools call`` and ``task run`` handle
    both signals themselves."""
    args = build_parser().parse_args(argv)
    ctx = Context.from_args(args)
    previous = signal.getsignal(signal.SIGTERM)
    exit_on_sigterm()
    try:
        return int(args.handler(ctx, args))
    except (StructuredError, OSError, ValueError) as exc:  # one line, no traceback
        ctx.out.fail(errors.line(exc, args))
        return 1
    except KeyboardInterrupt:
        ctx.out.fail("INTERRUPTED: stopped by Ctrl-C or SIGTERM")
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
