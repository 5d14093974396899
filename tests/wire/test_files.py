"""Whole-file writes: the new content replaces the old at once, and a failed write leaves
the old file and no temporary file behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from doraforge.wire.files import atomic_write_bytes, atomic_write_text


def test_a_write_creates_the_directory_and_replaces_the_file(tmp_path: Path) -> None:
    target = tmp_path / "state" / "skill.json"
    atomic_write_text(target, "old")
    atomic_write_text(target, "néw")
    assert target.read_text(encoding="utf-8") == "néw"
    assert sorted(p.name for p in target.parent.iterdir()) == ["skill.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "frame.png"
    atomic_write_bytes(target, b"old")

    def refuse(_src: str, _dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space"):
        atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frame.png"]
