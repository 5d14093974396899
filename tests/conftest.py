import pytest

from sim.render import gl_backend

# Headless rendering: choose EGL (or OSMesa) before any test module imports mujoco.
gl_backend()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
