"""A physics and a task run together, as dm_control's ``control.Environment``.

:meth:`Environment.reset` restores the physics and hands the task a generator seeded with
the episode's seed to draw the scenario; :meth:`Environment.scene_state` labels what the
physics measures with that seed, and :meth:`Environment.success` asks the task to judge it.
Stepping and joint targets go to :attr:`Environment.physics` directly.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from doraforge.sim.state import SceneState
from doraforge.sim.task import Task
from doraforge.sim.world import World


class Environment:
    """``physics`` with the episodes of ``task``; constructing one resets it with ``seed``."""

    def __init__(self, physics: World, task: Task, *, seed: int = 0) -> None:
        self.physics = physics
        self.task = task
        self._seed = seed
        self.reset(seed)

    @property
    def seed(self) -> int:
        """The seed of the current episode."""
        return self._seed

    def reset(self, seed: int | None = None) -> SceneState:
        """Start an episode: reset the physics, let the task draw from ``seed`` (``None``:
        the current seed again) and return the scene. The same seed always yields the same
        state. Raises what the task raises when the physics cannot hold its scenario."""
        if seed is not None:
            self._seed = int(seed)
        self.physics.reset()
        self.task.initialize_episode(self.physics, np.random.default_rng(self._seed))
        return self.scene_state()

    def scene_state(self) -> SceneState:
        """The physics' scene state, labelled with the episode's seed."""
        return replace(self.physics.scene_state(), seed=self._seed)

    def success(self, state: SceneState | None = None) -> dict[str, bool]:
        """The task's predicates on ``state`` (default: the scene now), by name."""
        return self.task.success(self.scene_state() if state is None else state)
