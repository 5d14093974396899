"""The task contract: a task draws an episode's scenario and judges the scene.

Split as dm_control splits ``Physics`` from ``Task``: :class:`~doraforge.sim.world.World`
simulates and knows no scenario; a :class:`Task` puts its scenario into a freshly reset
physics with the random generator it is handed, and owns the named success predicates,
pure functions of a :class:`~doraforge.sim.state.SceneState`. Because the predicates read
only the typed state, the same checks judge the simulator and a real robot's report.

Tasks are registered by name in a :class:`TaskRegistry` (``doraforge.sim.tasks.TASKS``) so
a node can be configured with one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from doraforge.sim.errors import DuplicateTask, UnknownTask
from doraforge.sim.state import SceneState

if TYPE_CHECKING:  # the contract loads without MuJoCo (the node picks a GL backend first)
    import numpy as np

    from doraforge.sim.world import World

type Predicate = Callable[[SceneState], bool]
type TaskFactory = Callable[[], Task]


class Task(ABC):
    """A scenario and its success predicates over the typed scene state."""

    @abstractmethod
    def initialize_episode(self, physics: World, rng: np.random.Generator) -> None:
        """Put this episode's scenario into ``physics``, which was just reset.

        Every random choice comes from ``rng``: generators in the same state draw the same
        scenario. Raises ``ValueError`` when the physics lacks what the scenario needs.
        """

    @property
    @abstractmethod
    def predicates(self) -> Mapping[str, Predicate]:
        """The success predicates by name, in the order they are reported."""

    def success(self, state: SceneState) -> dict[str, bool]:
        """Every predicate's verdict on ``state``, by name."""
        return {name: bool(predicate(state)) for name, predicate in self.predicates.items()}


class TaskRegistry:
    """Task factories by name; a name registers once (:class:`DuplicateTask` otherwise)."""

    def __init__(self) -> None:
        self._factories: dict[str, TaskFactory] = {}

    def register(self, name: str, factory: TaskFactory) -> None:
        """Make ``factory`` the maker of the task called ``name``."""
        if name in self._factories:
            raise DuplicateTask(f"a task named {name!r} is already registered")
        self._factories[name] = factory

    def create(self, name: str) -> Task:
        """A new task ``name``; raises :class:`UnknownTask` naming the registered ones."""
        factory = self._factories.get(name)
        if factory is None:
            raise UnknownTask(
                f"no task named {name!r}; registered: {list(self._factories)}",
                details={"task": name, "registered": list(self._factories)},
            )
        return factory()

    @property
    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._factories)
