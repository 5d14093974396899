"""``doraforge demo``: the main job, end to end, on embedded defaults.

Pack ``skills/pick-place``, install it into a fresh PAOS home, start its ``sim`` runtime
on Dora, let a scripted agent run the pick-and-place as a governed AgentTask through the
``forge_*`` agent tools (enforce mode: state and vision verifiers), stop the runtime, and
print the verdict with each criterion's reason and write the task's HTML report with every
evidence frame (``<out>/<task_id>/``, copied out of the demo's temporary home). Exit 0
only for a verified success. The skill's Gateway has its own per-start token (the Skill Runtime's),
which the agent's client and the scenario reset present.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from doraforge.cli.report import verdict_lines, write_report
from doraforge.paos.gateway_auth import http_client
from doraforge.paos.home import PaosHome
from doraforge.skills import source as skill_source

SKILL = "pick-place"
SKILL_SOURCE = skill_source(SKILL)
#: The shipped robots the demo runs on, each the skill profile that starts its cell.
ROBOT_PROFILES = {"sim_arm": "sim", "openarm": "sim-openarm"}
DEFAULT_ROBOT = "sim_arm"


def run_demo(
    ctx: Any,
    *,
    out_dir: Path,
    seed: int = 0,
    port: int | None = None,
    robot: str = DEFAULT_ROBOT,
) -> int:
    """Run the whole demo on ``robot`` (a name in :data:`ROBOT_PROFILES`) with the skill's
    Gateway on ``port`` (default: a free one, so two demos or a demo and a started skill
    never collide), in a temporary PAOS home removed when it ends; returns the exit
    status."""
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    home = PaosHome(Path(tempfile.mkdtemp(prefix="doraforge-demo-home-")))
    ctx.home = home
    try:
        return _run_in(ctx, home, out_dir, seed=seed, port=port, robot=robot)
    finally:
        _remove_unless_live(home)


def _remove_unless_live(home: PaosHome) -> None:
    """Remove the demo's home once its runtime is stopped (the report holds copies of every
    frame); a runtime whose stop failed keeps its home, the record of what still runs."""
    from doraforge.skill_runtime.runtime_state import all_states

    if not any(state.live for state in all_states(home.runtime_dir)):
        shutil.rmtree(home.root, ignore_errors=True)


def _run_in(
    ctx: Any, home: PaosHome, out_dir: Path, *, seed: int, port: int | None, robot: str
) -> int:
    """The demo's steps in its temporary ``home``; returns the exit status."""
    profile = ROBOT_PROFILES[robot]
    from doraforge.skill_runtime.archive import pack
    from doraforge.skill_runtime.dora_run import free_port
    from doraforge.skill_runtime.gateway_tokens import runtime_token
    from doraforge.skill_runtime.installer import Installer
    from doraforge.skill_runtime.runtime import RuntimeManager

    out = ctx.out
    out.say(f"1. pack the shipped skill {SKILL}")
    packed = pack(SKILL_SOURCE, out_dir / f"{SKILL}.tar.gz")
    out.say(f"   {packed.path.name}: {len(packed.files)} files, sha256 {packed.sha256[:16]}…")
    out.say(f"2. install into a fresh PAOS home {home.root} (removed at the end)")
    installed = Installer(home).install(str(packed.path), yes=True)
    out.say(f"   installed {installed.name} {installed.version}")
    with out.progress(f"3. start the {profile} runtime ({robot}) on Dora") as update:
        runtime = RuntimeManager(home, progress=update)
        state = runtime.start(SKILL, profile, port=port or free_port())
    ctx._runtime = runtime
    out.say(
        f"3. runtime {state.state} ({profile} profile, robot {robot}): "
        f"Gateway {state.gateway_url} (bearer token, per start)"
    )
    try:
        if seed:
            _reset(state.gateway_url, runtime_token(state), seed)
        out.say("4. the agent runs the task through the forge_* agent tools:")
        described = asyncio.run(_agent(ctx))
    finally:
        out.say("5. stop the runtime")
        _stop(runtime)
    return _report(out, described, home, out_dir)


async def _agent(ctx: Any) -> dict[str, Any]:
    from doraforge.cli.demos.agent import run_pick_place

    # Only the skill's own Gateway is called: its runtime token, never the operator's.
    service = ctx.service(ctx.gateway_tokens(operator=False))
    try:
        return await run_pick_place(service, SKILL, say=ctx.out.say)
    finally:
        await service.aclose()
        service.store.close()


def _reset(gateway_url: str, token: str | None, seed: int) -> None:
    # Operator setup before the task: the scenario's cube placement for this seed.
    with http_client(gateway_url, token, timeout_s=30) as client:
        admitted = client.post("/tools/world.reset:invoke", json={"arguments": {"seed": seed}})
        admitted.raise_for_status()
        invocation = admitted.json()["data"]["invocation_id"]
        for _ in range(300):
            if client.get(f"/invocations/{invocation}/result").status_code == 200:
                return
            time.sleep(0.05)
    # Running on an unreset scene would report a verdict for a seed that was never set.
    raise TimeoutError(f"world.reset (seed {seed}) did not finish within 15 s")


def _stop(runtime: Any) -> None:
    try:
        runtime.stop(SKILL)
    except Exception:  # a stop guard tripped by a failed run: stop anyway, audited
        runtime.stop(SKILL, force=True)


def _report(out: Any, described: dict[str, Any], home: PaosHome, out_dir: Path) -> int:
    task = described["task"]
    verdict = (described["revisions"][-1].get("verdict") or {}).get("status")
    # The report copies every frame out of the demo's temporary home before it goes.
    report = write_report(described, home.workspace, out_dir)
    out.say("\n" + "\n".join(verdict_lines(described)))
    out.say(f"frames: {len(described['evidence'])} in {report.parent / 'frames'}")
    out.say(f"report: {report}")
    if out.as_json:
        out.data({"task": task, "verdict": verdict, "report": str(report)})
    return 0 if task["state"] == "succeeded" else 1
