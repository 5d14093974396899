"""The operator's MCP servers file (``registry.sources.saved``): what it keeps, how it lays
over the config, and how it refuses a file it cannot read.

A real ``doraforge serve`` restart keeps them in ``tests/e2e/registry/test_mcp_sources_e2e.py``.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from doraforge.registry.errors import Unprocessable
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings
from doraforge.registry.sources.config import CredentialRef, parse_server
from doraforge.registry.sources.saved import FILE_NAME, SavedServers, SourcesFileError

CONFIGURED = {
    "time": parse_server("time", {"command": "time-server"}),
    "files": parse_server("files", {"command": "files-server"}),
}


def test_a_put_server_round_trips_with_its_credential_names_never_values(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    config = parse_server(
        "src",
        {
            "command": "python",
            "args": ["-m", "srv"],
            "env": {"MODE": "fast", "KEY": {"credential": "src_key"}},
            "limits": {"memory_mb": 256},
            "egressHosts": ["api.example.org"],
        },
    )
    SavedServers(path).put("src", config)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["servers"]["src"]["env"]["KEY"] == {"credential": "src_key"}
    again = SavedServers.open(path)
    assert again.servers == {"src": config}
    assert again.servers["src"].env["KEY"] == CredentialRef(credential="src_key")
    assert again.servers["src"].limits.memory_mb == 256


def test_the_operators_entries_replace_the_configs_and_tombstones_drop_them(
    tmp_path: Path,
) -> None:
    saved = SavedServers(tmp_path / FILE_NAME)
    replacement = parse_server("time", {"command": "other-time", "tier": 2})
    saved.put("time", replacement)
    saved.delete("files", configured=True)
    started = SavedServers.open(saved.path).overlay(CONFIGURED)
    assert started == {"time": replacement}


def test_deleting_a_replaced_config_server_tombstones_it_and_a_put_lifts_that(
    tmp_path: Path,
) -> None:
    saved = SavedServers(tmp_path / FILE_NAME)
    saved.put("time", parse_server("time", {"command": "other-time"}))
    saved.delete("time", configured=True)
    assert SavedServers.open(saved.path).overlay(CONFIGURED) == {"files": CONFIGURED["files"]}
    saved.put("time", CONFIGURED["time"])
    reopened = SavedServers.open(saved.path)
    assert (reopened.removed, set(reopened.overlay(CONFIGURED))) == (set(), {"time", "files"})


def test_deleting_an_operator_only_server_leaves_no_tombstone(tmp_path: Path) -> None:
    saved = SavedServers(tmp_path / FILE_NAME)
    saved.put("extra", parse_server("extra", {"command": "x"}))
    saved.delete("extra", configured=False)
    assert json.loads(saved.path.read_text()) == {"schemaVersion": 1, "servers": {}, "removed": []}


def test_an_absent_file_is_empty(tmp_path: Path) -> None:
    assert SavedServers.open(tmp_path / FILE_NAME).overlay(CONFIGURED) == CONFIGURED


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "INVALID_JSON"),
        ('{"schemaVersion": 1, "servers": {}, "removed": [], "removed": []}', "JSON_DUPLICATE"),
        ('{"schemaVersion": 2, "servers": {}, "removed": []}', "schemaVersion"),
        ('{"servers": {}}', "top level"),
        ('{"schemaVersion": 1, "servers": [], "removed": []}', "servers must be"),
        ('{"schemaVersion": 1, "servers": {}, "removed": [1]}', "removed must be"),
        ('{"schemaVersion": 1, "servers": {"s": {"tier": 1}}, "removed": []}', "s.command"),
        ('{"schemaVersion": 1, "servers": {"s": {"command": "x"}}, "removed": ["s"]}', "both"),
    ],
)
def test_a_malformed_file_is_refused_in_one_line_naming_it_and_the_fix(
    tmp_path: Path, text: str, why: str
) -> None:
    path = tmp_path / FILE_NAME
    path.write_text(text)
    with pytest.raises(SourcesFileError) as refused:
        SavedServers.open(path)
    assert refused.value.code == "MCP_SOURCES_FILE_INVALID"
    message = refused.value.message
    assert "\n" not in message
    assert str(path) in message
    assert why in message
    assert "move it aside" in message


def test_a_file_that_cannot_be_written_changes_nothing(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the directory should be")
    saved = SavedServers(blocked / FILE_NAME)
    with pytest.raises(Unprocessable) as refused:
        saved.put("src", parse_server("src", {"command": "x"}))
    assert refused.value.code == "MCP_SOURCES_FILE_UNWRITABLE"
    assert saved.servers == {}


def test_a_saved_server_the_registry_cannot_add_refuses_the_start_naming_the_file(
    tmp_path: Path,
) -> None:
    """An egress host the config pattern lets through but the egress policy refuses (a hand
    edit: a PUT checks it before saving) is the file's fault, said as such."""
    sources_dir = tmp_path / "sources"
    sources_dir.mkdir()
    path = sources_dir / FILE_NAME
    server = {"command": "x", "egressHosts": ["a..b"]}
    path.write_text(json.dumps({"schemaVersion": 1, "servers": {"s": server}, "removed": []}))
    settings = ServerSettings()
    with pytest.raises(SourcesFileError) as refused:
        build_app(new_service(settings), settings, sources_dir=sources_dir)
    assert refused.value.code == "MCP_SOURCES_FILE_INVALID"
    assert str(path) in refused.value.message
    assert "egressHosts" in refused.value.message
