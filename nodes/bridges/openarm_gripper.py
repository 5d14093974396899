"""OpenArm v2's gripper in doraforge's units: finger hinge angle (rad) ↔ finger opening (m).

OpenArm reports and takes its gripper as ``finger_joint1``, a hinge angle in rad:
``0`` is closed (the pads touch) and ``-0.7854`` fully open. ``finger_joint2`` mirrors it
through an equality constraint. Sources: ``dora-openarm-mujoco`` 0.5.1
(``_get_arm_qpos`` reads slot 8 from ``openarm_<side>_finger_joint1``) and
``openarm_mujoco.v2.JointResolver`` ("values[7] = gripper (finger_joint1; finger_joint2 is
equality-constrained)"); the geometry is openarm-mujoco 2.3's ``openarm_bimanual.xml``:
body ``openarm_right_ee_inner_finger`` at ``pos="-0.00143 0.018 -0.068"`` in
``openarm_right_ee_base_link``, joint ``openarm_right_finger_joint1`` with ``axis="-1 0 0"``
and ``range="-0.7854 0"``, and the pad mesh ``finger_inner_part_00.stl`` whose inner face
centre sits 0.0959 m below the hinge.

doraforge's gripper joint is one finger's opening in m (:mod:`doraforge.nodes.robot.contract`):
half the distance between the two pad faces, measured at the centre of the faces. Turning
the hinge by ``theta = -finger`` swings that centre on a circle about the hinge axis, so

    opening(theta) = PIVOT_Y_M * (1 - cos theta) + PAD_DEPTH_M * sin theta

which is exact for this geometry (the pad faces are parallel to the finger; checked against
MuJoCo in ``tests/nodes/test_openarm_bridge.py``) and strictly increasing over the range.
The inverse is closed-form. Both directions clamp into the hinge's range, so a caller can
never produce an angle the robot's limits refuse.
"""

from __future__ import annotations

import math

#: The hinge's sideways offset from the gripper's centre plane (m); the pads touch at 0 rad.
PIVOT_Y_M = 0.018
#: How far below the hinge the centre of the pad face sits (m).
PAD_DEPTH_M = 0.0959
#: ``finger_joint1`` range (rad): closed and fully open.
CLOSED_RAD = 0.0
OPEN_RAD = -0.7854

_RADIUS = math.hypot(PIVOT_Y_M, PAD_DEPTH_M)
_PHASE = math.atan2(PIVOT_Y_M, PAD_DEPTH_M)


def opening_for(finger_rad: float) -> float:
    """One finger's opening (m) at OpenArm's gripper angle ``finger_rad`` (clamped to range)."""
    theta = -min(max(finger_rad, OPEN_RAD), CLOSED_RAD)
    return PIVOT_Y_M * (1.0 - math.cos(theta)) + PAD_DEPTH_M * math.sin(theta)


#: The largest opening the hinge range allows (m, one finger): about 0.0731.
MAX_OPENING_M = opening_for(OPEN_RAD)


def finger_for(opening_m: float) -> float:
    """OpenArm's gripper angle (rad) that opens each finger by ``opening_m`` (clamped)."""
    opening = min(max(opening_m, 0.0), MAX_OPENING_M)
    # PAD_DEPTH sin(t) - PIVOT_Y cos(t) = R sin(t - phase), so the equation is one arcsine.
    theta = _PHASE + math.asin((opening - PIVOT_Y_M) / _RADIUS)
    return min(max(-theta, OPEN_RAD), CLOSED_RAD)
