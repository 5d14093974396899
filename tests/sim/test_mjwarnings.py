"""Building a composed cell leaves no MUJOCO_LOG.TXT behind: MuJoCo's warnings go to the log.

MuJoCo's default handler appends every warning to ``MUJOCO_LOG.TXT`` in the working
directory; a world node runs in its dataflow's folder, so each start of the OpenArm cell
wrote a file into the source tree (and into the wheel built from it).
"""

from __future__ import annotations

import logging
from pathlib import Path

import mujoco
import pytest

from doraforge.nodes.robot.profile import load_profile, profile_path
from doraforge.nodes.world.layout import build_world
from doraforge.sim.mjwarnings import warnings_logged


def test_composing_the_openarm_cell_writes_no_log_file_and_logs_the_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.INFO, logger="doraforge.sim.mjwarnings"):
        build_world(load_profile(profile_path("openarm")))
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert any("empty prefix" in record.getMessage() for record in caplog.records)


def test_the_previous_warning_handler_comes_back_after_the_block() -> None:
    seen: list[str] = []
    mujoco.set_mju_user_warning(seen.append)
    try:
        with warnings_logged():
            mujoco.get_mju_user_warning()("inside the block")
        assert seen == []  # the block's handler took it
        mujoco.get_mju_user_warning()("after the block")
        assert seen == ["after the block"]
    finally:
        mujoco.set_mju_user_warning(None)
