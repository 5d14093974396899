"""The ``scene`` camera frames each shipped robot whole: every body of its arms and
grippers, shoulders included, projects inside the image with a margin (MuJoCo's camera
pose and field of view), and the vision verifier still judges its frames of a
pick-and-place."""

from __future__ import annotations

import warnings

import cv2
import numpy as np
import pytest

from doraforge.cli.demos.pick_place import plan_steps
from doraforge.nodes.robot.profile import RobotProfile, load_profile, profile_path
from doraforge.nodes.world.layout import build_world
from doraforge.nodes.world.scene import scene_json
from doraforge.paos.verify.contract import VisionCriterion
from doraforge.paos.verify.vision import VisionConfig, judge
from doraforge.sim.cell import SCENE_CAMERA
from doraforge.sim.environment import Environment
from doraforge.sim.render import DEFAULT_HEIGHT, DEFAULT_WIDTH, Cameras
from doraforge.sim.tasks.pick_place import PickPlace
from doraforge.sim.world import World
from tests.sim.test_robots_pick_place import REST_S, Cell

#: Pixels kept clear at each edge, so a link's body around its origin stays in frame too.
MARGIN_PX = 24
SHIPPED_SIM_ROBOTS = ("sim_arm", "openarm")


@pytest.fixture(scope="module", params=SHIPPED_SIM_ROBOTS)
def cell(request: pytest.FixtureRequest) -> tuple[RobotProfile, World]:
    profile = load_profile(profile_path(request.param))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # MuJoCo's empty-prefix note
        world = build_world(profile)
    world.reset()
    return profile, world


def _joints(profile: RobotProfile) -> list[str]:
    arms = [profile.for_arm(name) for name in profile.arm_names]
    return [j.name for arm in arms for j in arm.arm_joints] + [
        name for arm in arms for name in arm.gripper.joints
    ]


def _robot_bodies(profile: RobotProfile, world: World) -> dict[str, int]:
    """Every body that moves a joint of the robot, and each one it hangs from (its
    shoulders and base), up to the world."""
    model, found = world.model, {}
    for joint in _joints(profile):
        body = int(model.jnt_bodyid[model.joint(joint).id])
        while body != 0:
            found[model.body(body).name] = body
            body = int(model.body_parentid[body])
    return found


def _pixel(world: World, point: np.ndarray) -> tuple[float, float]:
    model, data = world.model, world.data
    camera = model.camera(SCENE_CAMERA).id
    rotation = data.cam_xmat[camera].reshape(3, 3)
    local = rotation.T @ (point - data.cam_xpos[camera])
    assert local[2] < 0, "the point is behind the camera"  # a MuJoCo camera looks along -z
    focal = 0.5 * DEFAULT_HEIGHT / np.tan(np.radians(model.cam_fovy[camera]) / 2)
    return (
        DEFAULT_WIDTH / 2 + focal * local[0] / -local[2],
        DEFAULT_HEIGHT / 2 - focal * local[1] / -local[2],
    )


def test_the_scene_camera_frames_every_body_of_the_robot_at_home(
    cell: tuple[RobotProfile, World],
) -> None:
    profile, world = cell
    bodies = _robot_bodies(profile, world)
    assert len(bodies) >= len(_joints(profile))
    outside = {}
    for name, body in bodies.items():
        u, v = _pixel(world, world.data.xpos[body])
        inside_u = MARGIN_PX <= u <= DEFAULT_WIDTH - MARGIN_PX
        if not (inside_u and MARGIN_PX <= v <= DEFAULT_HEIGHT - MARGIN_PX):
            outside[name] = (round(u), round(v))
    assert outside == {}, f"{profile.robot_id}: bodies outside the scene image: {outside}"


def test_the_scene_camera_still_sees_the_cube_and_the_target_apart(
    cell: tuple[RobotProfile, World],
) -> None:
    # The vision verifier tells the cube from the zone in this image.
    _profile, world = cell
    cube = _pixel(world, world.data.body("cube").xpos)
    zone = _pixel(world, world.data.site("target_zone").xpos)
    for u, v in (cube, zone):
        assert MARGIN_PX <= u <= DEFAULT_WIDTH - MARGIN_PX
        assert MARGIN_PX <= v <= DEFAULT_HEIGHT - MARGIN_PX
    assert np.hypot(cube[0] - zone[0], cube[1] - zone[1]) > 60


@pytest.mark.parametrize("robot", SHIPPED_SIM_ROBOTS)
def test_the_vision_verifier_passes_the_scene_frames_of_a_pick_and_place(robot: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        cell = Cell(load_profile(profile_path(robot)))
    environment = Environment(cell.world, PickPlace(), seed=0)
    with Cameras(cell.world.model) as cameras:

        def frame() -> np.ndarray:
            rgb = cameras.render(cell.world.data, SCENE_CAMERA)
            return cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)

        before = frame()
        for _, tool_id, arguments in plan_steps(scene_json(environment.scene_state()), say=print):
            cell.run(tool_id, arguments)
        cell.world.step(round(REST_S / cell.world.timestep))
        after = frame()
    criterion = VisionCriterion(kind="vision", id="seen", object_color="red", target_color="green")
    status, why = judge(before, after, criterion, VisionConfig())
    assert status == "pass", why
