"""A real ``dora run dataflows/mock.yml`` for end-to-end tests, driven only over HTTP.

Each test module shares one running dataflow (``stack``); a test that destroys state it
cannot restore asks for its own (``fresh_stack``). Every dataflow gets a free HTTP port,
a private Dora coordinator port, a journal and a log file under the test's tmp directory.
Teardown always stops the whole process group (SIGINT, then SIGKILL) and fails the run if
any node process outlives it. A failing test gets the tail of the Dora log in its report.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from doraforge.dataflows import DATAFLOWS
from doraforge.skill_runtime.dora_run import Dataflow, dora_environment, free_port
from tests.support.processes import descendants
from tests.support.waiting import eventually

MOCK_DATAFLOW = DATAFLOWS / "mock.yml"
GATEWAY_MARK = "-m doraforge.gateway"
MOCK_MARK = "-m doraforge.nodes.mock"
START_TIMEOUT_S = 60.0
START_ATTEMPTS = 3
STOP_GRACE_S = 15.0
LOG_TAIL_LINES = 80


class GatewayClient:
    """A running Gateway on loopback ``port``, driven over HTTP, and the log that tells
    what its dataflow did; what every e2e cell has, however it was started."""

    def __init__(self, port: int, log_path: Path, token: str | None = None):
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self.token = token
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        self.http = httpx.Client(base_url=self.base_url, timeout=10.0, headers=headers)

    # ---------------------------------------------------------------- HTTP helpers

    def data(self, response: httpx.Response, status: int = 200) -> Any:
        """Assert the status and the success envelope; return ``data``."""
        assert response.status_code == status, response.text
        body = response.json()
        assert body["ok"] is True, body
        return body["data"]

    def context(self, tool_id: str = "mock.move") -> dict[str, Any]:
        context: dict[str, Any] = self.data(self.http.get(f"/tools/{tool_id}/context"))
        return context

    def ready(self, tool_id: str = "mock.move") -> bool:
        """Whether the Gateway answers and calls ``tool_id`` ready; never raises on I/O."""
        try:
            response = self.http.get(f"/tools/{tool_id}/context", timeout=2.0)
        except httpx.TransportError:
            return False
        return response.status_code == 200 and response.json()["data"]["ready"] is True

    def invoke(self, tool_id: str, arguments: dict[str, Any], **body: Any) -> httpx.Response:
        return self.http.post(f"/tools/{tool_id}:invoke", json={"arguments": arguments, **body})

    def start(self, tool_id: str, arguments: dict[str, Any], **body: Any) -> dict[str, Any]:
        """Admit an Action or Session (202) and return the admission document."""
        admission: dict[str, Any] = self.data(self.invoke(tool_id, arguments, **body), 202)
        return admission

    def admit(self, tool_id: str, arguments: dict[str, Any], within: float = 60.0) -> str:
        """Admit an Action once its provider takes it, and return its invocation id: a
        robot provider refuses (422, retryable, e.g. ``ARM_NO_STATE``) until the world's
        joint state has reached it."""
        admitted: list[str] = []

        def taken() -> bool:
            response = self.invoke(tool_id, arguments)
            if response.status_code == 422 and response.json()["error"]["retryable"]:
                return False
            admitted.append(self.data(response, 202)["invocation_id"])
            return True

        eventually(taken, within=within, what=f"{tool_id} to be admitted", detail=self.tail)
        return admitted[0]

    def status(self, invocation_id: str) -> dict[str, Any]:
        status: dict[str, Any] = self.data(self.http.get(f"/invocations/{invocation_id}"))
        return status

    def poll(
        self,
        invocation_id: str,
        until: Callable[[dict[str, Any]], bool],
        timeout_s: float = 20.0,
        seen: list[str] | None = None,
    ) -> dict[str, Any]:
        """Poll the invocation until ``until(status)``; ``seen`` collects every phase read."""
        latest: dict[str, Any] = {}

        def check() -> bool:
            latest.update(self.status(invocation_id))
            if seen is not None:
                seen.append(latest["phase"])
            return until(latest)

        eventually(
            check,
            within=timeout_s,
            what=f"invocation {invocation_id} to satisfy the condition",
            detail=lambda: f"last status {latest}\n{self.tail()}",
        )
        return latest

    def terminal(self, invocation_id: str, timeout_s: float = 20.0, **kw: Any) -> dict[str, Any]:
        return self.poll(invocation_id, lambda status: status["terminal"], timeout_s, **kw)

    def tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return f"<no log: {exc}>"
        return "\n".join(text.splitlines()[-lines:])


class MockStack(GatewayClient):
    """One running mock dataflow: its HTTP client, log, journal and node processes."""

    def __init__(
        self,
        dataflow: Dataflow,
        port: int,
        log_path: Path,
        journal: Path,
        token: str | None = None,
    ):
        super().__init__(port, log_path, token)
        self.dataflow = dataflow
        self.journal = journal

    # ---------------------------------------------------------------- processes

    @property
    def dora(self) -> psutil.Process:
        """The ``dora run`` process (its children are the nodes)."""
        assert self.dataflow.process is not None
        return psutil.Process(self.dataflow.process.pid)

    def nodes(self, mark: str) -> list[psutil.Process]:
        """Live node processes whose command line contains ``mark``."""
        found = []
        for child in descendants(self.dora):
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                alive = child.is_running() and child.status() != psutil.STATUS_ZOMBIE
                if alive and mark in " ".join(child.cmdline()):
                    found.append(child)
        return found

    def node(self, mark: str) -> psutil.Process:
        """The single live node process for ``mark`` (``GATEWAY_MARK`` or ``MOCK_MARK``)."""
        found = self.nodes(mark)
        assert len(found) == 1, f"expected one {mark!r} node, found {found}"
        return found[0]

    def owns_port(self) -> bool:
        """Whether a Gateway node of this dataflow listens on ``self.port``."""
        for process in self.nodes(GATEWAY_MARK):
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                for connection in process.net_connections("tcp"):
                    if (
                        connection.status == psutil.CONN_LISTEN
                        and connection.laddr.port == self.port
                    ):
                        return True
        return False

    def gateway_instance(self) -> str:
        """The running Gateway's ``instance_id`` (a new one after every restart)."""
        instance_id: str = self.data(self.http.get("/tools"))["instance_id"]
        return instance_id

    def kill_gateway(self, timeout_s: float = 30.0) -> str:
        """SIGKILL the Gateway node, wait until Dora's restart answers; its new instance id."""
        before = self.gateway_instance()
        gateway = self.node(GATEWAY_MARK)
        gateway.kill()
        gateway.wait(timeout=10)

        def answering_again() -> bool:
            try:
                listing = self.http.get("/tools", timeout=2.0)
            except httpx.TransportError:
                return False
            return listing.status_code == 200 and (listing.json()["data"]["instance_id"] != before)

        eventually(
            answering_again, within=timeout_s, what="the Gateway to come back", detail=self.tail
        )
        assert self.node(GATEWAY_MARK).pid != gateway.pid
        return self.gateway_instance()

    def port_conflict(self) -> bool:
        """Whether the Gateway reported that its port was already taken."""
        return "address already in use" in self.tail(400)

    # ---------------------------------------------------------------- HTTP helpers

    def query(self, operation: str, arguments: dict[str, Any], **body: Any) -> dict[str, Any]:
        """Invoke a ``mock`` Query and return its terminal result."""
        response = self.http.post(
            f"/tools/mock/{operation}:invoke", json={"arguments": arguments, **body}
        )
        data = self.data(response)
        assert data["response"]["outcome"] == "completed", data
        result: dict[str, Any] = data["response"]["result"]
        return result

    def stats(self) -> dict[str, Any]:
        """``mock.stats`` outputs: invoke counts and the provider's instance id."""
        result = self.query("stats", {})
        assert result["status"] == "succeeded", result
        outputs: dict[str, Any] = result["outputs"]
        return outputs

    def wait_idle(self, timeout_s: float = 20.0) -> None:
        """Wait until no ``move`` holds a Gateway slot or runs at the provider."""

        def idle() -> bool:
            context = self.context("mock.move")
            endpoint = context["endpoint_status"] or {}
            active = endpoint.get("details", {}).get("active_by_operation", {}).get("move", 0)
            ready: bool = context["ready"]
            return ready and context["active_invocations"] == 0 and active == 0

        eventually(idle, within=timeout_s, what="mock.move to go idle", detail=self.context)

    def sse(
        self,
        invocation_id: str,
        stop: Callable[[list[dict[str, Any]]], bool],
        timeout_s: float = 20.0,
        last_event_id: int | None = None,
    ) -> list[dict[str, Any]]:
        """Read the SSE stream into ``[{id, event, data}]`` until ``stop(events)`` or its end."""
        events: list[dict[str, Any]] = []
        headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
        deadline = time.monotonic() + timeout_s
        current: dict[str, Any] = {}
        with self.http.stream(
            "GET", f"/invocations/{invocation_id}/events", headers=headers, timeout=timeout_s
        ) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-type"].startswith("text/event-stream")
            for line in response.iter_lines():
                assert time.monotonic() < deadline, f"SSE ran past {timeout_s}s: {events}"
                if line.startswith(":"):
                    continue
                if not line:
                    if current:
                        events.append(current)
                        current = {}
                        if stop(events):
                            break
                    continue
                field, _, value = line.partition(": ")
                if field == "id":
                    current[field] = int(value)
                elif field == "data":
                    current[field] = json.loads(value)
                else:
                    current[field] = value
        return events

    # ---------------------------------------------------------------- logs, lifecycle

    def close(self) -> None:
        """Stop the dataflow group and assert that no node process outlived it."""
        self.http.close()
        try:
            below = descendants(self.dora)
        except psutil.NoSuchProcess:
            below = []
        self.dataflow.stop(grace_s=STOP_GRACE_S)
        _, alive = psutil.wait_procs(below, timeout=STOP_GRACE_S)
        for process in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        psutil.wait_procs(alive, timeout=5)
        assert not alive, f"processes outlived the dataflow: {alive}\n{self.tail()}"


def _launch(
    directory: Path,
    attempt: int,
    dataflow: Path,
    env_extra: dict[str, str],
    token: str | None = None,
) -> MockStack:
    """Start one ``dora run`` with fresh ports; logs and journal go under ``directory``.
    With ``token`` the stack's client sends it (the Gateway must be given it too)."""
    port = free_port()
    journal = directory / "gateway.journal"
    log_path = directory / f"dora-run-{attempt}.log"
    env = dora_environment(
        os.environ,
        DORAFORGE_GATEWAY_PORT=str(port),
        DORAFORGE_GATEWAY_JOURNAL=str(journal),
        DORA_COORDINATOR_PORT=str(free_port()),
        **env_extra,
    )
    with log_path.open("wb") as log:  # the child keeps its own descriptor
        running = Dataflow(dataflow, env, log=log).start()
    return MockStack(running, port, log_path, journal, token)


def _started(stack: MockStack, ready_tools: tuple[str, ...]) -> bool:
    """Ready, served by this dataflow's own Gateway (not a stranger on a reused port)."""
    return all(stack.ready(tool) for tool in ready_tools) and stack.owns_port()


@contextlib.contextmanager
def dataflow_stack(
    directory: Path,
    dataflow: Path = MOCK_DATAFLOW,
    ready_tools: tuple[str, ...] = ("mock.move",),
    env_extra: dict[str, str] | None = None,
    start_timeout_s: float = START_TIMEOUT_S,
    token: str | None = None,
) -> Iterator[MockStack]:
    """Start ``dataflow``, wait until every tool in ``ready_tools`` is ready, always stop it.

    ``token`` is the bearer token the stack's client presents; hand the Gateway the same
    token through ``env_extra`` (``DORAFORGE_GATEWAY_TOKEN_FILE``).

    ``free_port`` cannot reserve a port, so another process on this machine may take it
    before the Gateway binds; such a start is stopped and retried on new ports.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, START_ATTEMPTS + 1):
        stack = _launch(directory, attempt, dataflow, env_extra or {}, token)

        def settled(s: MockStack = stack) -> bool:
            return _started(s, ready_tools) or s.port_conflict() or not s.dataflow.running()

        try:
            eventually(
                settled,
                within=start_timeout_s,
                what=f"{dataflow.name} to be ready, lose its port or exit",
                detail=stack.tail,
                interval=0.1,
            )
            if _started(stack, ready_tools) and stack.dataflow.running():
                yield stack
                return
            if not stack.port_conflict() or attempt == START_ATTEMPTS:
                pytest.fail(
                    f"{dataflow.name} not ready within {start_timeout_s}s "
                    f"(dora run alive: {stack.dataflow.running()})\n{stack.tail()}"
                )
        finally:
            stack.close()


def mock_stack(directory: Path) -> contextlib.AbstractContextManager[MockStack]:
    """The mock dataflow, ready when ``mock.move`` is."""
    return dataflow_stack(directory)


SIM_TOOLS = ("world.scene_state", "arm.move_to_pose", "gripper.grasp", "camera.capture")
SIM_ENV = {"DORAFORGE_SIM_UNPACED": "1", "DORAFORGE_LOG_LEVEL": "WARNING"}


@contextlib.contextmanager
def sim_stack(directory: Path) -> Iterator[MockStack]:
    """The simulated cell (unpaced physics), ready when its robot tools are and the arm
    has joint state.

    ``world.scene_state`` is ready only once the world reports ``ready`` (its first physics
    step taken: its ToolSpec's ``endpoint_ready``), so no scene wait is needed here. The arm
    reports no status of its own, so its first joint state (one hop after the world's
    first step; an Action admitted before it is a retryable ``ARM_NO_STATE``) is checked
    with one ``arm_state`` Query, which answers at once once the world is ready."""
    with dataflow_stack(
        directory, DATAFLOWS / "sim.yml", SIM_TOOLS, SIM_ENV, start_timeout_s=120.0
    ) as running:
        eventually(
            lambda: _arm_has_state(running),
            within=60.0,
            what="the arm's first joint state",
            detail=running.tail,
        )
        yield running


def _arm_has_state(stack: MockStack) -> bool:
    response = stack.http.post("/tools/arm/arm_state:invoke", json={"arguments": {}})
    if response.status_code != 200:
        return False
    result = response.json()["data"]["response"]["result"]
    return bool(result["status"] == "succeeded" and result["outputs"].get("stale_ms", 1e9) < 500)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockStack]:
    """One mock dataflow shared by the tests of a module."""
    with mock_stack(tmp_path_factory.mktemp("mock-dataflow")) as running:
        yield running


@pytest.fixture
def fresh_stack(tmp_path: Path) -> Iterator[MockStack]:
    """A mock dataflow of its own, for a test that destroys state."""
    with mock_stack(tmp_path / "mock-dataflow") as running:
        yield running


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the Dora log tail of every stack a failed test used to its report."""
    report = yield
    if report.failed:
        for value in getattr(item, "funcargs", {}).values():
            if isinstance(value, MockStack):
                report.sections.append((f"dora run log tail ({value.log_path})", value.tail()))
    return report
