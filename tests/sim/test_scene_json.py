"""The world endpoint's scene_state JSON is the one the pre-split code wrote.

The goldens in ``golden/`` were written by the code before the Physics/Task split (commit
d5a434f: ``World(seed=…)`` drew the cube, the node added the predicates), replaying the
scenarios below; each file is ``json.dumps`` of one output plus a newline.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from doraforge.nodes.world.scene import scene_json
from doraforge.sim.environment import Environment
from doraforge.sim.state import GripperState, ObjectState, SceneState, Zone, quaternion, vec3
from doraforge.sim.tasks.pick_place import PickPlace
from doraforge.sim.world import World

GOLDEN = Path(__file__).parent / "golden"


def snapshot(environment: Environment) -> dict[str, Any]:
    """What the world node publishes: the scene with the task's predicates."""
    state = environment.scene_state()
    return scene_json(state, environment.success(state))


def fresh_seed3_snapshot() -> dict[str, Any]:
    return snapshot(Environment(World(), PickPlace(), seed=3))


def stepped_seed7(environment: Environment | None = None) -> Environment:
    environment = environment or Environment(World(), PickPlace(), seed=7)
    environment.physics.set_targets(["elbow", "gripper", "shoulder_pan"], [1.2, 0.01, -0.3])
    environment.physics.step(400)
    return environment


def seed7_after_400_steps_snapshot() -> dict[str, Any]:
    return snapshot(stepped_seed7())


def reset_to_seed11_outcome() -> dict[str, Any]:
    # world.reset's outputs: the new scene without predicates.
    return {"scene": scene_json(stepped_seed7().reset(11))}


def reset_same_seed_snapshot() -> dict[str, Any]:
    environment = stepped_seed7()
    environment.reset(11)
    environment.physics.step(50)
    environment.reset()
    return snapshot(environment)


SCENARIOS: list[Callable[[], dict[str, Any]]] = [
    fresh_seed3_snapshot,
    seed7_after_400_steps_snapshot,
    reset_to_seed11_outcome,
    reset_same_seed_snapshot,
]


def golden(name: str) -> str:
    return (GOLDEN / f"{name}.json").read_text()


def skeleton(value: Any) -> Any:
    """``value`` with every number replaced by its type: keys, order, lengths and types."""
    if isinstance(value, dict):
        return [(key, skeleton(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [skeleton(item) for item in value]
    return type(value).__name__


def numbers(value: Any) -> list[float]:
    if isinstance(value, dict):
        return [n for item in value.values() for n in numbers(item)]
    if isinstance(value, list):
        return [n for item in value for n in numbers(item)]
    return [value] if isinstance(value, int | float) and not isinstance(value, bool) else []


def parse_scene(document: dict[str, Any]) -> tuple[SceneState, dict[str, bool] | None]:
    """A golden document back into the typed state (the test's own reading of the shape)."""
    objects = {
        name: ObjectState(
            position=vec3(obj["position"]),
            orientation_wxyz=quaternion(obj["orientation_wxyz"]),
            linear_velocity=vec3(obj["linear_velocity"]),
            size=vec3(obj["size"]),
        )
        for name, obj in document["objects"].items()
    }
    gripper = document["gripper"]
    state = SceneState(
        objects=objects,
        target_zone=Zone(
            center=vec3(document["target_zone"]["center"]),
            half_extents=vec3(document["target_zone"]["half_extents"]),
        ),
        gripper=GripperState(
            width=gripper["width"],
            joint_positions=gripper["joint_positions"],
            tool_position=vec3(gripper["tool_position"]),
        ),
        sim_time=document["sim_time"],
        seed=document["seed"],
    )
    return state, document.get("predicates")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_the_serialiser_writes_the_golden_bytes_and_the_task_its_verdicts(
    scenario: Callable[[], dict[str, Any]],
) -> None:
    text = golden(scenario.__name__)
    document = json.loads(text)
    scene = document.get("scene", document)
    state, predicates = parse_scene(scene)
    rebuilt = scene_json(state, predicates)
    if predicates is not None:
        assert PickPlace().success(state) == predicates
    wrapped = {"scene": rebuilt} if "scene" in document else rebuilt
    assert json.dumps(wrapped) + "\n" == text


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_the_environment_reproduces_the_golden_scenes(
    scenario: Callable[[], dict[str, Any]],
) -> None:
    expected = json.loads(golden(scenario.__name__))
    actual = json.loads(json.dumps(scenario()))
    assert skeleton(actual) == skeleton(expected)
    # Same floating-point operations as the pre-split code, so on one platform the bytes
    # match; another CPU's MuJoCo build may round the kinematics differently in the last bits.
    for got, want in zip(numbers(actual), numbers(expected), strict=True):
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12), (got, want)
