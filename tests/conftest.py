import contextlib
import signal

import psutil
import pytest

from doraforge.sim.render import gl_backend
from tests.support.processes import descendants

# MuJoCo binds its OpenGL backend when it is first imported, and test modules import it at
# collection; choose a headless backend (EGL, else OSMesa) before any of them does.
gl_backend()

# A suite started in the background of a shell without job control inherits SIGINT
# ignored, and so would every CLI it starts, which then never sees the Ctrl-C that the
# interrupt rows send on purpose: give the suite (and so its children) the default again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# SIGTERM (a CI job's timeout, `kill`) stops the run at once and leaves nothing behind.
# The processes the tests started (dataflows, daemons, servers, each in a session of its
# own, so no signal sent to the run reaches them) are SIGKILLed first, then the run ends
# as Ctrl-C does and pytest tears the fixtures down, which is quick once their processes
# are gone (xdist gives a worker's teardown only seconds). Under xdist the controller
# starts no test process: it passes the SIGTERM on to its workers, which do the same.
_ROLE = {"xdist_controller": False}


def pytest_configure(config: pytest.Config) -> None:
    workers = getattr(config.option, "numprocesses", None)
    _ROLE["xdist_controller"] = bool(workers) and not hasattr(config, "workerinput")


def _interrupted(signum: int, frame: object) -> None:
    me = psutil.Process()
    if _ROLE["xdist_controller"]:
        for worker in me.children():
            with contextlib.suppress(psutil.Error):
                worker.send_signal(signal.SIGTERM)
    else:
        for process in descendants(me):  # the whole tree, read before any of it dies
            with contextlib.suppress(psutil.Error):
                process.kill()
    raise KeyboardInterrupt(f"signal {signum}")


if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _interrupted)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
