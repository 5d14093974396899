"""A skill or dataflow that needs another Dora generation than the installed one is refused
up front, naming both (never a crash inside ``dora start``)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from doraforge.paos.home import PaosHome
from doraforge.skill_runtime import dora_generation
from doraforge.skill_runtime.dora_run import free_port
from doraforge.skill_runtime.errors import RuntimeStateError
from tests.skill_runtime.runtime_support import MOCK_DATAFLOW, SKILL, make_bundle, manager

SHIPPED = Path(__file__).resolve().parents[2] / "dataflows"
ZERO_X = "nodes:\n  - id: a\n    path: a.py\n"
ONE_X = MOCK_DATAFLOW.replace("  - id: gateway\n", "  - id: gateway\n    max_restarts: 5\n", 1)


def fake_dora(tmp_path: Path, version: str) -> str:
    """A ``dora`` that only answers ``--version`` with ``version``."""
    script = tmp_path / "dora"
    script.write_text(f"#!/bin/sh\necho 'dora-cli {version}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


@pytest.mark.parametrize(
    ("text", "parsed", "generation"),
    [
        ("dora-cli 1.1.0", (1, 1, 0), "1.x"),
        ("dora-cli 0.4.1", (0, 4, 1), "0.x"),
        ("?", None, "unknown"),
    ],
)
def test_versions_and_generations_are_read_from_the_cli_line(text, parsed, generation):
    assert dora_generation.version_tuple(text) == parsed
    assert dora_generation.generation(text) == generation


def test_the_shipped_dataflows_need_dora_1_by_their_restart_fields():
    for name in ("sim.yml", "mock.yml"):
        refused = dora_generation.refusal(SHIPPED / name, "0.4.1")
        assert refused is not None
        assert "needs Dora 1.x" in refused
        assert "0.4.1 (Dora 0.x)" in refused
        assert "max_restarts" in refused or "restart_policy" in refused
        assert "pip install 'dora-rs-cli>=1.1,<1.2'" in refused
        assert dora_generation.refusal(SHIPPED / name, "1.1.0") is None


def test_a_dataflow_without_generation_fields_runs_on_either(tmp_path: Path):
    flow = tmp_path / "flow.yml"
    flow.write_text(ZERO_X)
    assert dora_generation.refusal(flow, "0.4.1") is None
    assert dora_generation.refusal(flow, "1.1.0") is None
    assert dora_generation.refusal(tmp_path / "absent.yml", "1.1.0") is None


def test_a_1x_dataflow_on_another_generation_says_doraforge_runs_1x(tmp_path: Path):
    refused = dora_generation.refusal(SHIPPED / "mock.yml", "2.0.0")
    assert refused is not None
    assert "needs Dora 1.x" in refused
    assert "(Dora 2.x)" in refused


@pytest.fixture
def home(tmp_path: Path) -> PaosHome:
    return PaosHome(tmp_path / "home")


def test_start_refuses_a_1x_skill_on_a_0x_dora_naming_both(home: PaosHome, tmp_path: Path):
    assert ONE_X != MOCK_DATAFLOW
    make_bundle(home, gateway_port=free_port(), dataflow=ONE_X)
    with pytest.raises(RuntimeStateError) as raised:
        manager(home, dora=fake_dora(tmp_path, "0.4.1")).start(SKILL)
    assert raised.value.code == "SKILL_DORA_GENERATION"
    assert "needs Dora 1.x" in raised.value.message
    assert "0.4.1 (Dora 0.x)" in raised.value.message
    assert raised.value.details["installed"] == "0.4.1"


def test_start_refuses_an_old_dora_for_a_dataflow_without_generation_fields(
    home: PaosHome, tmp_path: Path
):
    make_bundle(home, gateway_port=free_port())  # its dataflow has no generation field
    with pytest.raises(RuntimeStateError) as raised:
        manager(home, dora=fake_dora(tmp_path, "0.4.1")).start(SKILL)
    assert raised.value.code == "SKILL_PREFLIGHT_FAILED"
    assert "older than 1.1" in raised.value.message
    assert "0.4.1" in raised.value.message
