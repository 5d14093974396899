"""MuJoCo's own warnings, routed to Python logging while doraforge builds a model.

MuJoCo's default warning handler prints to stdout and appends to ``MUJOCO_LOG.TXT`` in the
working directory, which for a world node is the dataflow's folder (a source tree or an
installed package). Composing a cell attaches the robot without a name prefix, which MuJoCo
warns about at attach time; that and any other warning while building goes to the log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import mujoco

log = logging.getLogger(__name__)


@contextmanager
def warnings_logged() -> Iterator[None]:
    """Route MuJoCo's warnings to this module's log for the block, then restore the
    handler that was set before."""
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(lambda message: log.info("MuJoCo: %s", message))
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)
