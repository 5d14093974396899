"""``doraforge eval agent-context``: the agent-context contract suite, run as a black box.

Every case of the fixture (default: the suite shipped in
``doraforge/registry/context/fixtures/agent_context.yml``; ``--fixture PATH`` for another
one with the same schema) runs against a fresh in-memory contract over sanitized fake
sources, never the home or a running robot. One JSON report goes to stdout whatever the
outcome. The exit status is 0 when fail + error is at most ``--failure-threshold``
(default 0), 1 when it is over (with one line on stderr), and 2 when the fixture cannot be
read or does not fit the schema (one line on stderr naming the file, line and field).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from doraforge.cli.context import Context

#: The exit status of a fixture that cannot be used (as argparse's bad usage).
FIXTURE_UNUSABLE = 2


def _threshold(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of cases (0 or more)")
    return value


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``eval`` and its one suite, ``agent-context``."""
    evals = commands.add_parser(
        "eval",
        help="run a contract eval suite",
        description="Run a declarative contract suite and print its JSON report.",
    )
    suites = evals.add_subparsers(dest="suite", required=True)
    agent_context = suites.add_parser(
        "agent-context",
        help="the agent-context (MCP context tools) contract suite",
        description="Run the agent-context contract suite against fresh in-memory contracts "
        "over fake sources; print one JSON report; exit 1 when fail + error exceeds "
        "--failure-threshold, 2 when the fixture is unusable.",
    )
    agent_context.add_argument(
        "--fixture",
        type=Path,
        default=None,
        metavar="PATH",
        help="a fixture suite (YAML) to run instead of the shipped one",
    )
    agent_context.add_argument(
        "--failure-threshold",
        type=_threshold,
        default=0,
        metavar="N",
        help="how many failed or errored cases are tolerated (default 0)",
    )
    agent_context.set_defaults(handler=_agent_context)


def _agent_context(ctx: Context, args: argparse.Namespace) -> int:
    from doraforge.registry.context.eval import FixtureError, load_fixture, report, run_suite

    try:
        loaded = load_fixture(args.fixture)
    except FixtureError as exc:
        ctx.out.fail(f"{exc.code}: {exc.message}")
        return FIXTURE_UNUSABLE
    document = report(loaded, asyncio.run(run_suite(loaded)), args.failure_threshold)
    print(json.dumps(document, indent=2, ensure_ascii=False))
    if document["passed"]:
        return 0
    ctx.out.fail(_over_threshold(document))
    return 1


def _over_threshold(document: dict[str, Any]) -> str:
    summary = document["summary"]
    first = next(c for c in document["cases"] if c["outcome"] in ("fail", "error"))
    return (
        f"EVAL_FAILED: {summary['fail']} failed and {summary['error']} errored of "
        f"{summary['total']} cases (threshold {document['threshold']}); first: {first['id']} "
        f"at {first['source']}; the JSON report on stdout names every case"
    )
