"""Shared fixtures for the cell's tests: the shipped profile and its kinematics."""

from __future__ import annotations

from pathlib import Path

import pytest

from doraforge.nodes.arm.kinematics import Kinematics
from doraforge.nodes.robot.profile import RobotProfile, load_profile

PROFILE = Path(__file__).resolve().parents[2] / "nodes" / "robot" / "profiles" / "sim_arm.yml"


@pytest.fixture(scope="session")
def profile() -> RobotProfile:
    return load_profile(PROFILE)


@pytest.fixture(scope="session")
def kinematics(profile: RobotProfile) -> Kinematics:
    return Kinematics(profile)
