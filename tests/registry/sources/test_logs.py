"""Bounded logs: a stderr flood keeps the newest bytes and never grows past the bound."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

from doraforge.registry.sources.logs import BoundedLog, open_errlog

MIB = 1024 * 1024
FLOOD_BYTES = 10 * MIB
DRAIN_TIMEOUT_S = 30.0


def _on_disk(log: BoundedLog) -> list[int]:
    return [p.stat().st_size for p in (log.path, log.rotated) if p.exists()]


def test_a_10_mib_flood_of_appends_stays_within_the_bound(tmp_path: Path) -> None:
    log = BoundedLog(tmp_path / "server.log", max_bytes=MIB)
    line = "x" * 99 + "\n"

    for index in range(FLOOD_BYTES // len(line)):
        log.append(line if index % 1000 else f"marker {index:07d}\n")
    log.append("the last line\n")
    log.close()

    sizes = _on_disk(log)
    assert len(sizes) == 2
    assert max(sizes) <= MIB
    assert log.tail().endswith("the last line\n")
    assert "marker 0000000" not in log.tail(2 * MIB)


def test_a_chunk_larger_than_the_bound_keeps_its_newest_bytes(tmp_path: Path) -> None:
    with BoundedLog(tmp_path / "server.log", max_bytes=1000) as log:
        log.append(b"a" * 5000 + b"end")

    assert log.path.stat().st_size <= 1000
    assert log.tail().endswith("end")


def test_the_log_file_is_owner_only(tmp_path: Path) -> None:
    with BoundedLog(tmp_path / "server.log") as log:
        log.append("secret-ish stderr\n")

    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600


def test_a_child_flooding_its_stderr_through_an_errlog_stays_bounded(tmp_path: Path) -> None:
    errlog = open_errlog(tmp_path / "stderr.log", max_bytes=MIB)
    flood = (
        "import sys\n"
        f"for i in range({FLOOD_BYTES // MIB}):\n"
        "    sys.stderr.write('y' * (1024 * 1024 - 1) + '\\n')\n"
        "sys.stderr.write('child done\\n')\n"
    )

    done = subprocess.run([sys.executable, "-c", flood], stderr=errlog, timeout=60, check=False)
    errlog.write("written by the registry\n")
    errlog.close()

    assert done.returncode == 0
    assert errlog.wait_drained(DRAIN_TIMEOUT_S)
    assert max(_on_disk(errlog.log)) <= MIB
    assert errlog.log.tail(64).endswith("child done\nwritten by the registry\n")
