"""A finished download's bar stops drawing, so the confirmation prompt after it stays put."""

from __future__ import annotations

import io

from doraforge.skill_runtime.download import terminal_progress


def test_the_bar_draws_nothing_after_the_download_is_complete() -> None:
    stream = io.StringIO()
    with terminal_progress(stream, label="bundle", interactive=True) as report:
        report(500, 1000)
        report(1000, 1000)
        drawn = stream.getvalue()
        stream.write("Install skill pick-place 1.0.0? [y/n]: ")
        report(1000, 1000)  # a late callback must not redraw either
    assert "bundle" in drawn
    assert stream.getvalue() == drawn + "Install skill pick-place 1.0.0? [y/n]: "


def test_a_bar_of_unknown_size_keeps_drawing_until_the_end() -> None:
    stream = io.StringIO()
    with terminal_progress(stream, label="bundle", interactive=True) as report:
        report(500, 0)
    assert "bundle" in stream.getvalue()


def test_nothing_is_drawn_until_bytes_arrive() -> None:
    stream = io.StringIO()
    with terminal_progress(stream, label="bundle", interactive=True):
        stream.write("Install skill pick-place 1.0.0? [y/n]: ")  # a cached bundle: no bytes
    assert stream.getvalue() == "Install skill pick-place 1.0.0? [y/n]: "
