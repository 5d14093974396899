"""Schemathesis against a real Gateway on ``dataflows/mock.yml``: zero 5xx, documented answers.

The live Gateway's own ``/openapi.json`` drives the run. Every operation gets a bounded
number of generated requests (valid and invalid, plus schemathesis's coverage cases:
boundary values, wrong media types, methods the path does not serve), and every answer
must be no server error, a documented status, a documented content type and the
documented body. Generated ids rarely name anything, so some path parameters are swapped
for real ones (the mock's tools, invocations this module admits) to reach the provider.

Inputs whose correct answer is a documented 5xx rather than a fault are kept out: a
deadline short enough to expire (``timeout_ms`` under :data:`MIN_FUZZ_TIMEOUT_MS`, a 504
by contract), admissions of the mock's session tool (its capacity fills: a retryable 503)
and ``GET /observations/state``, which takes no input and on a dataflow without a
joint-state source answers 503 ``FORGE_OBSERVATION_NO_STATE``.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
import schemathesis
from hypothesis import strategies as st
from schemathesis import BaseSchema, HookContext
from schemathesis.core.result import Ok
from schemathesis.engine import events, from_schema

from tests.e2e.conftest import MockStack, mock_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: Generated requests per operation in the fuzzing phase (coverage cases come on top).
MAX_EXAMPLES = 60
MIN_FUZZ_TIMEOUT_MS = 5_000
REQUEST_TIMEOUT_S = 10.0
#: Checks that a correct server passes; each failure names the request that broke it.
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "unsupported_method",
)
UNFUZZED_PATHS = ("/observations/state",)
#: A fixed seed keeps CI reproducible; set ``DORAFORGE_FUZZ_SEED`` to explore further.
SEED = int(os.environ.get("DORAFORGE_FUZZ_SEED", "20261201"))


def _config() -> schemathesis.Config:
    """Bounded generation and exactly :data:`CHECKS`; no stateful phase."""
    checks: dict[str, Any] = {"enabled": False}
    checks.update({name: {"enabled": True} for name in CHECKS})
    return schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "generation": {"max-examples": MAX_EXAMPLES, "mode": "all"},
            "phases": {"stateful": {"enabled": False}},
            "checks": checks,
            "request-timeout": REQUEST_TIMEOUT_S,
            "continue-on-failure": True,
        }
    )


@dataclass(frozen=True)
class KnownIds:
    """Real ids a path parameter may take instead of a generated one.

    ``terminal`` invocations are the only ones offered to the event stream, which stays
    open while an invocation runs. Sessions are not offered for admission: the mock's
    session operation takes ``{}``, so the fuzzer would fill its ``max_concurrency`` and
    earn the documented retryable 503.
    """

    by_name: Mapping[str, Sequence[str]]
    terminal: Sequence[str]
    sessions: Sequence[str]

    def choices(self, path: str, name: str) -> list[str]:
        """The real values offered for parameter ``name`` of the operation at ``path``."""
        values = list(self.by_name.get(name, ()))
        if name == "invocation_id" and path.endswith("/events"):
            return list(self.terminal)
        if name == "tool_id" and path.endswith(":invoke"):
            return [value for value in values if value not in self.sessions]
        return values


def _admitted(gateway: MockStack, tool_id: str, arguments: dict[str, Any]) -> str:
    invocation_id: str = gateway.start(tool_id, arguments)["invocation_id"]
    return invocation_id


def _known_ids(gateway: MockStack) -> KnownIds:
    """Tools from the live catalog and invocations in each state the fuzzer can poke."""
    catalog = gateway.data(gateway.http.get("/tools"))["tools"]
    done = _admitted(gateway, "mock.move", {"duration_s": 0, "behaviour": "succeed"})
    gateway.terminal(done)
    running = [
        _admitted(gateway, "mock.move", {"duration_s": 600, "behaviour": "hang"}),
        _admitted(gateway, "mock.stream", {}),
    ]
    return KnownIds(
        by_name={
            "tool_id": [tool["tool_id"] for tool in catalog],
            "endpoint_id": sorted({tool["endpoint_id"] for tool in catalog}),
            "operation": sorted({tool["operation"] for tool in catalog}),
            "invocation_id": [done, *running],
        },
        terminal=[done],
        sessions=[tool["tool_id"] for tool in catalog if tool["semantics"] == "session"],
    )


def _register_hooks(schema: BaseSchema, known: KnownIds) -> None:
    @schema.hook("flatmap_path_parameters")
    def real_ids(context: HookContext, path_parameters: dict[str, Any]) -> Any:
        if not path_parameters or context.operation is None:
            return st.just(path_parameters)
        path = context.operation.path
        return st.fixed_dictionaries(
            {
                name: st.sampled_from([value, *known.choices(path, name)])
                for name, value in path_parameters.items()
            }
        )

    @schema.hook("map_body")
    def generous_deadline(context: HookContext, body: Any) -> Any:
        timeout = body.get("timeout_ms") if isinstance(body, dict) else None
        if type(timeout) is int and 1 <= timeout < MIN_FUZZ_TIMEOUT_MS:
            return {**body, "timeout_ms": MIN_FUZZ_TIMEOUT_MS}
        return body


@dataclass
class RunReport:
    """What one schemathesis run did: answers by operation, 5xx answers, failed checks."""

    statuses: dict[str, list[int]] = field(default_factory=dict)
    server_errors: list[str] = field(default_factory=list)
    failed_checks: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def add_scenario(self, event: events.ScenarioFinished) -> None:
        recorder = event.recorder
        for case_id, interaction in recorder.interactions.items():
            response = interaction.response
            status = -1 if response is None else response.status_code
            self.statuses.setdefault(recorder.label, []).append(status)
            if status >= 500 or status < 0:
                request = interaction.request
                self.server_errors.append(f"{request.method} {request.uri} -> {status} ({case_id})")
        for checks in recorder.checks.values():
            for check in checks:
                info = check.failure_info
                if info is not None:
                    failure = info.failure
                    self.failed_checks.append(
                        f"{failure.operation}: {failure.title}\n{failure.message}\n"
                        f"reproduce: {info.code_sample}"
                    )

    def summary(self) -> str:
        """Answers per operation, e.g. ``GET /tools: 31 requests {200: 30, 405: 1}``."""
        lines = []
        for label, statuses in sorted(self.statuses.items()):
            counts = dict(sorted(Counter(statuses).items()))
            lines.append(f"{label}: {len(statuses)} requests {counts}")
        return "\n".join(lines)


def run_schemathesis(schema: BaseSchema) -> RunReport:
    """Run every phase the config enables and collect the outcome; never raises on findings."""
    report = RunReport()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            report.add_scenario(event)
        elif isinstance(event, events.NonFatalError | events.FatalError):
            report.errors.append(repr(event))
        elif isinstance(event, events.EngineFinished):
            report.failed_checks.extend(f"{f.operation}: {f.title}" for f in event.failures)
    return report


def _operations(schema: BaseSchema) -> list[Any]:
    """Every operation of ``schema``; a definition schemathesis cannot load fails here."""
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result.err()
        operations.append(result.ok())
    return operations


def _listing(lines: Iterable[str]) -> str:
    return "\n".join(sorted(set(lines)))


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockStack]:
    """A mock dataflow of this module's own: the fuzzer leaves invocations behind."""
    with mock_stack(tmp_path_factory.mktemp("fuzz-dataflow")) as running:
        yield running


@pytest.fixture(scope="module")
def gateway_schema(gateway: MockStack) -> BaseSchema:
    """The live Gateway's OpenAPI document, loaded the way a client would."""
    schema: BaseSchema = schemathesis.openapi.from_url(
        f"{gateway.base_url}/openapi.json", config=_config(), timeout=REQUEST_TIMEOUT_S
    )
    schema = schema.exclude(path=list(UNFUZZED_PATHS))
    _register_hooks(schema, _known_ids(gateway))
    return schema


def test_every_generated_request_gets_a_documented_non_5xx_answer(
    gateway: MockStack, gateway_schema: BaseSchema
) -> None:
    instance = gateway.gateway_instance()
    report = run_schemathesis(gateway_schema)
    assert report.errors == [], report.summary()
    assert report.server_errors == [], f"{_listing(report.server_errors)}\n{report.summary()}"
    assert report.failed_checks == [], f"{_listing(report.failed_checks)}\n{report.summary()}"
    fuzzed = {label for label, statuses in report.statuses.items() if statuses}
    documented = {f"{op.method.upper()} {op.path}" for op in _operations(gateway_schema)}
    assert fuzzed >= documented
    assert gateway.gateway_instance() == instance  # no crash and restart between requests
