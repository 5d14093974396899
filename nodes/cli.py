"""Command-line handling shared by provider node entry points.

Only a node's ``main()`` calls into this module: it turns argv (and the one environment
variable it is given) into :class:`~nodes.definition.RunnerOptions`.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping, Sequence

from doraforge.nodes.definition import RunnerOptions

LOG_LEVEL_ENV = "DORAFORGE_LOG_LEVEL"


def build_parser(description: str, environ: Mapping[str, str]) -> argparse.ArgumentParser:
    """Return a parser for the runner flags; ``environ`` supplies the log-level default."""
    defaults = RunnerOptions()
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--request-input", default=defaults.request_input)
    parser.add_argument("--response-output", default=defaults.response_output)
    parser.add_argument("--register-interval-s", type=float, default=defaults.register_interval_s)
    parser.add_argument("--status-interval-s", type=float, default=defaults.status_interval_s)
    parser.add_argument("--no-uvloop", action="store_true", help="use the stdlib event loop")
    parser.add_argument("--log-level", default=environ.get(LOG_LEVEL_ENV, "INFO"))
    return parser


def options_from_args(args: argparse.Namespace) -> RunnerOptions:
    """Build validated runner options from parsed flags (errors name the field)."""
    return RunnerOptions(
        request_input=args.request_input,
        response_output=args.response_output,
        register_interval_s=args.register_interval_s,
        status_interval_s=args.status_interval_s,
        use_uvloop=not args.no_uvloop,
    )


def configure_logging(level: str) -> None:
    """Log to stderr at ``level`` (Dora collects node stderr into its logs)."""
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def parse(
    description: str, argv: Sequence[str] | None, environ: Mapping[str, str]
) -> RunnerOptions:
    """Parse argv, configure logging, and return runner options; exits 2 on bad flags."""
    parser = build_parser(description, environ)
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    try:
        return options_from_args(args)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
        raise  # unreachable: parser.error exits
