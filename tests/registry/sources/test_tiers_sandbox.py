"""Tier 2 confines the filesystem: read-only system, workdir read-only, only scratch writable,
nothing else of the host (other directories, home directories) visible."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from doraforge.registry.sources.tiers import TIERS
from tests.registry.sources.tier_runs import run_launch, run_script, spec_for, with_args

READER = """
import json, os, sys
seen = {}
for path in sys.argv[1].split(os.pathsep):
    try:
        with open(path, "rb") as handle:
            seen[path] = handle.read().decode()
    except OSError as exc:
        seen[path] = type(exc).__name__
def listing(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else []
print(json.dumps({"seen": seen, "root": listing("/root"), "home": listing("/home")}))
"""

WRITER = """
import json, os, sys
outcome = {}
for path in sys.argv[1].split(os.pathsep):
    try:
        with open(path, "w") as handle:
            handle.write("written by the sandbox")
        outcome[path] = "written"
    except OSError as exc:
        outcome[path] = type(exc).__name__
print(json.dumps(outcome))
"""


def _home_entries() -> set[str]:
    """What is really in /root, less the interpreter's own prefix (bound when it lives
    there, as with pyenv)."""
    base = Path(os.path.realpath(sys.base_prefix))
    bound = {base.relative_to("/root").parts[0]} if base.is_relative_to("/root") else set()
    return set(os.listdir("/root")) - bound if os.access("/root", os.R_OK) else set()


def test_tier_2_cannot_read_a_file_outside_its_directories_or_any_home(tmp_path: Path) -> None:
    outside = tmp_path / "outside" / "secret.txt"
    outside.parent.mkdir()
    outside.write_text("host secret", encoding="utf-8")
    spec = spec_for(tmp_path)
    spec.workdir.mkdir(parents=True)
    (spec.workdir / "config.txt").write_text("server config", encoding="utf-8")
    # One joined argument, not file arguments (a declared file argument is bound).
    paths = os.pathsep.join([str(outside), str(spec.workdir / "config.txt"), "/etc/shadow"])
    spec = with_args(spec, "probe.py", paths)

    report = run_script(2, spec, READER).report()

    assert report["seen"][str(outside)] == "FileNotFoundError"
    assert report["seen"]["/etc/shadow"] == "FileNotFoundError"
    assert report["seen"][str(spec.workdir / "config.txt")] == "server config"
    assert not set(report["root"]) & _home_entries()
    assert report["home"] == []


def test_tier_2_writes_only_to_scratch(tmp_path: Path) -> None:
    spec = spec_for(tmp_path)
    outside = tmp_path / "outside.txt"
    targets = [spec.scratch / "ok.txt", spec.workdir / "changed.txt", outside, Path("/usr/x")]
    spec = with_args(spec, "probe.py", os.pathsep.join(map(str, targets)))

    report = run_script(2, spec, WRITER).report()

    assert report[str(targets[0])] == "written"
    assert (spec.scratch / "ok.txt").read_text(encoding="utf-8") == "written by the sandbox"
    assert report[str(targets[1])] in ("OSError", "PermissionError")  # EROFS / EACCES
    assert report[str(targets[3])] != "written"
    # The sandbox's /tmp is its own tmpfs: a write there never reaches the host.
    assert not outside.exists()
    assert not (spec.workdir / "changed.txt").exists()


def test_tier_2_binds_a_declared_script_but_not_its_neighbours(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "server.py").write_text(
        "import json, os\nprint(json.dumps(sorted(os.listdir(os.path.dirname(__file__)))))\n",
        encoding="utf-8",
    )
    (elsewhere / "neighbour.txt").write_text("not declared", encoding="utf-8")
    spec = with_args(spec_for(tmp_path), str(elsewhere / "server.py"))

    ran = run_launch(TIERS[2].launch(spec))

    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == ["server.py"]
