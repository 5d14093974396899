"""A profile's model may come from an installed package, with the frames it lacks added.

Uses the real OpenArm MJCF that ``openarm-mujoco`` installs (a doraforge dependency).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from doraforge.nodes.arm.kinematics import Kinematics
from doraforge.nodes.robot.model import ModelUnavailable, compile_robot, resolve_model_file
from doraforge.nodes.robot.profile import ProfileError, load_profile

SIM_ARM = Path(__file__).resolve().parents[2] / "nodes" / "robot" / "profiles" / "sim_arm.yml"
OPENARM = "package:openarm_mujoco.v2:openarm_bimanual.xml"
RIGHT_JOINTS = [f"openarm_right_joint{n}" for n in range(1, 8)]


def openarm_document() -> dict[str, Any]:
    """The sim_arm profile re-pointed at the OpenArm right arm, a tool site added."""
    document: dict[str, Any] = yaml.safe_load(SIM_ARM.read_text(encoding="utf-8"))
    document.update(
        robot_id="openarm_right",
        model_file=OPENARM,
        sites=[
            {
                "name": "tool_center",
                "body": "openarm_right_ee_base_link",
                "pos": [0.0, 0.0, -0.155],
                "quat": [0.0, 1.0, 0.0, 0.0],
            }
        ],
        cameras=[{"name": "wrist", "body": "openarm_right_ee_base_link", "pos": [0, 0, -0.05]}],
        tool_site="tool_center",
        arm_joints=[
            {"name": name, "lower": -1.3, "upper": 1.3, "max_velocity": 1.0}
            for name in RIGHT_JOINTS
        ],
        home=[0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0],
    )
    document["gripper"]["joints"] = ["openarm_right_finger_joint1"]
    return document


def write(tmp_path: Path, edit: Callable[[dict[str, Any]], None] | None = None) -> Path:
    document = openarm_document()
    if edit is not None:
        edit(document)
    path = tmp_path / "openarm.yml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def test_a_package_asset_resolves_to_the_installed_mjcf(tmp_path: Path) -> None:
    path = resolve_model_file(OPENARM, tmp_path)
    assert path.name == "openarm_bimanual.xml"
    assert path.is_file()


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("package:no_such_robot_models:arm.xml", "is not installed"),
        ("package:openarm_mujoco.v2", "write package:<module>:<asset>"),
        ("package:openarm_mujoco.v2:nowhere.xml", "does not exist"),
        ("nowhere.xml", "'nowhere.xml' does not exist"),
    ],
)
def test_an_unusable_reference_is_one_line_that_says_what_to_fix(
    tmp_path: Path, reference: str, message: str
) -> None:
    with pytest.raises(ModelUnavailable, match=message) as raised:
        resolve_model_file(reference, tmp_path)
    assert "\n" not in str(raised.value)
    assert raised.value.code == "ROBOT_MODEL_UNAVAILABLE"


def test_the_profile_adds_the_tool_site_and_camera_the_package_lacks(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path))
    model = compile_robot(profile)
    site = model.site("tool_center")
    assert model.body(int(site.bodyid[0])).name == "openarm_right_ee_base_link"
    np.testing.assert_allclose(site.pos, [0.0, 0.0, -0.155])
    assert model.camera("wrist").id >= 0


def test_kinematics_solves_on_the_packaged_seven_joint_arm(tmp_path: Path) -> None:
    kinematics = Kinematics(load_profile(write(tmp_path)))
    assert kinematics.joint_names == RIGHT_JOINTS
    position, _ = kinematics.fk(kinematics.home)
    target = position + np.array([0.03, 0.0, 0.02])
    q = kinematics.ik(target, q_seed=kinematics.home)
    reached, rotation = kinematics.tool_pose(q)
    np.testing.assert_allclose(reached, target, atol=2e-3)
    assert kinematics.within_limits(q)
    assert rotation[:, 2] @ np.array([0.0, 0.0, -1.0]) > 0.99  # tool pointing down


def test_a_site_on_a_missing_body_or_a_repeated_site_is_refused(tmp_path: Path) -> None:
    def missing_body(document: dict[str, Any]) -> None:
        document["sites"][0]["body"] = "no_such_link"

    def repeated(document: dict[str, Any]) -> None:
        document["sites"][0]["name"] = "right_ee_control_point"

    with pytest.raises(ModelUnavailable, match="no body 'no_such_link'"):
        compile_robot(load_profile(write(tmp_path, missing_body)))
    with pytest.raises(ModelUnavailable, match="site 'right_ee_control_point' already exists"):
        compile_robot(load_profile(write(tmp_path, repeated)))


def test_a_missing_package_fails_the_profile_load_naming_the_file(tmp_path: Path) -> None:
    def elsewhere(document: dict[str, Any]) -> None:
        document["model_file"] = "package:no_such_robot_models:arm.xml"

    path = write(tmp_path, elsewhere)
    with pytest.raises(ProfileError, match=f"{path}: model package 'no_such_robot_models'"):
        load_profile(path)
