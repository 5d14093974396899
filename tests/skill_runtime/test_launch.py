"""The launch copy reads a bundle's dataflow as strict YAML before Dora ever sees it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.skill_runtime.launch import write_launch_copy

VALUES = {"PAOS_SKILL_ROOT": "/opt/skills/demo", "FORGE_RUNTIME_BIN": "/opt/venv/bin"}


def _dataflow(tmp_path: Path, text: str) -> Path:
    source = tmp_path / "bundle" / "profiles" / "sim"
    source.mkdir(parents=True)
    (source / "dataflow.yml").write_text(text)
    return source / "dataflow.yml"


def test_a_duplicate_key_in_the_dataflow_is_refused_naming_the_field_and_file(
    tmp_path: Path,
) -> None:
    dataflow = _dataflow(
        tmp_path, "nodes:\n  - id: gateway\n    path: dora-echo\n    path: other-binary\n"
    )
    with pytest.raises(RuntimeStateError) as raised:
        write_launch_copy(dataflow, tmp_path / "launch", VALUES)
    assert raised.value.code == "SKILL_DATAFLOW_INVALID"
    assert raised.value.details == {"file": str(dataflow)}
    assert "nodes.0.path: " in raised.value.message
    assert "duplicate key 'path'" in raised.value.message


def test_anchors_in_a_dataflow_still_launch(tmp_path: Path) -> None:
    (tmp_path / "bundle" / "profiles" / "sim" / "nodes").mkdir(parents=True)
    (tmp_path / "bundle" / "profiles" / "sim" / "nodes" / "a.py").write_text("")
    dataflow = tmp_path / "bundle" / "profiles" / "sim" / "dataflow.yml"
    dataflow.write_text(
        "nodes:\n"
        "  - id: a\n    path: nodes/a.py\n    env: &env {LOG: yes}\n"
        "  - id: b\n    path: dora-echo\n    env: *env\n"
    )
    launch = write_launch_copy(dataflow, tmp_path / "launch", VALUES)
    nodes = yaml.safe_load(launch.read_text())["nodes"]
    assert nodes[1]["env"] == {"LOG": "yes"}  # a string, as Dora's YAML 1.2 reads it
