"""Tasks by name: the registry rejects duplicates and names what it knows."""

from __future__ import annotations

import subprocess
import sys

import pytest

from doraforge.sim.errors import DuplicateTask, SimError, UnknownTask
from doraforge.sim.task import TaskRegistry
from doraforge.sim.tasks import DEFAULT_TASK, TASKS
from doraforge.sim.tasks.pick_place import PickPlace


def test_pick_place_is_registered_as_the_default_task() -> None:
    assert DEFAULT_TASK == "pick_place"
    assert DEFAULT_TASK in TASKS.names
    assert isinstance(TASKS.create(DEFAULT_TASK), PickPlace)


def test_each_create_makes_a_new_task() -> None:
    assert TASKS.create(DEFAULT_TASK) is not TASKS.create(DEFAULT_TASK)


def test_a_name_registers_once() -> None:
    registry = TaskRegistry()
    registry.register("pick_place", PickPlace)
    with pytest.raises(DuplicateTask, match="'pick_place' is already registered") as raised:
        registry.register("pick_place", PickPlace)
    assert raised.value.code == "SIM_DUPLICATE_TASK"
    assert isinstance(raised.value, ValueError)
    assert registry.names == ("pick_place",)


def test_an_unknown_name_is_refused_with_the_registered_ones() -> None:
    with pytest.raises(UnknownTask, match="no task named 'stack'") as raised:
        TASKS.create("stack")
    assert isinstance(raised.value, SimError)
    assert raised.value.code == "SIM_UNKNOWN_TASK"
    assert raised.value.details == {"task": "stack", "registered": list(TASKS.names)}


def test_the_registry_loads_without_mujoco() -> None:
    # The world node resolves --task before it picks the GL backend, which must precede
    # the first MuJoCo import.
    code = "import sys, doraforge.sim.tasks; assert 'mujoco' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
