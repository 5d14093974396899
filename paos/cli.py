"""The ``doraforge`` command line."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from paos.dataflow import Dataflow, dora_environment


def _run(args: argparse.Namespace) -> int:
    env = dora_environment(os.environ)
    dataflow = Dataflow(args.dataflow, env)
    print(f"doraforge: running {dataflow.path} (Ctrl-C stops it)", file=sys.stderr)
    dataflow.start()

    def forward(signum: int, _frame: object) -> None:
        print(f"\ndoraforge: stopping dataflow ({signal.Signals(signum).name})", file=sys.stderr)
        dataflow.stop()

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    return dataflow.wait()


def _demo(args: argparse.Namespace) -> int:
    if args.mock:
        from paos.demo_mock import run_mock_demo

        return run_mock_demo(port=args.port)
    from paos.demo import run_demo

    return run_demo(port=args.port, out_dir=args.out, seed=args.seed)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``doraforge``."""
    parser = argparse.ArgumentParser(prog="doraforge", description="doraforge robot tool stack")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a development dataflow in the foreground")
    run.add_argument("dataflow", help="a dataflow YAML file, e.g. dataflows/mock.yml")
    run.set_defaults(handler=_run)
    demo = commands.add_parser("demo", help="run the main job end to end on embedded defaults")
    demo.add_argument("--port", type=int, default=None, help="Gateway HTTP port (default: free)")
    demo.add_argument("--mock", action="store_true", help="the Tool API tour on the mock provider")
    demo.add_argument("--seed", type=int, default=0, help="scenario seed (cube placement)")
    demo.add_argument("--out", type=Path, default=None, help="where to save the frames")
    demo.set_defaults(handler=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``doraforge`` console script."""
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
