"""Command line of the robot providers: the runner flags plus ``--profile NAME_OR_PATH``
(a shipped robot's name such as ``openarm``, or a profile file) and ``--arm NAME`` (which
arm of a multi-arm profile this node drives; default: the primary arm).

Only a node's ``main()`` calls into this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib.resources import files
from pathlib import Path

from doraforge.nodes.cli import build_parser, configure_logging, options_from_args
from doraforge.nodes.definition import RunnerOptions
from doraforge.nodes.robot.profile import ProfileError, RobotProfile, load_profile, profile_path

#: The shipped simulated arm's profile.
DEFAULT_PROFILE = Path(str(files("doraforge.nodes.robot"))) / "profiles" / "sim_arm.yml"


def parse_robot_node(
    description: str, argv: Sequence[str] | None, environ: Mapping[str, str]
) -> tuple[RunnerOptions, RobotProfile]:
    """Parse argv, configure logging, load the profile; exits 2 on bad flags or profile."""
    parser = build_parser(description, environ)
    parser.add_argument(
        "--profile",
        default=str(DEFAULT_PROFILE),
        help="robot profile: a shipped name (sim_arm, openarm) or a YAML file",
    )
    parser.add_argument("--arm", default=None, help="arm of a multi-arm profile (default: primary)")
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    try:
        profile = load_profile(profile_path(args.profile)).for_arm(args.arm)
        return options_from_args(args), profile
    except (TypeError, ValueError, ProfileError) as exc:
        parser.error(str(exc))
        raise  # unreachable: parser.error exits
