"""OpenAPI 3 import: the chosen operations become a bundle draft; what cannot map names its
JSON pointer."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from doraforge.registry.api_tools.errors import Unprocessable
from doraforge.registry.api_tools.openapi import import_openapi, pointer

DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Shop"},
    "servers": [{"url": "https://shop.example.com/api"}],
    "paths": {
        "/items/{itemId}": {
            "parameters": [{"$ref": "#/components/parameters/ItemId"}],
            "get": {
                "operationId": "getItem",
                "summary": "One item",
                "parameters": [
                    {"name": "fields", "in": "query", "schema": {"type": "string"}},
                    {"name": "X-Trace", "in": "header", "required": True},
                ],
            },
            "put": {
                "operationId": "updateItem",
                "requestBody": {
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {
                                "type": "object",
                                "properties": {"price": {"type": "number"}},
                            }
                        }
                    }
                },
            },
        },
        "/upload": {
            "post": {
                "operationId": "upload",
                "summary": "Upload",
                "requestBody": {"content": {"multipart/form-data": {"schema": {}}}},
            }
        },
    },
    "components": {
        "parameters": {
            "ItemId": {
                "name": "itemId",
                "in": "path",
                "required": True,
                "schema": {"type": "string"},
            }
        }
    },
}


def _import(*operations: str, document: Any = None, service: str = "shop") -> tuple[Any, list[str]]:
    body = {"openapi": document or DOCUMENT, "service": service, "operations": list(operations)}
    return import_openapi(body)


def test_a_chosen_get_maps_path_item_query_and_header_parameters() -> None:
    draft, errors = _import("getItem")
    assert errors == []
    assert draft["baseUrl"] == "https://shop.example.com/api"
    assert draft["description"] == "Shop"
    (tool,) = draft["tools"]
    assert (tool["name"], tool["method"], tool["path"]) == ("get_item", "GET", "/items/{itemId}")
    assert [(p["name"], p["in"], p.get("required", False)) for p in tool["params"]] == [
        ("itemId", "path", True),
        ("fields", "query", False),
        ("X-Trace", "header", True),
    ]


def test_a_form_body_maps_its_top_level_properties_and_a_missing_summary_gets_a_description() -> (
    None
):
    draft, errors = _import("updateItem")
    assert errors == []
    (tool,) = draft["tools"]
    assert tool["body"] == "form"
    assert tool["description"] == "PUT /items/{itemId}"
    assert tool["params"][-1] == {"name": "price", "in": "body", "schema": {"type": "number"}}


def test_a_draft_that_maps_but_fails_validation_answers_compact_field_errors() -> None:
    draft, errors = _import("getItem", service="Not-Snake")
    assert draft["name"] == "Not-Snake"
    assert errors
    assert errors[0].startswith("name: ")


@pytest.mark.parametrize(
    ("operations", "change", "where"),
    [
        (["upload"], None, pointer("paths", "/upload", "post", "requestBody", "content")),
        (["missing"], None, "/paths"),
        (["getItem"], lambda d: d.pop("servers"), "/servers"),
        (["getItem"], lambda d: d["servers"][0].update(url="/relative"), "/servers/0/url"),
        (["getItem"], lambda d: d.update(openapi="2.0"), "/openapi"),
        (
            ["getItem"],
            lambda d: d["components"]["parameters"].pop("ItemId"),
            "/components/parameters/ItemId",
        ),
        (
            ["getItem"],
            lambda d: d["paths"]["/items/{itemId}"]["get"]["parameters"].append(
                {"name": "c", "in": "cookie"}
            ),
            "/paths/~1items~1{itemId}/get/parameters/2/in",
        ),
        (
            ["getItem"],
            lambda d: d["paths"]["/items/{itemId}"]["parameters"].__setitem__(
                0, {"$ref": "https://evil.example/p.json"}
            ),
            "/paths/~1items~1{itemId}/parameters/0",
        ),
    ],
)
def test_what_cannot_map_is_refused_naming_its_json_pointer(
    operations: list[str], change: Any, where: str
) -> None:
    document = copy.deepcopy(DOCUMENT)
    if change is not None:
        change(document)
    with pytest.raises(Unprocessable) as info:
        _import(*operations, document=document)
    assert info.value.code == "API_OPENAPI_UNMAPPABLE"
    assert info.value.details["pointer"] == where


def test_a_ref_cycle_is_refused_not_followed_forever() -> None:
    document = copy.deepcopy(DOCUMENT)
    document["components"]["parameters"]["ItemId"] = {"$ref": "#/components/parameters/ItemId"}
    with pytest.raises(Unprocessable) as info:
        _import("getItem", document=document)
    assert "chained $ref" in info.value.message


def test_no_operations_chosen_is_refused() -> None:
    with pytest.raises(Unprocessable) as info:
        import_openapi({"openapi": DOCUMENT, "service": "shop", "operations": []})
    assert info.value.code == "API_OPENAPI_UNMAPPABLE"
