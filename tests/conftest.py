import pytest

from doraforge.sim.render import gl_backend

# MuJoCo binds its OpenGL backend when it is first imported, and test modules import it at
# collection; choose a headless backend (EGL, else OSMesa) before any of them does.
gl_backend()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
