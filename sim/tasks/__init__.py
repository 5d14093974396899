"""The registered tasks: ``TASKS.create("pick_place")``.

Loads without MuJoCo, so an entry point can resolve a task name before it chooses the GL
backend.
"""

from __future__ import annotations

from doraforge.sim.task import TaskRegistry
from doraforge.sim.tasks.pick_place import PickPlace

DEFAULT_TASK = "pick_place"

TASKS = TaskRegistry()
TASKS.register(DEFAULT_TASK, PickPlace)

__all__ = ["DEFAULT_TASK", "TASKS"]
