"""Arm kinematics on the controller's own model copy: FK/IK round trips, limits, failures."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest

from doraforge.nodes.arm.kinematics import Kinematics, Unreachable, down_rotation
from doraforge.nodes.robot.profile import RobotProfile, load_profile

PROFILE = Path(__file__).resolve().parents[2] / "nodes" / "robot" / "profiles" / "sim_arm.yml"


@pytest.fixture(scope="module")
def profile() -> RobotProfile:
    return load_profile(PROFILE)


@pytest.fixture(scope="module")
def kin(profile: RobotProfile) -> Kinematics:
    return Kinematics(profile)


def reachable_targets(profile: RobotProfile, count: int) -> np.ndarray:
    # The part of the workspace box a top-down grasp uses: over the table in front of the arm.
    rng = np.random.default_rng(42)
    low = np.maximum(profile.workspace.min, [0.2, -0.3, 0.02])
    high = np.minimum(profile.workspace.max, [0.5, 0.3, 0.35])
    return rng.uniform(low, high, size=(count, 3))


def test_home_points_the_tool_down_above_the_table(kin: Kinematics) -> None:
    position, rotation = kin.tool_pose(kin.home)
    assert position == pytest.approx([0.3, 0.0, 0.3], abs=0.005)
    assert rotation[:, 2] == pytest.approx([0.0, 0.0, -1.0], abs=0.01)
    assert kin.fk(kin.home)[1] == pytest.approx(0.0, abs=0.01)


def test_ik_round_trips_through_fk_on_random_workspace_targets(
    kin: Kinematics, profile: RobotProfile
) -> None:
    rng = np.random.default_rng(7)
    q = kin.home
    for target in reachable_targets(profile, 60):
        yaw = float(rng.uniform(-math.pi / 2, math.pi / 2))
        q = kin.ik(target, yaw, q)
        position, rotation = kin.tool_pose(q)
        assert position == pytest.approx(target, abs=profile.tolerances.position_m / 4)
        assert rotation == pytest.approx(down_rotation(yaw), abs=0.02)
        assert kin.within_limits(q)


def test_ik_without_yaw_only_constrains_the_tool_axis(kin: Kinematics) -> None:
    q = kin.ik([0.35, 0.1, 0.1], None, kin.home)
    position, rotation = kin.tool_pose(q)
    assert position == pytest.approx([0.35, 0.1, 0.1], abs=1e-3)
    assert rotation[:, 2] == pytest.approx([0.0, 0.0, -1.0], abs=0.02)


def test_fk_of_an_ik_solution_reports_the_requested_yaw(kin: Kinematics) -> None:
    q = kin.ik([0.4, -0.1, 0.05], 0.5, kin.home)
    position, yaw = kin.fk(q)
    assert yaw == pytest.approx(0.5, abs=0.01)
    assert position == pytest.approx([0.4, -0.1, 0.05], abs=1e-3)


@pytest.mark.parametrize("target", [[1.5, 0.0, 0.2], [0.0, 0.0, -0.6], [0.3, 0.0, 1.2]])
def test_unreachable_target_raises_a_typed_error(kin: Kinematics, target: list[float]) -> None:
    with pytest.raises(Unreachable) as raised:
        kin.ik(target, 0.0, kin.home)
    assert raised.value.code == "ARM_TARGET_UNREACHABLE"
    assert raised.value.details["position"] == target
    assert raised.value.details["position_residual_m"] > 1e-3


@pytest.mark.parametrize(
    ("position", "yaw"), [([math.nan, 0.0, 0.1], 0.0), ([0.3, 0.0, 0.1], math.inf)]
)
def test_non_finite_targets_are_rejected(
    kin: Kinematics, position: list[float], yaw: float
) -> None:
    with pytest.raises(ValueError, match="finite"):
        kin.ik(position, yaw, kin.home)


def test_a_solve_from_a_nearby_seed_is_fast(kin: Kinematics, profile: RobotProfile) -> None:
    targets = reachable_targets(profile, 50)
    q = kin.ik(targets[0], 0.0, kin.home)
    began = time.perf_counter()
    for target in targets:
        q = kin.ik(target, 0.0, q)
    per_solve = (time.perf_counter() - began) / len(targets)
    assert per_solve < 0.005, f"{per_solve * 1e3:.2f} ms per solve"


@pytest.mark.parametrize("q", [[0.0] * 7, [0.0, 0.0, math.nan, 0.0, 0.0, 0.0]])
def test_joint_vectors_of_the_wrong_size_or_non_finite_are_rejected(
    kin: Kinematics, q: list[float]
) -> None:
    with pytest.raises(ValueError, match="6 finite joint positions"):
        kin.fk(q)
    with pytest.raises(ValueError, match="6 finite joint positions"):
        kin.ik([0.3, 0.0, 0.1], 0.0, q)


def test_any_yaw_about_the_vertical_is_reachable_in_front_of_the_arm(kin: Kinematics) -> None:
    for yaw in np.linspace(-math.pi, math.pi, 13):
        q = kin.ik([0.35, 0.1, 0.05], float(yaw), kin.home)
        assert abs(math.remainder(kin.fk(q)[1] - yaw, 2 * math.pi)) < 0.02
