import signal

import pytest

from doraforge.sim.render import gl_backend

# MuJoCo binds its OpenGL backend when it is first imported, and test modules import it at
# collection; choose a headless backend (EGL, else OSMesa) before any of them does.
gl_backend()

# A suite started in the background of a shell without job control inherits SIGINT
# ignored, and so would every CLI it starts, which then never sees the Ctrl-C that the
# interrupt rows send on purpose: give the suite (and so its children) the default again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


# SIGTERM (a CI job's timeout, `kill`) ends the run as Ctrl-C does: pytest then tears down
# the fixtures in progress, so the dataflows, daemons and servers they started stop too
# instead of outliving the suite (each in a session of its own, no signal reaches them).
if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _interrupted)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
