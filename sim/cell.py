"""A cell composed with ``MjSpec``: doraforge's furniture plus a robot from any MJCF.

``sim/assets/furniture.xml`` holds the table (top at z = 0), the cube, the target zone, the
scene camera and the lights. :func:`compose_cell` attaches a robot spec to its world body;
the robot spec already carries its mount pose (the robot profile's ``mount``, applied by
``nodes/robot/model.py``), so the cell's world frame stays the table-top base frame and the
arm controller's IK model, built from the same spec, sees the same mount.

Two things do not cross an ``attach`` and are handled here: the robot's ``<option>``
(timestep, integrator, friction cone: a grasp depends on them) is copied onto the cell, and
reflective materials are made matte, because reflection passes dominate CPU render time.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco

from doraforge.sim.world import ASSETS

FURNITURE = ASSETS / "furniture.xml"
TARGET_SITE = "target_zone"
TARGET_PLATE = "target_plate"

#: ``mjOption`` fields a robot model sets for its own physics (grasp stability).
_OPTION_FIELDS = ("timestep", "integrator", "cone", "impratio", "noslip_iterations")


def compose_cell(
    robot: mujoco.MjSpec,
    *,
    target_xy: Sequence[float] | None = None,
    furniture: mujoco.MjSpec | None = None,
) -> mujoco.MjSpec:
    """The furniture with ``robot`` attached at the world origin (its mount is in the spec).

    ``target_xy`` moves the target zone's centre on the table (base frame, m) for a robot
    whose reach differs from sim_arm's. Names keep the robot's own (no prefix). Raises
    ``ValueError`` when a robot element's name collides with the furniture's.
    """
    cell = furniture if furniture is not None else mujoco.MjSpec.from_file(str(FURNITURE))
    for name in _OPTION_FIELDS:
        setattr(cell.option, name, getattr(robot.option, name))
    for material in robot.materials:
        material.reflectance = 0.0
    if target_xy is not None:
        _move_target(cell, target_xy)
    # An empty prefix keeps the profile's names (MuJoCo warns at compile; a name collision
    # with the furniture fails the compile).
    cell.attach(robot, frame=cell.worldbody.add_frame(), prefix="")
    return cell


def _move_target(cell: mujoco.MjSpec, target_xy: Sequence[float]) -> None:
    x, y = (float(value) for value in target_xy)
    for element in (cell.site(TARGET_SITE), cell.geom(TARGET_PLATE)):
        element.pos = [x, y, float(element.pos[2])]
