"""doraforge's table of generation-only dataflow forms against the installed Dora 1.1 CLI.

``dora validate`` (no coordinator, no nodes started) is the installed CLI's own reading of
a dataflow: every form the table calls 0.x-only must be refused by it, by name, and every
field the table calls 1.x-only must be one it knows. If a Dora upgrade changes either, this
fails before a user meets the difference.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from doraforge.skill_runtime import dora_generation
from doraforge.skill_runtime.dora_generation import FORMS, Form
from doraforge.skill_runtime.dora_run import dora_binary, dora_environment

pytestmark = pytest.mark.e2e

NODE = "  - id: a\n    path: python\n    args: a.py\n    outputs: [x]\n"
SINK = "  - id: b\n    path: python\n    args: a.py\n    inputs:\n      x: {source: a/x}\n"
EXPECTED = re.compile(r"unknown field `[^`]+`, expected one of (.*?)(?: at line|$)", re.M)
#: A valid Dora 1.x value for each 1.x-only input option.
INPUT_VALUES = {"input_timeout": "1.5", "queue_policy": "drop_oldest"}


def validate(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    """``dora validate`` on ``text`` written as a dataflow file (its node script beside it)."""
    (tmp_path / "a.py").write_text("")
    flow = tmp_path / "flow.yml"
    flow.write_text(text)
    return subprocess.run(
        [dora_binary(), "validate", "--offline", str(flow)],
        env=dora_environment({}),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )


def zero_x_dataflow(form: Form) -> str:
    """A dataflow that uses ``form`` where Dora 0.x put it."""
    block = {
        "communication": "communication:\n  _unstable_local: UnixDomain\n",
        "_unstable_deploy": "_unstable_deploy:\n  machine: A\n",
        "_unstable_debug": "_unstable_debug:\n  publish_all_messages_to_zenoh: true\n",
        "publish_all_messages_to_zenoh": "debug:\n  publish_all_messages_to_zenoh: true\n",
    }
    if form.scope in ("dataflow", "debug"):
        return block[form.field] + "nodes:\n" + NODE
    extra = {
        "custom": "    custom:\n      source: python\n",
        "_unstable_deploy": "    _unstable_deploy:\n      machine: A\n",
    }
    return "nodes:\n" + NODE + extra[form.field]


@pytest.mark.parametrize(
    "form", [f for f in FORMS if f.major == 0], ids=lambda f: f"{f.scope}.{f.field}"
)
def test_every_0x_form_of_the_table_is_refused_by_dora_1_by_name(
    tmp_path: Path, form: Form
) -> None:
    text = zero_x_dataflow(form)
    done = validate(tmp_path, text)
    assert done.returncode != 0, done.stdout
    assert f"unknown field `{form.field}`" in done.stdout + done.stderr
    (tmp_path / "flow.yml").write_text(text)
    refused = dora_generation.refusal(tmp_path / "flow.yml", "1.1.0")
    assert refused is not None
    assert f"uses {form.field}" in refused


def known_fields(tmp_path: Path, text: str) -> set[str]:
    """The fields Dora's own refusal of an unknown field lists as known."""
    done = validate(tmp_path, text)
    found = EXPECTED.search(done.stdout + done.stderr)
    assert found is not None, done.stdout + done.stderr
    return set(re.findall(r"`([^`]+)`", found.group(1)))


def test_every_1x_field_of_the_table_is_known_to_dora_1(tmp_path: Path) -> None:
    at_top = known_fields(tmp_path, "nonsense_field: 1\nnodes:\n" + NODE)
    at_node = known_fields(tmp_path, "nodes:\n" + NODE + "    nonsense_field: 1\n")
    known = {"dataflow": at_top, "node": at_node}
    for form in FORMS:
        if form.major == 1 and form.scope in known:
            assert form.field in known[form.scope], form
    assert "restart_policy" in at_node  # both generations have it; the table leaves it out


@pytest.mark.parametrize("field", sorted(INPUT_VALUES))
def test_every_1x_input_option_of_the_table_is_accepted_by_dora_1(
    tmp_path: Path, field: str
) -> None:
    assert Form("input", field, 1) in FORMS
    sink = SINK.replace("{source: a/x}", f"{{source: a/x, {field}: {INPUT_VALUES[field]}}}")
    done = validate(tmp_path, "nodes:\n" + NODE + sink)
    assert done.returncode == 0, done.stdout + done.stderr
