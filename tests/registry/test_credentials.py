"""The credential store and its operator routes: values in, names out, 0600 on disk."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.registry.credentials import CredentialFileError, CredentialStore, SecretView
from doraforge.registry.errors import InvalidRequest, NotFound
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings

VALUE = "sk-unit-9f8e7d6c-secret"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_set_credential_is_written_0600_in_a_new_0700_directory_and_reloads(
    tmp_path: Path,
) -> None:
    path = tmp_path / "home" / "credentials.json"
    store = CredentialStore(path, clock=lambda: 1000.0)
    row, created = store.set("API_KEY", VALUE)
    assert created is True
    assert row.public() == {"name": "API_KEY", "scope": "global", "setAt": 1000.0}
    assert _mode(path) == 0o600
    assert _mode(path.parent) == 0o700
    reloaded = CredentialStore(path)
    assert reloaded.names() == [{"name": "API_KEY", "scope": "global", "setAt": 1000.0}]
    assert SecretView(reloaded, {})["API_KEY"] == VALUE
    assert store.set("API_KEY", "other-value")[1] is False


def test_a_file_others_can_read_is_refused_with_one_line_naming_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    CredentialStore(path).set("API_KEY", VALUE)
    path.chmod(0o640)
    with pytest.raises(CredentialFileError) as info:
        CredentialStore(path)
    assert info.value.code == "CREDENTIALS_FILE_UNSAFE"
    assert f"chmod 600 {path}" in info.value.message
    assert "\n" not in info.value.message
    assert VALUE not in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        json.dumps({"schemaVersion": 2, "credentials": {}}),
        json.dumps(
            {
                "schemaVersion": 1,
                "credentials": {"bad-name": {"value": "v", "scope": "global", "setAt": 1}},
            }
        ),
        json.dumps(
            {"schemaVersion": 1, "credentials": {"A": {"value": 3, "scope": "global", "setAt": 1}}}
        ),
        json.dumps(
            {"schemaVersion": 1, "credentials": {"A": {"value": "v", "scope": "me", "setAt": 1}}}
        ),
    ],
)
def test_a_file_that_is_not_a_credential_file_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "credentials.json"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    with pytest.raises(CredentialFileError) as info:
        CredentialStore(path)
    assert info.value.code == "CREDENTIALS_FILE_INVALID"


@pytest.mark.parametrize("value", ["", "a\nb", "a\rb", "nul\0", 7, None, "x" * 20_000])
def test_a_bad_value_is_refused_without_repeating_it(tmp_path: Path, value: Any) -> None:
    store = CredentialStore(tmp_path / "credentials.json")
    with pytest.raises(InvalidRequest) as info:
        store.set("API_KEY", value)
    assert info.value.code == "CREDENTIAL_VALUE_INVALID"
    if isinstance(value, str) and value:
        assert value not in info.value.message
    assert not (tmp_path / "credentials.json").exists()


def test_deleting_an_unknown_credential_is_not_found(tmp_path: Path) -> None:
    store = CredentialStore(tmp_path / "credentials.json")
    with pytest.raises(NotFound) as info:
        store.delete("MISSING")
    assert info.value.code == "CREDENTIAL_NOT_FOUND"


def test_the_store_takes_precedence_over_the_environment_values_and_both_are_global(
    tmp_path: Path,
) -> None:
    store = CredentialStore(tmp_path / "credentials.json")
    view = SecretView(store, {"SHARED": "from-env", "ENV_ONLY": "env"})
    assert view["SHARED"] == "from-env"
    store.set("SHARED", "from-store")
    assert view["SHARED"] == "from-store"  # live: no restart
    assert sorted(view) == ["ENV_ONLY", "SHARED"]
    assert view.scope_of("ENV_ONLY") == "global"
    assert view.scope_of("NOPE") is None
    store.delete("SHARED")
    assert view["SHARED"] == "from-env"


def _request(app: Any, method: str, url: str, **kwargs: Any) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.request(method, url, **kwargs)

    return asyncio.run(send())


def test_the_routes_take_values_and_answer_names_only_and_audit_names_only(tmp_path: Path) -> None:
    settings = ServerSettings()
    service = new_service(settings)
    app = build_app(service, settings, api_tools_dir=tmp_path / "home" / "api-tools")
    answers = [
        _request(app, "PUT", "/api/credentials/API_KEY", json={"value": VALUE}),
        _request(app, "PUT", "/api/credentials/API_KEY", json={"value": VALUE}),
        _request(app, "GET", "/api/credentials"),
        _request(app, "PUT", "/api/credentials/bad-name", json={"value": VALUE}),
        _request(app, "PUT", "/api/credentials/API_KEY", json={"value": VALUE, "extra": 1}),
        _request(app, "DELETE", "/api/credentials/API_KEY"),
        _request(app, "DELETE", "/api/credentials/API_KEY"),
    ]
    assert [a.status_code for a in answers] == [201, 200, 200, 400, 400, 200, 404]
    assert answers[2].json()["credentials"][0]["name"] == "API_KEY"
    assert answers[6].json()["error"]["code"] == "CREDENTIAL_NOT_FOUND"
    assert all(VALUE not in a.text for a in answers)
    records = service.audit.records()
    mine = [r["name"] for r in records if str(r["name"]).startswith("credentials ")]
    assert mine == ["credentials set API_KEY"] * 2 + ["credentials delete API_KEY"] * 2
    assert VALUE not in json.dumps(records)
    assert _mode(tmp_path / "home" / "credentials.json") == 0o600
