"""Headless camera rendering for the cell.

MuJoCo binds its OpenGL backend from ``MUJOCO_GL`` when ``mujoco`` is first imported, so an
entry point calls :func:`gl_backend` before anything imports ``mujoco``. On this project's
CPU-only machines EGL (Mesa) is the fast path; OSMesa is the fallback.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING

import numpy as np

from doraforge.sim.errors import RenderUnavailable

if TYPE_CHECKING:
    import mujoco

HEADLESS_BACKENDS: dict[str, tuple[str, ...]] = {
    "egl": ("EGL",),
    "osmesa": ("OSMesa",),
}
DEFAULT_HEIGHT = 480
DEFAULT_WIDTH = 640


def _loadable(library: str) -> bool:
    path = ctypes.util.find_library(library)
    if path is None:
        return False
    try:
        ctypes.CDLL(path)
    except OSError:
        return False
    return True


def gl_backend(environ: MutableMapping[str, str] | None = None) -> str:
    """Choose the headless GL backend and return its name (``"egl"`` or ``"osmesa"``).

    A ``MUJOCO_GL`` the caller already set is respected and returned as is. Otherwise EGL is
    chosen when ``libEGL`` loads, else OSMesa, and ``MUJOCO_GL`` (plus ``PYOPENGL_PLATFORM``)
    is set for the ``mujoco`` import that follows. Raises :class:`RenderUnavailable` when
    neither library loads, or when ``mujoco`` was imported before a backend was chosen.
    """
    env = os.environ if environ is None else environ
    chosen = env.get("MUJOCO_GL", "").strip().lower()
    if chosen:
        return chosen
    if environ is None and "mujoco" in sys.modules:
        raise RenderUnavailable(
            "mujoco was imported before MUJOCO_GL was chosen; call sim.render.gl_backend() "
            "at the entry point, before importing mujoco"
        )
    for backend, libraries in HEADLESS_BACKENDS.items():
        if all(_loadable(lib) for lib in libraries):
            env["MUJOCO_GL"] = backend
            env.setdefault("PYOPENGL_PLATFORM", backend)
            return backend
    raise RenderUnavailable("neither EGL nor OSMesa could be loaded for headless rendering")


class Cameras:
    """Renders named model cameras to RGB arrays, one ``mujoco.Renderer`` per frame size.

    ``aliases`` maps a data-plane camera name to the model camera behind it (a packaged
    robot's wrist camera keeps its own name, e.g. OpenArm's ``camera_wrist_right`` serves
    ``wrist``); an alias is rendered and listed like a model camera.

    Renderers (and their GL contexts) are created lazily and reused: creating one costs far
    more than a frame. Not thread-safe; use one ``Cameras`` per rendering thread.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        *,
        height: int = DEFAULT_HEIGHT,
        width: int = DEFAULT_WIDTH,
        aliases: Mapping[str, str] | None = None,
    ) -> None:
        import mujoco

        self._mujoco = mujoco
        self._model = model
        self._height = height
        self._width = width
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {}
        own = tuple(model.camera(i).name for i in range(model.ncam))
        self._aliases = {name: camera for name, camera in (aliases or {}).items() if camera in own}
        self.camera_names: tuple[str, ...] = (*own, *self._aliases)

    def render(
        self,
        data: mujoco.MjData,
        camera_name: str,
        *,
        height: int | None = None,
        width: int | None = None,
    ) -> np.ndarray:
        """Return an ``(H, W, 3)`` uint8 RGB frame of ``data`` seen from ``camera_name``.

        Raises ``ValueError`` for an unknown camera name.
        """
        if camera_name not in self.camera_names:
            raise ValueError(f"unknown camera {camera_name!r}; known: {list(self.camera_names)}")
        renderer = self._renderer(height or self._height, width or self._width)
        renderer.update_scene(data, camera=self._aliases.get(camera_name, camera_name))
        frame: np.ndarray = renderer.render()  # mujoco ships no type information
        return frame

    def _renderer(self, height: int, width: int) -> mujoco.Renderer:
        key = (height, width)
        renderer = self._renderers.get(key)
        if renderer is None:
            self._fit_offscreen_buffer(height, width)
            renderer = self._mujoco.Renderer(self._model, height=height, width=width)
            self._renderers[key] = renderer
        return renderer

    def _fit_offscreen_buffer(self, height: int, width: int) -> None:
        # The offscreen framebuffer is sized from the model; grow it rather than fail.
        visual = self._model.vis.global_
        visual.offheight = max(int(visual.offheight), height)
        visual.offwidth = max(int(visual.offwidth), width)

    def close(self) -> None:
        """Free every renderer's GL resources."""
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()

    def __enter__(self) -> Cameras:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
