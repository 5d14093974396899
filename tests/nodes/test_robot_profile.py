"""Robot profiles: the shipped sim_arm profile agrees with its MJCF; bad files name the field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest
import yaml

from doraforge.nodes.robot.profile import ProfileError, load_profile

PROFILE = Path(__file__).resolve().parents[2] / "nodes" / "robot" / "profiles" / "sim_arm.yml"


def test_sim_arm_profile_matches_its_model() -> None:
    profile = load_profile(PROFILE)
    model = mujoco.MjModel.from_xml_path(str(profile.model_file))
    for joint in profile.arm_joints:
        low, high = model.joint(joint.name).range
        assert (joint.lower, joint.upper) == pytest.approx((low, high))
    np.testing.assert_allclose(profile.home, model.numeric("home").data)
    model.site(profile.tool_site)
    gripper = model.joint(profile.gripper.joints[0])
    assert profile.gripper.joint_for_width.joint_for(profile.gripper.max_width) == pytest.approx(
        gripper.range[1]
    )
    assert profile.joint_names[-1] == "gripper"


def test_workspace_box_contains_its_inside_only() -> None:
    workspace = load_profile(PROFILE).workspace
    assert workspace.contains([0.3, 0.0, 0.1])
    assert not workspace.contains([0.3, 0.0, -0.05])


def write(tmp_path: Path, edit: Callable[[dict[str, Any]], object]) -> Path:
    document = yaml.safe_load(PROFILE.read_text())
    document["model_file"] = str(Path(PROFILE.parent, document["model_file"]).resolve())
    edit(document)
    path = tmp_path / "robot.yml"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d.update(colour="red"), "colour"),
        (lambda d: d["arm_joints"][1].update(max_velocity=-1), "arm_joints.1.max_velocity"),
        (lambda d: d["workspace"].update(min=[0, 0]), "workspace.min"),
        (lambda d: d.update(home=[0.0] * 5), "home must hold one position per arm joint"),
        (lambda d: d["gripper"].update(closed_width=0.1), "closed_width < open_width"),
        (lambda d: d["directions"]["up"].update(axis="w"), "directions.up.axis"),
    ],
)
def test_invalid_profiles_name_the_field_and_the_file(
    tmp_path: Path, edit: Callable[[dict[str, Any]], object], field: str
) -> None:
    path = write(tmp_path, edit)
    with pytest.raises(ProfileError, match=field) as raised:
        load_profile(path)
    assert str(path) in str(raised.value)


def test_a_missing_model_file_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path, lambda d: d.update(model_file="nowhere.xml"))
    with pytest.raises(ProfileError, match=r"model_file 'nowhere\.xml' does not exist"):
        load_profile(path)


def test_a_duplicate_key_is_refused_naming_the_field_and_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, lambda d: None)
    text = path.read_text().replace("tool_site:", "tool_site: elsewhere\ntool_site:", 1)
    path.write_text(text)
    with pytest.raises(ProfileError, match=r"tool_site: duplicate key 'tool_site'") as raised:
        load_profile(path)
    assert str(path) in str(raised.value)
