"""Dora's own diagnostics are told from a node's lines, in both spellings Dora writes."""

from __future__ import annotations

import json

from doraforge.skill_runtime.node_logs import parse, select

# As `dora logs --log-format json` streams them from the coordinator (dora-cli 1.1).
STREAMED_DIAGNOSTIC = json.dumps(
    {
        "node_id": "camera",
        "level": "WARN",
        "target": "dora_node_api::event_stream::scheduler",
        "message": "Discarding event for input `image_wrist` due to queue size limit",
        "timestamp": "2026-12-01T11:35:16.740Z",
    }
)
ZENOH_DIAGNOSTIC = json.dumps(
    {
        "node_id": "gateway",
        "level": "WARN",
        "target": "zenoh::api::admin",
        "message": "Unable to find transport for link event: 23d6fe66",
        "timestamp": "2026-12-01T11:42:38.117Z",
    }
)
# As Dora keeps them in out/<uuid>/log_<node>.jsonl.
FILED_NODE_LINE = json.dumps(
    {
        "ts": "2026-12-01T11:35:05.069Z",
        "level": "stdout",
        "node": "gateway",
        "stream": "stdout",
        "msg": "gateway pick-place-sim starting HTTP on 127.0.0.1:9201",
    }
)


def test_a_dora_crate_target_is_a_diagnostic_and_a_node_print_is_not() -> None:
    assert parse(STREAMED_DIAGNOSTIC).from_dora
    assert parse(ZENOH_DIAGNOSTIC).from_dora
    line = parse(FILED_NODE_LINE)
    assert not line.from_dora
    assert (line.node, line.level) == ("gateway", "STDOUT")
    assert line.render().endswith("gateway: gateway pick-place-sim starting HTTP on 127.0.0.1:9201")


def test_select_hides_and_counts_diagnostics_and_keeps_the_last_lines() -> None:
    lines = [STREAMED_DIAGNOSTIC, FILED_NODE_LINE, ZENOH_DIAGNOSTIC, FILED_NODE_LINE, ""]
    shown, hidden = select(lines, keep_dora=False, last=1)
    assert hidden == 2
    assert len(shown) == 1
    assert "starting HTTP" in shown[0]


def test_keep_dora_keeps_everything_rendered() -> None:
    shown, hidden = select([STREAMED_DIAGNOSTIC, FILED_NODE_LINE], keep_dora=True)
    assert hidden == 0
    assert "camera: Discarding event" in shown[0]


def test_a_line_that_is_not_json_is_kept_as_it_is() -> None:
    line = parse("(dora logs: coordinator not reachable)\n")
    assert not line.from_dora
    assert line.render() == "(dora logs: coordinator not reachable)"
