"""Execution tiers run real processes: clean environment, enforced limits, contained faults."""

from __future__ import annotations

import secrets
import signal
import socket
import sys
from pathlib import Path

import pytest

from doraforge.registry.sources.tiers import (
    TIERS,
    InvalidLaunch,
    LaunchSpec,
    Limits,
    SandboxTier,
    SubprocessTier,
    TierUnavailable,
    exit_reason,
)
from tests.registry.sources.tier_runs import run_launch, run_script, spec_for, with_args

BOTH = pytest.mark.parametrize("tier", [1, 2], ids=["subprocess", "sandbox"])

ENV_DUMP = """
import json, os, resource
print(json.dumps({
    "env": dict(os.environ),
    "cwd": os.getcwd(),
    "in_session_group": os.getpgid(0) == os.getsid(0),
    "limits": [resource.getrlimit(getattr(resource, name))
               for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_NOFILE", "RLIMIT_NPROC")],
}))
"""


@pytest.fixture(autouse=True)
def _tier2_available() -> None:
    reason = TIERS[2].available()
    assert reason is None, f"tier 2 must run in this suite: {reason}"


def test_the_tier_table_holds_subprocess_as_1_and_sandbox_as_2() -> None:
    assert isinstance(TIERS[1], SubprocessTier)
    assert TIERS[1].name == "subprocess"
    assert isinstance(TIERS[2], SandboxTier)
    assert TIERS[2].name == "sandbox"
    assert TIERS[1].available() is None


@BOTH
def test_a_server_inherits_no_registry_secret_only_what_was_declared(
    tier: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token, secret = secrets.token_hex(16), secrets.token_hex(16)
    monkeypatch.setenv("DORAFORGE_REGISTRY_TOKEN", token)
    monkeypatch.setenv("SECRET", secret)
    spec = spec_for(tmp_path, env={"API_KEY": "declared-value"})

    report = run_script(tier, spec, ENV_DUMP).report()

    env = report["env"]
    assert "SECRET" not in env
    assert not any(key.startswith("DORAFORGE_") for key in env)
    assert token not in str(env)
    assert secret not in str(env)
    assert env["API_KEY"] == "declared-value"
    assert env["LANG"] == env["LC_ALL"] == "C.UTF-8"
    assert env["TMPDIR"] == str(spec.scratch)
    assert env["HOME"] == str(spec.workdir if tier == 1 else spec.scratch)
    assert set(env) <= {"API_KEY", "PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "PWD"}
    assert report["cwd"] == str(spec.workdir)


def test_a_declared_doraforge_variable_is_refused_before_launch(tmp_path: Path) -> None:
    spec = spec_for(tmp_path, env={"DORAFORGE_HOME": "/elsewhere"})

    with pytest.raises(InvalidLaunch) as raised:
        TIERS[1].launch(spec)

    assert raised.value.code == "MCP_SERVER_ENV_RESERVED"
    assert raised.value.details["variables"] == ["DORAFORGE_HOME"]


@BOTH
def test_the_launcher_sets_every_limit_and_runs_the_server_in_its_sessions_group(
    tier: int, tmp_path: Path
) -> None:
    limits = Limits(memory_mb=300, cpu_s=7, open_files=40, processes=50)

    report = run_script(tier, spec_for(tmp_path, limits=limits), ENV_DUMP).report()

    assert report["limits"] == [
        [300 * 1024 * 1024, 300 * 1024 * 1024],
        [7, 8],
        [40, 40],
        [50, 50],
    ]
    # The launcher (the server's supervisor) leads the session; the server stays in its
    # process group, the one the manager kills.
    assert report["in_session_group"] is True


@BOTH
def test_a_server_exceeding_its_memory_limit_dies_and_the_exit_is_reported(
    tier: int, tmp_path: Path
) -> None:
    limits = Limits(memory_mb=128)
    hog = "blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))\n"

    ran = run_script(tier, spec_for(tmp_path, limits=limits), hog)

    assert ran.returncode != 0
    killed = {-signal.SIGKILL, -signal.SIGSEGV, 128 + signal.SIGKILL, 128 + signal.SIGSEGV}
    assert "MemoryError" in ran.stderr or ran.returncode in killed
    assert exit_reason(ran.returncode, limits).startswith(("exited with status", "killed by"))


@BOTH
def test_the_cpu_time_limit_kills_a_busy_loop(tier: int, tmp_path: Path) -> None:
    limits = Limits(cpu_s=1)

    ran = run_script(tier, spec_for(tmp_path, limits=limits), "while True:\n    pass\n")

    # bubblewrap reports its child's death by signal N as status 128 + N.
    signals = (signal.SIGXCPU, signal.SIGKILL)
    killed_by = {-sig for sig in signals} if tier == 1 else {128 + sig for sig in signals}
    assert ran.returncode in killed_by
    assert "CPU" in exit_reason(ran.returncode, limits)


@BOTH
def test_the_open_files_limit_refuses_descriptors_past_it(tier: int, tmp_path: Path) -> None:
    opener = """
import errno, json
held, refused = [], None
try:
    for _ in range(200):
        held.append(open("/dev/null"))
except OSError as exc:
    refused = exc.errno
print(json.dumps({"held": len(held), "refused": refused == errno.EMFILE}))
"""
    spec = spec_for(tmp_path, limits=Limits(open_files=32))

    report = run_script(tier, spec, opener).report()

    assert report["refused"] is True
    assert report["held"] < 32


@BOTH
def test_the_process_limit_stops_a_fork_bomb(tier: int, tmp_path: Path) -> None:
    bomb = """
import json, os, signal
children = []
try:
    for _ in range(200):
        pid = os.fork()
        if pid == 0:
            signal.pause()
        children.append(pid)
except OSError:
    pass
for pid in children:
    os.kill(pid, signal.SIGKILL)
print(json.dumps({"forked": len(children)}))
"""
    # The limit counts every process and thread of the server's user, machine-wide: a uid
    # of its own (used as root) keeps other tests' nobody servers out of the count.
    uid = 200_000 + secrets.randbelow(800_000)
    limits = Limits(processes=8, run_as=f"{uid}:{uid}")

    report = run_script(tier, spec_for(tmp_path, limits=limits), bomb).report()

    # As root the registry runs it as run_as, which the kernel does hold to the limit.
    assert report["forked"] < 8


def test_a_command_not_on_the_path_is_one_line_with_a_code(tmp_path: Path) -> None:
    spec = LaunchSpec.under(tmp_path / "sources", "missing", "doraforge-no-such-server")

    ran = run_launch(TIERS[1].launch(spec))

    assert ran.returncode == 127
    assert "LAUNCHER_COMMAND_NOT_FOUND" in ran.stderr


def test_tier_2_without_bubblewrap_says_to_run_make_sandbox(tmp_path: Path) -> None:
    tier = SandboxTier(bwrap="doraforge-no-such-bwrap")

    reason = tier.available()
    with pytest.raises(TierUnavailable) as raised:
        tier.launch(spec_for(tmp_path))

    assert reason is not None
    assert "make sandbox" in reason
    assert raised.value.code == "MCP_TIER_UNAVAILABLE"
    assert "make sandbox" in raised.value.message


def test_exit_reasons_name_the_limit_a_signal_points_to() -> None:
    limits = Limits(cpu_s=5, memory_mb=64)

    assert exit_reason(None, limits) == "still running"
    assert exit_reason(3, limits) == "exited with status 3"
    assert "CPU time limit of 5 s" in exit_reason(-signal.SIGXCPU, limits)
    assert "memory limit of 64 MiB" in exit_reason(-signal.SIGSEGV, limits)
    assert exit_reason(-signal.SIGTERM, limits) == "killed by SIGTERM"
    assert "killed by SIGXCPU" in exit_reason(128 + signal.SIGXCPU, limits)


def test_limits_and_names_are_validated_with_the_field_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"limits\.cpu_s"):
        Limits(cpu_s=0)
    with pytest.raises(ValueError, match="server name"):
        LaunchSpec.under(tmp_path, "Bad Name", sys.executable)


def _listener() -> socket.socket:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.setblocking(False)
    return server


CONNECT = """
import json, socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3).close()
    print(json.dumps({"connected": True}))
except OSError as exc:
    print(json.dumps({"connected": False, "error": type(exc).__name__}))
"""


@pytest.mark.parametrize(
    ("tier", "egress", "reachable"),
    [(1, (), True), (2, (), False), (2, ("example.org",), True)],
    ids=["subprocess", "sandbox-no-egress", "sandbox-with-egress-shares-the-network"],
)
def test_tier_2_opens_no_connection_unless_egress_allows_a_host(
    tier: int, egress: tuple[str, ...], reachable: bool, tmp_path: Path
) -> None:
    with _listener() as server:
        port = str(server.getsockname()[1])
        spec = with_args(spec_for(tmp_path, egress_hosts=egress), "probe.py", port)

        report = run_script(tier, spec, CONNECT).report()

        assert report["connected"] is reachable
        if not reachable:
            with pytest.raises(BlockingIOError):
                server.accept()
