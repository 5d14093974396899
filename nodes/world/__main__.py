"""Entry point of the world node: ``python -m doraforge.nodes.world [--unpaced] [--seed N]
[--task NAME] [--profile NAME_OR_PATH] ...``.

Without ``--profile`` the world is the shipped sim_arm cell (``sim/assets/cell.xml``); with
one (a shipped robot's name such as ``openarm``, or a profile file) the cell is composed from
doraforge's furniture and that robot's model at its mount (``nodes/world/layout.py``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from doraforge.nodes.cli import build_parser, configure_logging, options_from_args
from doraforge.nodes.definition import EndpointDefinition
from doraforge.nodes.robot.profile import ProfileError, RobotProfile, load_profile, profile_path
from doraforge.nodes.runner import run_endpoint
from doraforge.nodes.world.dataplane import WorldDataPlane, arm_command_inputs
from doraforge.nodes.world.endpoint import DESCRIPTOR, ResetAction, SceneStateQuery, world_status
from doraforge.nodes.world.layout import build_world
from doraforge.nodes.world.simulation import Simulation, SimulationOptions
from doraforge.sim.tasks import DEFAULT_TASK, TASKS

if TYPE_CHECKING:  # importing these loads MuJoCo, which must wait for gl_backend()
    from doraforge.sim.environment import Environment
    from doraforge.sim.render import Cameras
    from doraforge.sim.world import World

log = logging.getLogger("doraforge.nodes.world")


def _parser() -> argparse.ArgumentParser:
    parser = build_parser("doraforge simulated world (MuJoCo)", os.environ)
    parser.add_argument("--unpaced", action="store_true", help="run faster than real time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--task", choices=TASKS.names, default=DEFAULT_TASK)
    parser.add_argument("--state-hz", type=float, default=100.0)
    parser.add_argument("--camera-hz", type=float, default=15.0)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--shadows", action="store_true", help="costly on the CPU renderer")
    parser.add_argument(
        "--profile",
        default=None,
        help="robot profile: a shipped name (sim_arm, openarm) or a YAML path "
        "(default: the built-in sim_arm cell)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the world node until Dora stops it."""
    parser = _parser()
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    from doraforge.sim.render import gl_backend

    backend = gl_backend(os.environ)
    log.info("rendering with MUJOCO_GL=%s", backend)
    # After the backend: a model package (openarm_mujoco) may import mujoco on load.
    profile = _profile(parser, args.profile)
    options = SimulationOptions(
        paced=not (args.unpaced or os.environ.get("DORAFORGE_SIM_UNPACED") == "1"),
        state_hz=args.state_hz,
        camera_hz=float(os.environ.get("DORAFORGE_SIM_CAMERA_HZ", args.camera_hz)),
        width=args.width,
        height=args.height,
        seed=int(os.environ.get("DORAFORGE_SIM_SEED", args.seed)),
        task=args.task,
        shadows=args.shadows,
    )
    simulation = Simulation(
        _environment_factory(options, profile), _cameras_factory(options), options
    )
    definition = EndpointDefinition(
        descriptor=DESCRIPTOR,
        operations={"scene_state": SceneStateQuery(simulation), "reset": ResetAction(simulation)},
        status=lambda: world_status(simulation),
        data_plane=WorldDataPlane(
            simulation, arm_command_inputs([] if profile is None else list(profile.arms))
        ),
    )
    return run_endpoint(definition, options=options_from_args(args))


def _profile(parser: argparse.ArgumentParser, name: str | None) -> RobotProfile | None:
    if name is None:
        return None
    try:
        return load_profile(profile_path(name))
    except ProfileError as exc:
        parser.error(f"{exc.code}: {exc}")
        raise  # unreachable: parser.error exits


def _environment_factory(
    options: SimulationOptions, profile: RobotProfile | None
) -> Callable[[], Environment]:
    def make() -> Environment:
        from doraforge.sim.environment import Environment
        from doraforge.sim.world import World

        if profile is None:
            world = World(shadows=options.shadows)
        else:
            world = build_world(profile, shadows=options.shadows)
        return Environment(world, TASKS.create(options.task), seed=options.seed)

    return make


def _cameras_factory(options: SimulationOptions) -> Callable[[World], Cameras]:
    def make(world: World) -> Cameras:
        from doraforge.sim.render import Cameras

        return Cameras(
            world.model,
            height=options.height,
            width=options.width,
            aliases=world.layout.cameras,
        )

    return make


if __name__ == "__main__":
    sys.exit(main())
