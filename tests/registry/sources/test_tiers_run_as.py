"""A server never runs as root: a root registry runs it as ``run_as`` in both tiers, with its
directories handed to that user, and the user cannot reach root's files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from doraforge.registry.sources.tiers import NOBODY, TIERS, Limits
from tests.registry.sources.tier_runs import run_launch, run_script, spec_for, with_args

BOTH = pytest.mark.parametrize("tier", [1, 2], ids=["subprocess", "sandbox"])
AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="only a root registry switches users")

IDENTITY = """
import json, os, sys
def attempt(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode()
    except OSError as exc:
        return type(exc).__name__
def regain():
    try:
        os.setuid(0)
        return "regained"
    except OSError as exc:
        return type(exc).__name__
scratch = os.path.join(os.environ["TMPDIR"], "note.txt")
with open(scratch, "w") as handle:
    handle.write("scratch is writable")
print(json.dumps({
    "uid": os.getresuid(), "gid": os.getresgid(), "groups": os.getgroups(),
    "secret": attempt(sys.argv[1]), "regain": regain(),
}))
"""


def _root_secret(directory: Path) -> Path:
    """A 0600 root-owned file beside the server's workdir (its parent: the server's home)."""
    directory.mkdir(parents=True, exist_ok=True)
    secret = directory / "secret.txt"
    secret.write_text("root only", encoding="utf-8")
    secret.chmod(0o600)
    return secret


@AS_ROOT
@BOTH
def test_a_root_registry_runs_the_server_as_nobody_who_cannot_read_roots_files(
    tier: int, tmp_path: Path
) -> None:
    spec = spec_for(tmp_path)
    secret = _root_secret(spec.workdir.parent)
    spec = with_args(spec, "probe.py", str(secret))

    report = run_script(tier, spec, IDENTITY).report()

    assert report["uid"] == [65534, 65534, 65534]
    assert report["gid"] == [65534, 65534, 65534]
    assert report["groups"] == []
    assert report["regain"] == "PermissionError"
    # Both tiers see the file (tier 2 binds it: it is a declared file argument); the uid
    # is what refuses it.
    assert report["secret"] == "PermissionError"
    assert (spec.scratch / "note.txt").read_text(encoding="utf-8") == "scratch is writable"
    assert (spec.scratch / "note.txt").stat().st_uid == 65534
    assert spec.workdir.stat().st_uid == spec.scratch.stat().st_uid == 65534


@AS_ROOT
@BOTH
def test_a_declared_run_as_is_the_servers_uid_and_gid(tier: int, tmp_path: Path) -> None:
    spec = spec_for(tmp_path, limits=Limits(run_as="4242:4343"))
    spec = with_args(spec, "probe.py", str(_root_secret(spec.workdir.parent)))

    report = run_script(tier, spec, IDENTITY).report()

    assert report["uid"] == [4242, 4242, 4242]
    assert report["gid"] == [4343, 4343, 4343]
    assert report["secret"] != "root only"
    assert (spec.scratch / "note.txt").stat().st_uid == 4242


def test_run_as_defaults_to_nobody_and_never_names_root() -> None:
    assert Limits().run_as == NOBODY == "65534:65534"
    assert "--run-as=65534:65534" in Limits().launcher_args()
    assert Limits(run_as="1000:1000").ids() == (1000, 1000)
    for bad in ("0:0", "1000:0", "0:1000", "nobody", "1000", "-1:5", ":", "1:2:3"):
        with pytest.raises(ValueError, match=r"limits\.run_as"):
            Limits(run_as=bad)


@AS_ROOT
def test_a_launcher_refused_its_switch_stops_before_the_command(tmp_path: Path) -> None:
    spec = spec_for(tmp_path)
    launch = TIERS[1].launch(spec)
    # What a tampered command line would ask for; Limits itself refuses uid 0.
    args = [arg if not arg.startswith("--run-as=") else "--run-as=0:0" for arg in launch.args]
    (spec.workdir / "probe.py").write_text("print('ran')\n", encoding="utf-8")

    ran = run_launch(type(launch)(launch.command, args, launch.env, launch.cwd))

    assert ran.returncode == 2
    assert "LAUNCHER_RUN_AS_FAILED" in ran.stderr
    assert "ran" not in ran.stdout
