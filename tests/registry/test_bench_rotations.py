"""``bench.support.rotations``: every configuration once per round, the order rotated, so
per-round ratios (``Rounds``) compare figures taken at the same moments of the machine;
and ``wait_http``'s failure when what should answer has ended."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from bench.support import Rounds, rotations, wait_http


def test_each_round_measures_every_configuration_in_a_rotated_order() -> None:
    order: list[tuple[int, int]] = []

    def measure(cells: int, index: int) -> float:
        order.append((index, cells))
        return float(cells * 10 + index)

    measured = rotations((1, 2, 4), 4, measure)
    assert [cells for index, cells in order if index == 0] == [1, 2, 4]
    assert [cells for index, cells in order if index == 1] == [2, 4, 1]
    assert [cells for index, cells in order if index == 2] == [4, 1, 2]
    assert [cells for index, cells in order if index == 3] == [1, 2, 4]
    assert measured[1] == {1: 11.0, 2: 21.0, 4: 41.0}
    scaling = Rounds(floor=tuple(r[1] for r in measured), subject=tuple(r[2] for r in measured))
    assert scaling.ratios == tuple((20 + i) / (10 + i) for i in range(4))


def test_show_sees_each_figure_as_it_is_taken() -> None:
    shown: list[tuple[int, str, int]] = []
    rotations(["a", "b"], 2, lambda name, index: index, show=lambda *a: shown.append(a))
    assert shown == [(0, "a", 0), (0, "b", 0), (1, "b", 1), (1, "a", 1)]


def test_no_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        rotations([], 3, lambda name, index: 0.0)


def test_wait_http_stops_waiting_once_what_should_answer_has_ended(tmp_path: Path) -> None:
    """A benchmark whose dataflow died says so at once, with the run's log, instead of
    polling a closed port for its whole timeout."""
    log = tmp_path / "run.log"
    log.write_text("gateway: address already in use\n", encoding="utf-8")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/tools"
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="stopped running") as refused:
        wait_http(url, 60, "gateway", log=log, running=lambda: False)
    assert time.monotonic() - started < 5
    assert "address already in use" in str(refused.value)
