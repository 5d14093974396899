"""Headless rendering: backend choice, frame shape, and frames that follow the physics."""

from __future__ import annotations

import os
from collections.abc import Iterator

import mujoco
import numpy as np
import pytest

from doraforge.sim.render import Cameras, gl_backend
from doraforge.sim.world import World


@pytest.fixture(scope="module")
def world_and_cameras() -> Iterator[tuple[World, Cameras]]:
    world = World()
    with Cameras(world.model) as cameras:
        yield world, cameras


def test_backend_is_the_headless_one_in_use() -> None:
    assert gl_backend() == os.environ["MUJOCO_GL"]
    assert os.environ["MUJOCO_GL"] in {"egl", "osmesa"}


def test_a_caller_chosen_backend_is_respected() -> None:
    environ = {"MUJOCO_GL": "osmesa"}
    assert gl_backend(environ) == "osmesa"
    assert environ == {"MUJOCO_GL": "osmesa"}


def test_an_unset_backend_is_chosen_and_exported() -> None:
    environ: dict[str, str] = {}
    backend = gl_backend(environ)
    assert backend in {"egl", "osmesa"}
    assert environ["MUJOCO_GL"] == backend


def test_both_cameras_render_non_blank_480x640_rgb(
    world_and_cameras: tuple[World, Cameras],
) -> None:
    world, cameras = world_and_cameras
    assert set(cameras.camera_names) == {"scene", "wrist"}
    for name in ("scene", "wrist"):
        frame = cameras.render(world.data, name)
        assert frame.shape == (480, 640, 3)
        assert frame.dtype == np.uint8
        assert frame.std() > 10, f"{name} frame looks blank"


def test_scene_frame_changes_where_the_cube_moves(world_and_cameras: tuple[World, Cameras]) -> None:
    world, cameras = world_and_cameras
    world.reset()
    before = cameras.render(world.data, "scene").astype(int)
    cube = world.model.body("cube").jntadr[0]
    address = world.model.jnt_qposadr[cube]
    world.data.qpos[address : address + 2] = (0.2, 0.3)
    mujoco.mj_forward(world.model, world.data)
    after = cameras.render(world.data, "scene").astype(int)
    changed = np.abs(after - before).sum(axis=2) > 30
    assert 100 < changed.sum() < 0.2 * changed.size
    world.reset()


def test_other_sizes_and_unknown_cameras(world_and_cameras: tuple[World, Cameras]) -> None:
    world, cameras = world_and_cameras
    assert cameras.render(world.data, "wrist", height=120, width=160).shape == (120, 160, 3)
    with pytest.raises(ValueError, match="unknown camera 'top'"):
        cameras.render(world.data, "top")
