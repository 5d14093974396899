"""Judging cases and the report: one fresh contract per case, one outcome per case."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import jsonschema

from doraforge.registry.context.eval.contract import Answer, open_contract
from doraforge.registry.context.eval.fakes import FakeSource
from doraforge.registry.context.eval.loading import LoadedFixture
from doraforge.registry.context.eval.matchers import (
    MISSING,
    brief,
    brief_text,
    collection,
    collection_problem,
    dumps,
    same,
    select,
    value_problem,
)
from doraforge.registry.context.eval.schema import (
    Case,
    Expectation,
    Fixture,
    Inspected,
    Request,
    SourceSpec,
    Via,
)
from doraforge.registry.context.source import Scope
from doraforge.wire.json_schema import SchemaRefused, local_validator

type Outcome = Literal["pass", "fail", "error", "skip"]

_ANSWERS = {"result": "a result", "toolError": "a tool error", "fault": "a protocol fault"}
#: One case may take this long before it is reported as an error.
CASE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class CaseResult:
    """One case's line of the report."""

    id: str
    outcome: Outcome
    source: str
    via: Via
    tool: str
    pointers: list[str]
    reason: str | None = None
    pointer: str | None = None


class _CaseRun:
    """One case against fresh contracts built from its fake sources."""

    def __init__(self, case: Case, fixture: Fixture) -> None:
        self.case = case
        sources = case.sources
        self.specs: Mapping[Scope, SourceSpec] = (
            fixture.sources[sources] if isinstance(sources, str) else sources
        )

    async def judge(self) -> tuple[str, str] | None:
        """``(pointer, reason)`` of the first expectation that fails, or ``None``."""
        contract, sources = open_contract(self.case, self.case.via, self.specs)
        try:
            answer = await contract.ask(self.case.request)
        finally:
            await contract.aclose()
        for expectation in self.case.expect:
            reason = await self._check(expectation, answer, sources)
            if reason is not None:
                return expectation.label, f"{expectation.label} {reason}"
        return None

    async def _check(
        self, e: Expectation, answer: Answer, sources: Mapping[Scope, FakeSource]
    ) -> str | None:
        if e.inspected is not None:
            return _inspected_problem(e.inspected, sources)
        if answer.kind != e.answer:
            wanted = _ANSWERS[e.answer]
            return f"expected {wanted}; {self.case.request.target} answered {answer.summary()}"
        selected = select(answer.document, e.pointer)
        present = [value is not MISSING for _, value in selected]
        if e.exists is True and not (present and all(present)):
            return "does not exist"
        if e.exists is False and any(present):
            return f"exists: {brief(next(v for _, v in selected if v is not MISSING))}"
        if e.exists is None and not selected:
            return "selects nothing"
        for where, value in selected:
            if (value is not MISSING or e.exists is None) and (problem := value_problem(e, value)):
                return problem if where == e.pointer else f"({where}) {problem}"
        if problem := collection_problem(e, collection(selected, e.pointer)):
            return problem
        if e.fits_output_schema:
            return await self._schema_problem(answer.document)
        return await self._same_as_problem(e, selected)

    async def _schema_problem(self, result: Any) -> str | None:
        """Why ``result`` breaks the output schema the same kind of contract advertises for
        the tool called (read from its ``tools/list``), or ``None``."""
        contract, _ = open_contract(self.case, self.case.via, self.specs)
        try:
            listed = await contract.ask(Request(method="tools/list"))
        finally:
            await contract.aclose()
        tools = listed.document.get("tools", []) if isinstance(listed.document, dict) else []
        tool = next((t for t in tools if t.get("name") == self.case.request.tool), None)
        if listed.kind != "result" or tool is None or "outputSchema" not in tool:
            return f"has no advertised output schema for {self.case.request.tool}"
        try:
            validator = local_validator(tool["outputSchema"])
        except SchemaRefused as refused:
            return f"advertises an output schema it cannot be checked against: {refused}"
        problem = jsonschema.exceptions.best_match(validator.iter_errors(result))
        if problem is None:
            return None
        where = "/" + "/".join(str(part) for part in problem.absolute_path)
        return f"breaks the advertised output schema at {where}: {brief_text(problem.message)}"

    async def _same_as_problem(self, e: Expectation, selected: list[tuple[str, Any]]) -> str | None:
        if e.same_as is None:
            return None
        other = e.same_as
        contract, _ = open_contract(self.case, other.via or self.case.via, self.specs)
        try:
            answer = await contract.ask(other.request)
        finally:
            await contract.aclose()
        if answer.kind != "result":
            return f"cannot be compared: {other.request.target} answered {answer.summary()}"
        theirs = select(answer.document, other.pointer)
        mine, peer = collection(selected, e.pointer), collection(theirs, other.pointer)
        if other.unordered:
            mine, peer = sorted(mine, key=dumps), sorted(peer, key=dumps)
        if not same(mine, peer):
            target = f"{other.request.target} {other.pointer or '/'}"
            return f"is {brief(mine)}, but {target} is {brief(peer)}"
        return None


def _inspected_problem(inspected: Inspected, sources: Mapping[Scope, FakeSource]) -> str | None:
    source = sources.get(inspected.scope)
    if source is None:
        return f"names scope {inspected.scope}, which this case's sources do not have"
    if not source.inspected:
        return "was never read"
    if max(source.inspected) > inspected.at_most:
        return f"inspected {max(source.inspected)} records, over {inspected.at_most}"
    return None


async def run_case(case: Case, loaded: LoadedFixture) -> CaseResult:
    """One case's result; never raises for anything the contract does."""
    source = f"{loaded.name}:{loaded.lines.get(case.id, 0)}"
    pointers = [expectation.label for expectation in case.expect]
    line = CaseResult(case.id, "pass", source, case.via, case.request.target, pointers)
    if case.skip is not None:
        return _with(line, "skip", case.skip)
    try:
        async with asyncio.timeout(CASE_TIMEOUT_S):
            failed = await _CaseRun(case, loaded.fixture).judge()
    except TimeoutError:
        return _with(line, "error", f"no answer within {CASE_TIMEOUT_S:g} s")
    except Exception as exc:  # the contract crashed: an error outcome, not the eval's crash
        return _with(line, "error", f"{type(exc).__name__}: {brief_text(str(exc), 160)}")
    if failed is None:
        return line
    return _with(line, "fail", failed[1], pointer=failed[0])


def _with(
    line: CaseResult, outcome: Outcome, reason: str, pointer: str | None = None
) -> CaseResult:
    reason = " ".join(reason.split())  # one line, whatever the contract said
    return replace(line, outcome=outcome, reason=reason, pointer=pointer)


async def run_suite(loaded: LoadedFixture) -> list[CaseResult]:
    """Every case of ``loaded``, in order, each against its own fresh contract."""
    return [await run_case(case, loaded) for case in loaded.fixture.cases]


def report(loaded: LoadedFixture, results: Sequence[CaseResult], threshold: int) -> dict[str, Any]:
    """The JSON report: the suite, summary counts, whether fail + error is within
    ``threshold`` (``passed``), and one entry per case."""
    counts = {outcome: 0 for outcome in ("pass", "fail", "error", "skip")}
    for result in results:
        counts[result.outcome] += 1
    return {
        "suite": loaded.fixture.suite,
        "fixture": loaded.name,
        "threshold": threshold,
        "passed": counts["fail"] + counts["error"] <= threshold,
        "summary": {"total": len(results), **counts},
        "cases": [asdict(result) for result in results],
    }
