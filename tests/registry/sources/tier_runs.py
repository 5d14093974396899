"""Run a tier's :class:`Launch` as a real process, bounded and always killed (test support).

Fixture programs are tiny Python scripts written into the server's workdir, the one place
both tiers can read them from.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from doraforge.registry.sources.tiers import TIERS, Launch, LaunchSpec, Limits
from tests.support.processes import run_bounded

RUN_TIMEOUT_S = 20.0
SCRIPT = "probe.py"


@dataclass(frozen=True)
class Ran:
    """A finished fixture run: exit status and both output streams."""

    returncode: int
    stdout: str
    stderr: str

    def report(self) -> Any:
        """The JSON document the fixture printed as its last stdout line."""
        lines = self.stdout.strip().splitlines()
        assert lines, f"no report on stdout (rc={self.returncode}): {self.stderr[-2000:]}"
        return json.loads(lines[-1])


def spec_for(
    tmp_path: Path,
    *,
    limits: Limits | None = None,
    env: dict[str, str] | None = None,
    egress_hosts: tuple[str, ...] = (),
) -> LaunchSpec:
    """A spec under ``tmp_path/sources`` that runs ``python probe.py`` from its workdir."""
    return LaunchSpec.under(
        tmp_path / "sources",
        "probe",
        sys.executable,
        (SCRIPT,),
        env=env or {},
        limits=limits,
        egress_hosts=egress_hosts,
    )


def run_launch(launch: Launch, timeout: float = RUN_TIMEOUT_S) -> Ran:
    """Spawn ``launch`` as the MCP SDK would, wait at most ``timeout``, kill its group."""
    ran = run_bounded(
        [launch.command, *launch.args], env=launch.env, cwd=launch.cwd, timeout=timeout
    )
    return Ran(ran.returncode, ran.stdout, ran.stderr)


def run_script(tier: int, spec: LaunchSpec, source: str, timeout: float = RUN_TIMEOUT_S) -> Ran:
    """Launch ``spec`` through ``tier`` with ``source`` as its ``probe.py``."""
    launch = TIERS[tier].launch(spec)
    (spec.workdir / SCRIPT).write_text(source, encoding="utf-8")
    return run_launch(launch, timeout)


def with_args(spec: LaunchSpec, *args: str) -> LaunchSpec:
    """``spec`` running ``python <args>`` instead of ``python probe.py``."""
    return replace(spec, args=args)
