"""The shipped agent-context suite fails a contract that breaks the spec: each broken
service below is the real :class:`ContextService` with one promise undone, run through the
eval's in-process contract, and the cases that guard that promise must fail."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from doraforge.registry.context.eval import contract, load_fixture, run_suite
from doraforge.registry.context.eval.runner import CaseResult
from doraforge.registry.context.service import ContextService, ContextSourceError


class LeaksText(ContextService):
    """Returns every item's private text as its summary, whatever the profile."""

    async def call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        result = await super().call(name, arguments)
        texts = await self._texts()
        for item in [*result.get("items", []), result.get("item")]:
            if isinstance(item, dict):
                item["summary"] = texts.get(item["ref"], "")
        return result

    async def _texts(self) -> dict[str, str]:
        texts: dict[str, str] = {}
        for source in self.sources.values():
            try:
                snapshot = await source.snapshot()
            except Exception:
                continue
            texts.update({item.ref: item.text for item in snapshot.items})
        return texts


class ReadsStaleAsFresh(ContextService):
    """Reports every answer as a live read."""

    async def call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        result = await super().call(name, arguments)
        if "sourceStatus" in result:
            result["sourceStatus"] = "fresh"
        return result


class HidesSourceErrors(ContextService):
    """Answers a failing source with an empty result."""

    async def call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return await super().call(name, arguments)
        except ContextSourceError:
            return {"items": [], "item": None, "total": 0, "truncated": False}


class HidesTruncation(ContextService):
    """Never says that coverage was partial."""

    async def call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        result = await super().call(name, arguments)
        return {**result, "truncated": False, "sourceTruncated": False}


class AddsAField(ContextService):
    """Answers with a member its advertised output schema does not have."""

    async def call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return {**await super().call(name, arguments), "debugPath": "/srv/cell"}


def outcomes(monkeypatch: pytest.MonkeyPatch, service: type[ContextService]) -> dict[str, str]:
    monkeypatch.setattr(contract, "ContextService", service)
    shipped = load_fixture()
    cases = [case for case in shipped.fixture.cases if case.via == "service"]
    in_process = replace(shipped, fixture=shipped.fixture.model_copy(update={"cases": cases}))
    results: list[CaseResult] = asyncio.run(run_suite(in_process))
    return {result.id: result.outcome for result in results}


def failed(found: dict[str, str]) -> set[str]:
    return {case_id for case_id, outcome in found.items() if outcome == "fail"}


def test_the_real_service_passes_every_in_process_case(monkeypatch: pytest.MonkeyPatch) -> None:
    found = outcomes(monkeypatch, ContextService)
    assert {outcome for outcome in found.values()} == {"pass"}


def test_a_service_that_returns_private_text_fails_the_privacy_cases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert failed(outcomes(monkeypatch, LeaksText)) >= {
        "metadata-matches-private-text-without-returning-it",
        "metadata-get-never-returns-text",
        "summaries-redact-secrets-emails-and-paths",
        "summaries-redact-phones-ips-coordinates-and-tokens",
        "summaries-search-never-leaks",
        "summaries-stay-within-320-characters",
    }


def test_a_service_that_reads_stale_as_fresh_fails_the_stale_cases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert failed(outcomes(monkeypatch, ReadsStaleAsFresh)) == {
        "stale-source-on-list",
        "stale-source-on-get",
        "stale-source-in-a-search-over-several-scopes",
    }


def test_a_service_that_hides_source_errors_fails_the_source_error_cases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert failed(outcomes(monkeypatch, HidesSourceErrors)) == {
        "source-error-on-list-is-a-tool-error",
        "source-error-on-search-is-a-tool-error",
        "source-error-on-get-is-a-tool-error",
        "source-error-names-what-to-do",
    }


def test_a_service_that_hides_truncation_fails_the_budget_cases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert failed(outcomes(monkeypatch, HidesTruncation)) >= {
        "search-limit-caps-items",
        "result-stays-within-20000-characters-and-5000-tokens",
        "scan-stops-at-1000-items-on-list",
        "scan-stops-at-1000-items-on-search",
        "scan-cap-on-get",
    }


def test_a_service_whose_results_break_their_schema_fails_the_schema_cases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert failed(outcomes(monkeypatch, AddsAField)) == {
        "profile-fits-its-output-schema",
        "search-fits-its-output-schema",
        "get-fits-its-output-schema",
        "list-cut-to-budget-fits-its-output-schema",
    }
