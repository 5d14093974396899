"""The registry benchmark's in-process loop runs and reports consistent figures."""

from __future__ import annotations

import asyncio

from bench.registry import in_process


def test_in_process_benchmark_reports_a_ratio_from_its_own_figures() -> None:
    figures = asyncio.run(in_process(calls=50, rounds=1))
    assert figures["calls_per_round"] == 50
    assert figures["bare_validation_us"] > 0
    assert figures["call_us"] > 0
    ratio = figures["call_us"] / figures["bare_validation_us"]
    assert abs(figures["call_over_bare_validation"] - ratio) < 0.01
