"""The simulated world of a robot profile: its ``sim`` layout and its composed cell.

``doraforge.sim`` knows no robot profile (it imports no other doraforge package), so the
world node translates one here: :func:`layout_from_profile` turns the profile's arms,
grippers, cameras and cell into a :class:`~doraforge.sim.layout.RobotLayout`, and
:func:`build_world` composes the cell (doraforge's furniture plus the robot spec at its
mount, the same spec the arm's IK compiles) and returns the :class:`World` on it.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

from doraforge.nodes.robot.profile import ArmProfile, GripperProfile, RobotProfile
from doraforge.sim.layout import ArmLayout, GripperLayout, RobotLayout

if TYPE_CHECKING:  # MuJoCo loads lazily: the node picks its GL backend first
    from doraforge.sim.world import World


def layout_from_profile(profile: RobotProfile) -> RobotLayout:
    """The world's view of ``profile``: every arm (primary first), the base frame at the
    cell's world origin, the data-plane cameras and the cell's cube region."""
    region = profile.cell.cube_region
    return RobotLayout(
        arms=tuple(_arm(profile.arm(name)) for name in profile.arm_names),
        base_body=None,
        cameras=MappingProxyType(dict(profile.data_plane_cameras)),
        cube_region=None if region is None else (_pair(region.x), _pair(region.y)),
        cube_yaw=None if region is None or region.yaw is None else _pair(region.yaw),
    )


def build_world(profile: RobotProfile, *, shadows: bool = False) -> World:
    """The simulated cell of ``profile``. Raises ``ModelUnavailable`` when the robot's
    model does not load and ``ValueError`` when the cell lacks what the profile names."""
    from doraforge.nodes.robot.model import robot_spec
    from doraforge.sim.cell import compose_cell
    from doraforge.sim.world import World

    camera = profile.cell.scene_camera
    spec = compose_cell(
        robot_spec(profile),
        target_xy=profile.cell.target_zone,
        scene_camera=None if camera is None else (camera.pos, camera.look_at),
    )
    return World.from_spec(spec, layout_from_profile(profile), shadows=shadows)


def _arm(arm: ArmProfile) -> ArmLayout:
    return ArmLayout(
        joints=tuple(joint.name for joint in arm.arm_joints),
        tool_site=arm.tool_site,
        gripper=_gripper(arm.gripper),
        home=tuple(arm.home),
    )


def _gripper(gripper: GripperProfile) -> GripperLayout:
    mapping = gripper.joint_for_width
    joint = gripper.joints[0]
    # width = (q - offset) / scale: the profile's own mapping, inverted.
    return GripperLayout(
        name=joint,
        model_joint=joint,
        width_joints=(joint,),
        width_scale=1.0 / mapping.scale,
        width_offset=-mapping.offset / mapping.scale,
        actuator=gripper.actuator,
        mimic=gripper.mimic,
        command_scale=gripper.ctrl_for_joint.scale,
        command_offset=gripper.ctrl_for_joint.offset,
        open=mapping.joint_for(gripper.open_width),
    )


def _pair(values: list[float]) -> tuple[float, float]:
    low, high = values
    return (low, high)
