"""A PAOS home is private whatever the umask: the folder 0700, its task store (with the
``-wal`` and ``-shm`` SQLite keeps beside it) and its logs 0600."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from doraforge.cli import main
from doraforge.paos.home import PaosHome
from doraforge.paos.store import AgentTaskStore
from doraforge.skill_runtime.runtime import RuntimeManager
from doraforge.skill_runtime.runtime_state import append_audit


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def shared_umask() -> Iterator[None]:
    """The usual umask, under which files are created readable by everyone (0644)."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.fixture
def archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    packed = tmp_path / "pick-place.tar.gz"
    assert main(["skill", "pack", "pick-place", "--output", str(packed)]) == 0
    capsys.readouterr()
    return packed


def test_a_home_the_cli_creates_is_private_with_its_store_and_logs(
    tmp_path: Path, archive: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "new" / "home"

    assert main(["--home", str(root), "skill", "install", str(archive), "--yes"]) == 0

    home = PaosHome(root)
    assert mode(root) == 0o700
    assert mode(home.store_path) == 0o600
    store = AgentTaskStore(home.store_path)
    try:
        wal, shm = (root / "paos.db-wal", root / "paos.db-shm")
        assert (mode(wal), mode(shm)) == (0o600, 0o600)
    finally:
        store.close()
    append_audit(home.runtime_dir, {"event": "skill.force_stop"})
    RuntimeManager(home)._log("pick-place", "starting")
    assert mode(home.runtime_dir / "audit.log") == 0o600
    assert mode(home.runtime_dir / "logs" / "pick-place.log") == 0o600


def test_a_home_an_earlier_version_left_readable_is_made_private(
    tmp_path: Path, archive: Path
) -> None:
    root = tmp_path / "home"
    root.mkdir(mode=0o755)
    (root / "runtime").mkdir()
    for name in ("paos.db", "runtime/audit.log"):  # an empty file is an empty database
        (root / name).touch(mode=0o644)

    assert main(["--home", str(root), "skill", "install", str(archive), "--yes"]) == 0
    append_audit(root / "runtime", {"event": "skill.force_stop"})

    assert mode(root) == 0o700
    assert mode(root / "paos.db") == 0o600
    assert mode(root / "runtime" / "audit.log") == 0o600
