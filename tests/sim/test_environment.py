"""Environment: the physics reset, then the task draws the episode from its seed."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from doraforge.sim.environment import Environment
from doraforge.sim.state import SceneState
from doraforge.sim.task import Predicate, Task
from doraforge.sim.tasks.pick_place import CubeRegion, PickPlace
from doraforge.sim.world import World


class RecordingTask(Task):
    """Draws nothing; records what the environment hands it."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, float]] = []

    @property
    def predicates(self) -> Mapping[str, Predicate]:
        return {"always": lambda state: True}

    def initialize_episode(self, physics: World, rng: np.random.Generator) -> None:
        self.calls.append((physics.sim_time, float(rng.uniform())))


@pytest.fixture
def environment() -> Environment:
    return Environment(World(), PickPlace(), seed=5)


def test_the_scene_is_labelled_with_the_episode_seed(environment: Environment) -> None:
    assert environment.scene_state().seed == 5
    assert environment.reset(9).seed == 9
    assert environment.seed == 9


def test_reset_hands_the_task_a_fresh_physics_and_a_generator_seeded_per_episode() -> None:
    task = RecordingTask()
    environment = Environment(World(), task, seed=4)
    environment.physics.step(100)
    environment.reset()
    environment.reset(5)
    expected = float(np.random.default_rng(4).uniform())
    assert task.calls[0] == task.calls[1] == (0.0, expected)
    assert task.calls[2][1] == float(np.random.default_rng(5).uniform())


def test_cube_starts_on_the_table_inside_the_region() -> None:
    region = CubeRegion(x=(0.3, 0.32), y=(0.1, 0.12))
    environment = Environment(World(), PickPlace(region), seed=1)
    environment.physics.step(250)
    x, y, z = environment.scene_state().object("cube").position
    assert 0.3 <= x <= 0.32
    assert 0.1 <= y <= 0.12
    assert z == pytest.approx(0.0225, abs=1e-3)


def test_same_seed_resets_to_an_identical_state(environment: Environment) -> None:
    world = environment.physics
    world.set_targets(["elbow"], [1.0])
    world.step(300)
    environment.reset(11)
    first = (world.data.qpos.copy(), world.data.qvel.copy(), world.data.ctrl.copy())
    world.step(200)
    after_steps = world.data.qpos.copy()
    environment.reset(11)
    np.testing.assert_array_equal(world.data.qpos, first[0])
    np.testing.assert_array_equal(world.data.qvel, first[1])
    np.testing.assert_array_equal(world.data.ctrl, first[2])
    world.step(200)
    np.testing.assert_array_equal(world.data.qpos, after_steps)
    assert world.sim_time == pytest.approx(200 * world.timestep)


def test_different_seeds_place_the_cube_differently(environment: Environment) -> None:
    one = environment.reset(1).object("cube").position
    assert environment.reset(2).object("cube").position != one
    assert environment.seed == 2


def test_success_asks_the_task_about_the_scene_now(environment: Environment) -> None:
    state: SceneState = environment.scene_state()
    assert environment.success() == environment.task.success(state)
    assert environment.success() == {"cube_in_target_and_resting": False, "cube_lifted": False}
