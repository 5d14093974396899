"""Command line of the robot providers: the runner flags plus ``--profile PATH``.

Only a node's ``main()`` calls into this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib.resources import files
from pathlib import Path

from doraforge.nodes.cli import build_parser, configure_logging, options_from_args
from doraforge.nodes.definition import RunnerOptions
from doraforge.nodes.robot.profile import ProfileError, RobotProfile, load_profile

#: The shipped simulated arm's profile.
DEFAULT_PROFILE = Path(str(files("doraforge.nodes.robot"))) / "profiles" / "sim_arm.yml"


def parse_robot_node(
    description: str, argv: Sequence[str] | None, environ: Mapping[str, str]
) -> tuple[RunnerOptions, RobotProfile]:
    """Parse argv, configure logging, load the profile; exits 2 on bad flags or profile."""
    parser = build_parser(description, environ)
    parser.add_argument(
        "--profile", type=Path, default=DEFAULT_PROFILE, help="robot profile YAML file"
    )
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    try:
        return options_from_args(args), load_profile(args.profile)
    except (TypeError, ValueError, ProfileError) as exc:
        parser.error(str(exc))
        raise  # unreachable: parser.error exits
