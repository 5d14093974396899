"""An API bundle's parameter schemas compile locally: a bundle whose schema points outside
itself is refused at save with the schema's code, nothing is written or registered, and the
URL is never fetched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from doraforge.registry.api_tools.bundle import parse_bundle
from doraforge.registry.api_tools.store import BundleStore
from tests.registry.listeners import counting_http

from .test_lifecycle import _app
from .test_routes import _bundle


def _with_param_schema(schema: dict[str, Any]) -> dict[str, Any]:
    bundle = _bundle()
    bundle["tools"][0]["params"][0]["schema"] = schema
    return bundle


def test_a_bundle_whose_parameter_schema_has_a_remote_ref_is_refused_at_save(
    tmp_path: Path,
) -> None:
    client, service, _, store = _app(tmp_path)
    store.set("TOKEN", "value")
    with counting_http() as upstream:
        bundle = _with_param_schema({"$ref": upstream.url("/redir")})

        refused = client.put("/api/api-tools/shop", json=bundle)

        assert upstream.hits == 0
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["code"] == "SCHEMA_REF_REMOTE"
    assert error["details"]["tool"] == "get_item"
    assert not (tmp_path / "api-tools" / "shop.json").exists()
    assert service.resolve("api__shop__get_item") is None


def test_a_bundle_whose_parameter_schema_refers_to_nothing_is_refused_at_save(
    tmp_path: Path,
) -> None:
    client, _, _, store = _app(tmp_path)
    store.set("TOKEN", "value")

    refused = client.put("/api/api-tools/shop", json=_with_param_schema({"$ref": "#/nowhere"}))

    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "SCHEMA_REF_UNRESOLVABLE"


def test_a_bundle_with_plain_parameter_schemas_still_saves(tmp_path: Path) -> None:
    client, service, _, store = _app(tmp_path)
    store.set("TOKEN", "value")

    saved = client.put("/api/api-tools/shop", json=_with_param_schema({"type": "integer"}))

    assert saved.status_code == 201
    assert service.resolve("api__shop__get_item") is not None


def test_a_stored_bundle_whose_schema_is_now_refused_stays_off_and_the_registry_starts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with counting_http() as upstream:
        stored = parse_bundle(_with_param_schema({"$ref": upstream.url("/redir")}))
        BundleStore(tmp_path / "api-tools").save(stored)  # as an older registry saved it

        client, service, api_tools, _ = _app(tmp_path)

        assert upstream.hits == 0
    assert "shop" not in api_tools.bundles
    assert service.resolve("api__shop__get_item") is None
    assert (tmp_path / "api-tools" / "shop.json").exists()
    assert "SCHEMA_REF_REMOTE" in caplog.text
    assert client.get("/api/api-tools/shop").status_code == 404
