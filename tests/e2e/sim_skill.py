"""The shipped sim skill installed into a fresh home and started on a free Gateway port,
and a PAOS task service wired to it as ``doraforge serve`` wires one (shared by the e2e
tests that drive the real cell through agent tools)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from doraforge.paos.home import PaosHome, open_service
from doraforge.skill_runtime.dora_run import dora_environment, free_port
from tests.paths import PROJECT_ROOT

SKILL = "pick-place"
SOURCE = PROJECT_ROOT / "skills" / SKILL


def started_sim(tmp_path: Path) -> Iterator[tuple[PaosHome, Any]]:
    from doraforge.skill_runtime.archive import pack
    from doraforge.skill_runtime.installer import Installer
    from doraforge.skill_runtime.runtime import RuntimeManager

    home = PaosHome(tmp_path / "home")
    packed = pack(SOURCE, tmp_path / f"{SKILL}.tar.gz")
    Installer(home).install(str(packed.path), yes=True)
    runtime = RuntimeManager(home, environ=dora_environment(os.environ))
    # The shipped skill names 9201; a free one keeps concurrent runs apart.
    runtime.start(SKILL, "sim", port=free_port())
    try:
        yield home, runtime
    finally:
        try:
            runtime.stop(SKILL)
        except Exception:  # a guard tripped by a failed run: stop anyway, audited
            runtime.stop(SKILL, force=True)


def task_service(home: PaosHome, runtime: Any) -> Any:
    from doraforge.skill_runtime.activation import activate_skill
    from doraforge.skill_runtime.gateway_tokens import GatewayTokens

    # The skill's Gateway takes only its runtime's token, as `doraforge serve` wires it.
    service = open_service(home, token_for=GatewayTokens(home.runtime_dir))
    service.activate_skill = lambda name: activate_skill(home, name, runtime)
    return service
