"""Real parts for the context scope tests: a PAOS home in ``tmp_path`` with a skill packed
and installed as a user installs one, a real task store, a Gateway with the mock provider
on a real loopback socket that requires a runtime's own token, and the check that no path
or token reaches what a scope returns.

The one fake is :class:`DataflowRunning`: a real RuntimeManager whose "is the dataflow
running" question is answered yes without Dora (no Dora runs in these tests); its probe of
the Gateway, with the recorded token and identity, is the real one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from doraforge.gateway.core import Gateway
from doraforge.gateway.http import create_app, gateway_policy
from doraforge.gateway.local import LocalCarrier, LocalProvider
from doraforge.gateway.main import server_config
from doraforge.paos.evidence import EvidenceArtifact
from doraforge.paos.home import PaosHome
from doraforge.paos.store import AgentTaskStore, NewRecord
from doraforge.registry.context.source import ContextItem, Snapshot
from doraforge.skill_runtime import Installer, RuntimeManager, pack
from doraforge.skill_runtime.gateway_tokens import create_token_file
from doraforge.skill_runtime.runtime_state import RuntimeState, utc_now, write_state
from doraforge.skills import source as skill_source
from doraforge.wire.tokens import load_token
from tests.gateway.harness import mock_config, mock_handler
from tests.support.live_server import LiveServer
from tests.support.waiting import eventually

SKILL = "pick-place"
#: The runtime instance the recorded runtime and every recorded task binding name.
RUNTIME_INSTANCE = "rt-context-test"
MOCK_TOOLS = ("mock.echo", "mock.move", "mock.stats", "mock.stream")


def install_skill(home: PaosHome, scratch: Path, name: str = SKILL) -> None:
    """Pack the shipped skill ``name`` and install the archive into ``home``."""
    archive = pack(skill_source(name), scratch / f"{name}.tar.gz").path
    Installer(home, runtime_state=lambda _name: None).install(str(archive), yes=True)


def returned(item: ContextItem) -> str:
    """Everything of ``item`` a caller can read under the metadata profile."""
    return json.dumps(
        [item.ref, item.label, item.route, dict(item.metadata), dict(item.counts), item.aliases]
    )


def leaks(snapshot: Snapshot, *secrets: str) -> list[str]:
    """The returned fields (and private texts) of ``snapshot`` that hold one of ``secrets``."""
    found = []
    for item in snapshot.items:
        for name, text in (("returned", returned(item)), ("text", item.text)):
            found += [f"{item.label}: {name} holds {s!r}" for s in secrets if s and s in text]
    return found


class DataflowRunning(RuntimeManager):
    """A RuntimeManager for which every recorded dataflow runs (no Dora here); the rest,
    the Gateway probe with the runtime's token and identity included, is real."""

    def _dataflow_running(self, state: RuntimeState) -> bool:
        return True


@dataclass
class Running:
    """A skill recorded as running: its Gateway server, token and recorded state."""

    server: LiveServer | None
    token: str
    state: RuntimeState


def _identity(server: LiveServer, token: str) -> dict[str, object]:
    with server.client(headers={"Authorization": f"Bearer {token}"}) as client:
        document: dict[str, object] = client.get("/tools").json()["data"]["gateway"]
        return document


def record_running(
    home: PaosHome, url: str, token_file: Path, identity: dict[str, object] | None
) -> RuntimeState:
    """Write ``runtime/<SKILL>.json`` as a start that reached ``running`` writes it."""
    now = utc_now()
    return write_state(
        home.runtime_dir,
        RuntimeState(
            name=SKILL,
            version="1.0.0",
            profile="sim",
            state="running",
            runtime_instance_id=RUNTIME_INSTANCE,
            dataflow_name=SKILL,
            dataflow_uuid="0191c0de-0000-7000-8000-000000000001",
            coordinator_port=6199,
            gateway_url=url,
            gateway_identity=identity,
            gateway_token_file=str(token_file),
            launch_dataflow=str(home.runtime_dir / "launch" / "dataflow.yml"),
            started_at=now,
            updated_at=now,
        ),
    )


@contextmanager
def tokened_gateway(token: str) -> Iterator[LiveServer]:
    """The project's Gateway with the mock provider, on a free loopback port, requiring
    ``token`` as a skill-started Gateway does."""
    config = mock_config()
    carrier = LocalCarrier()
    gateway = Gateway(config, send=carrier.send)
    gateway.runtime.restore()
    provider = carrier.add(LocalProvider("mock", mock_handler), gateway.on_message)

    def on_loop(loop: asyncio.AbstractEventLoop) -> None:
        gateway.observations.bind_loop(loop)
        loop.call_soon(provider.register)

    app = create_app(gateway, gateway_policy(config, token))
    headers = {"Authorization": f"Bearer {token}"}
    with LiveServer(server_config(app, "127.0.0.1", 0), on_loop=on_loop) as server:
        with server.client(headers=headers) as client:
            eventually(
                lambda: client.get("/tools/mock.move/context").json()["data"]["ready"],
                within=10.0,
                what="the mock endpoint to register",
            )
        yield server


def _new_token(home: PaosHome) -> tuple[Path, str]:
    """A runtime token file for ``SKILL``, written as a start writes it, and its token."""
    token_file = create_token_file(home.runtime_dir, SKILL)
    token = load_token(env=None, file=str(token_file), environ={})
    assert token is not None
    return token_file, token


@contextmanager
def running_skill(home: PaosHome) -> Iterator[Running]:
    """``SKILL`` recorded as running behind a live tokened Gateway for the block."""
    token_file, token = _new_token(home)
    with tokened_gateway(token) as server:
        state = record_running(home, server.url, token_file, _identity(server, token))
        yield Running(server, token, state)


def running_on_closed_port(home: PaosHome, port: int) -> Running:
    """``SKILL`` recorded as running at ``port``, where nothing listens."""
    token_file, token = _new_token(home)
    identity = {"gateway_id": "gone", "instance_id": "gwinst-gone", "catalog_revision": 1}
    state = record_running(home, f"http://127.0.0.1:{port}", token_file, identity)
    return Running(None, token, state)


# ---------------------------------------------------------------- the task store

#: Physical parameters and raw outputs a task holds that no scope may return.
TARGET = "0.4213"
MEASURED = "0.0123"
EVIDENCE_PATH_PART = "evidence/"


def _contract() -> dict[str, object]:
    return {
        "mode": "enforce",
        "success_criteria": [
            {
                "kind": "state",
                "id": "cube_in_zone",
                "tool_id": "world.scene_state",
                "arguments": {"target": [float(TARGET), -0.1]},
                "predicate": {"op": "less_than", "value_path": "distance", "value": 0.02},
            },
            {
                "kind": "vision",
                "id": "red_in_green",
                "object_color": "red",
                "target_color": "green",
            },
        ],
    }


def _frame(task_id: str, number: int, phase: str) -> dict[str, object]:
    artifact_id = f"ev-{task_id}-{number}"
    return EvidenceArtifact(
        artifact_id=artifact_id,
        task_id=task_id,
        revision_id=f"{task_id}-rev-1",
        record_id=None,
        source="scene",
        phase=phase,  # type: ignore[arg-type]
        seq=100 + number,
        captured_at_ns=1_764_000_000_000_000_000 + number,
        received_at_ns=1_764_000_000_100_000_000 + number,
        media_type="image/png",
        width=64,
        height=48,
        size=2048 + number,
        sha256=f"{number:064x}",
        path=f"{EVIDENCE_PATH_PART}{task_id}/{artifact_id}.png",
    ).to_dict()


def record_task(store: AgentTaskStore, task_id: str, *, frames: int = 2) -> None:
    """One finished task of ``SKILL``: a record with a raw result, ``frames`` evidence
    frames (the last one a failed capture whose message quotes a path) and a verdict."""
    store.create_task(
        task_id=task_id,
        revision_id=f"{task_id}-rev-1",
        binding_id="bind-1",
        goal=f"put the red cube at x={TARGET}",
        contract=_contract(),
    )
    store.record_intent(
        NewRecord(
            record_id=f"{task_id}-rec",
            task_id=task_id,
            revision_id=f"{task_id}-rev-1",
            tool_id="arm.move_to_pose",
            semantics="action",
            caller_id=f"paos:{task_id}",
            arguments_sha256="a" * 64,
            spec_sha256="s" * 64,
        )
    )
    store.record_terminal(
        f"{task_id}-rec", "completed", result={"pose": [float(MEASURED), 0.2, 0.3]}
    )
    for number in range(frames):
        artifact = _frame(task_id, number, "before" if number == 0 else "after")
        if number == frames - 1 and frames > 1:
            artifact.update(
                sha256=None,
                path=None,
                size=None,
                error={"code": "EVIDENCE_WRITE_FAILED", "message": f"{store.path}: disk full"},
            )
        store.add_evidence(artifact)
    verdict = {
        "status": "success",
        "detail": f"cube at distance {MEASURED}",
        "results": [
            {"criterion_id": "cube_in_zone", "status": "pass", "detail": f"d={MEASURED}"},
            {"criterion_id": "red_in_green", "status": "inconclusive", "detail": "no blob"},
        ],
        "evidence_refs": [],
    }
    store.set_verdict(f"{task_id}-rev-1", verdict)
    store.transition(task_id, "succeeded", allowed_from={"executing"})


def recorded_tasks(home: PaosHome, count: int, *, frames: int = 2) -> list[str]:
    """``count`` finished tasks in ``home``'s real task store; their ids, oldest first."""
    store = AgentTaskStore(home.store_path)
    try:
        store.put_binding(
            "bind-1",
            "b" * 64,
            {
                "skill": SKILL,
                "version": "1.0.0",
                "gateway_url": "http://127.0.0.1:9201",
                "runtime_instance": RUNTIME_INSTANCE,
            },
        )
        ids = [f"task-{n}" for n in range(count)]
        for task_id in ids:
            record_task(store, task_id, frames=frames)
    finally:
        store.close()
    return ids
