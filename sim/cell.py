"""A cell composed with ``MjSpec``: doraforge's furniture plus a robot from any MJCF.

``sim/assets/furniture.xml`` holds the table (top at z = 0), the cube, the target zone, the
scene camera and the lights. :func:`compose_cell` attaches a robot spec to its world body;
the robot spec already carries its mount pose (the robot profile's ``mount``, applied by
``nodes/robot/model.py``), so the cell's world frame stays the table-top base frame and the
arm controller's IK model, built from the same spec, sees the same mount.

Two things do not cross an ``attach`` and are handled here: the robot's ``<option>``
(timestep, integrator, friction cone: a grasp depends on them) is copied onto the cell, and
reflective materials are made matte, because reflection passes dominate CPU render time.
The robot's sites are markers, not scenery: they move to a hidden group, so cameras (and the
vision verifier reading their frames) never see, say, OpenArm's red control-point dot as an
object.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np

from doraforge.sim.mjwarnings import warnings_logged
from doraforge.sim.world import ASSETS

FURNITURE = ASSETS / "furniture.xml"
TARGET_SITE = "target_zone"
TARGET_PLATE = "target_plate"
SCENE_CAMERA = "scene"
#: A geom/site group the default visualisation does not draw (as sim_arm's tool site).
HIDDEN_GROUP = 4

#: ``mjOption`` fields a robot model sets for its own physics (grasp stability).
_OPTION_FIELDS = ("timestep", "integrator", "cone", "impratio", "noslip_iterations")


def compose_cell(
    robot: mujoco.MjSpec,
    *,
    target_xy: Sequence[float] | None = None,
    scene_camera: tuple[Sequence[float], Sequence[float]] | None = None,
    furniture: mujoco.MjSpec | None = None,
) -> mujoco.MjSpec:
    """The furniture with ``robot`` attached at the world origin (its mount is in the spec).

    ``target_xy`` moves the target zone's centre on the table (base frame, m) for a robot
    whose reach differs from sim_arm's; ``scene_camera`` (``(pos, look_at)``, m) re-aims the
    ``scene`` camera at that robot's workspace. Names keep the robot's own (no prefix).
    Raises ``ValueError`` when a robot element's name collides with the furniture's.
    """
    cell = furniture if furniture is not None else mujoco.MjSpec.from_file(str(FURNITURE))
    for name in _OPTION_FIELDS:
        setattr(cell.option, name, getattr(robot.option, name))
    for material in robot.materials:
        material.reflectance = 0.0
    for site in robot.sites:
        site.group = HIDDEN_GROUP
    if target_xy is not None:
        _move_target(cell, target_xy)
    if scene_camera is not None:
        _aim(cell.camera(SCENE_CAMERA), *scene_camera)
    # An empty prefix keeps the profile's names (MuJoCo warns at compile; a name collision
    # with the furniture fails the compile).
    with warnings_logged():
        cell.attach(robot, frame=cell.worldbody.add_frame(), prefix="")
    return cell


def _move_target(cell: mujoco.MjSpec, target_xy: Sequence[float]) -> None:
    x, y = (float(value) for value in target_xy)
    for element in (cell.site(TARGET_SITE), cell.geom(TARGET_PLATE)):
        element.pos = [x, y, float(element.pos[2])]


def _aim(camera: mujoco.MjsCamera, pos: Sequence[float], look_at: Sequence[float]) -> None:
    # A MuJoCo camera looks along its -z with +y up in the image; keep its x horizontal.
    eye = np.asarray(pos, dtype=float)
    back = eye - np.asarray(look_at, dtype=float)
    back /= np.linalg.norm(back)
    right = np.cross([0.0, 0.0, 1.0], back)
    if np.linalg.norm(right) < 1e-9:
        raise ValueError("a scene camera looking straight down needs another look_at")
    right /= np.linalg.norm(right)
    up = np.cross(back, right)
    quat = np.empty(4)
    mujoco.mju_mat2Quat(quat, np.column_stack([right, up, back]).flatten())
    camera.pos = eye.tolist()
    camera.quat = quat.tolist()
    camera.alt.type = mujoco.mjtOrientation.mjORIENTATION_QUAT
