"""The Gateway's ``/openapi.json`` describes what it really accepts and answers; 405 says Allow."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from tests.gateway.harness import running_stack

pytestmark = pytest.mark.anyio

POSTS = (
    "/tools/{endpoint_id}/{operation}:invoke",
    "/tools/{tool_id}:invoke",
    "/invocations/{invocation_id}/cancel",
    "/invocations/{invocation_id}/stop",
)
ERROR_REF = "#/components/schemas/ErrorEnvelope"


async def _document() -> dict[str, Any]:
    async with running_stack() as stack:
        response = await stack.client.get("/openapi.json")
        assert response.status_code == 200
        document: dict[str, Any] = response.json()
        return document


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]


def _json_schema(response: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = response["content"]["application/json"]["schema"]
    return schema


def _validator(document: dict[str, Any], ref: str) -> jsonschema.Draft202012Validator:
    """A validator for one component, resolving ``$ref``s inside the whole document."""
    return jsonschema.Draft202012Validator({"$ref": ref, "components": document["components"]})


async def test_invoke_bodies_are_documented_as_closed_json_objects() -> None:
    document = await _document()
    for path in POSTS[:2]:
        body = document["paths"][path]["post"]["requestBody"]
        assert body["required"] is True
        schema = body["content"]["application/json"]["schema"]
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert set(schema["properties"]) == {"arguments", "caller_id", "timeout_ms"}


async def test_cancel_and_stop_document_an_optional_empty_object() -> None:
    document = await _document()
    for path in POSTS[2:]:
        body = document["paths"][path]["post"]["requestBody"]
        assert body["required"] is False
        schema = body["content"]["application/json"]["schema"]
        validator = jsonschema.Draft202012Validator(schema)
        assert validator.is_valid({})
        assert not validator.is_valid({"reason": "x"})


async def test_every_route_documents_the_guard_refusals_as_the_error_envelope() -> None:
    document = await _document()
    for method, path, operation in _operations(document):
        for status in ("401", "403"):
            assert _json_schema(operation["responses"][status]) == {"$ref": ERROR_REF}, (
                method,
                path,
                status,
            )
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


async def test_every_post_documents_the_body_refusals() -> None:
    document = await _document()
    for path in POSTS:
        responses = document["paths"][path]["post"]["responses"]
        assert {"400", "413", "415"} <= set(responses), path


async def test_no_route_claims_a_framework_validation_error_it_never_sends() -> None:
    document = await _document()
    assert "HTTPValidationError" not in document["components"]["schemas"]
    for _, _, operation in _operations(document):
        for response in operation["responses"].values():
            assert "HTTPValidationError" not in str(response)


async def test_real_error_answers_match_the_documented_envelope() -> None:
    async with running_stack() as stack:
        document = (await stack.client.get("/openapi.json")).json()
        validator = _validator(document, ERROR_REF)
        answers = [
            await stack.client.get("/tools/nope"),
            await stack.client.post("/tools/nope:invoke", json={"arguments": {}}),
            await stack.client.post("/tools/mock.move:invoke", json={"bogus": 1}),
            await stack.client.delete("/tools"),
        ]
    assert [answer.status_code for answer in answers] == [404, 404, 400, 405]
    for answer in answers:
        validator.validate(answer.json())


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", "/tools", "GET"),
        ("PUT", "/tools/mock.move", "GET"),
        # /tools/{tool_id} also matches "x:invoke" (tool ids may hold ':'), so GET is served.
        ("PUT", "/tools/x:invoke", "GET, POST"),
        ("GET", "/invocations/inv_x/cancel", "POST"),
        ("PATCH", "/invocations/inv_x", "GET"),
    ],
)
async def test_method_not_allowed_lists_every_method_the_path_serves(
    method: str, path: str, allow: str
) -> None:
    async with running_stack() as stack:
        response = await stack.client.request(method, path)
    assert response.status_code == 405
    assert response.headers["allow"] == allow
    assert response.json()["error"]["code"] == "FORGE_TOOL_METHOD_NOT_ALLOWED"


async def test_each_method_named_in_allow_is_served_on_that_path() -> None:
    async with running_stack() as stack:
        refused = await stack.client.put("/tools/x:invoke")
        served = {}
        for method in refused.headers["allow"].split(", "):
            body: dict[str, Any] | None = {"arguments": {}} if method == "POST" else None
            answer = await stack.client.request(method, "/tools/x:invoke", json=body)
            served[method] = answer.json()["error"]["code"]
    # Each reached its route (an unknown tool), none was refused for its method.
    assert served == {"GET": "FORGE_TOOL_NOT_FOUND", "POST": "FORGE_TOOL_NOT_FOUND"}


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("header", "\u00b2"),  # str.isdigit() is true, int() refuses it
        ("header", "9" * 5000),  # beyond int()'s 4,300-digit limit
        ("query", "\u00b2"),
        ("query", "\u0661\u0662"),  # Arabic-Indic digits that int() would read as 12
        ("query", "9" * 17),
        ("header", ""),
        ("both", "R"),  # a valid header does not excuse an invalid query value
    ],
)
async def test_a_resume_id_outside_the_documented_pattern_is_400_not_500(
    where: str, value: str
) -> None:
    async with running_stack() as stack:
        admitted = await stack.client.post(
            "/tools/mock.move:invoke", json={"arguments": {"duration_s": 0, "behaviour": "succeed"}}
        )
        events = f"/invocations/{admitted.json()['data']['invocation_id']}/events"
        if where == "both":
            response = await stack.client.get(
                events, headers={"Last-Event-ID": "1"}, params={"last_event_id": value}
            )
        elif where == "header":
            response = await stack.client.get(
                events, headers={b"Last-Event-ID": value.encode("latin-1")}
            )
        else:
            response = await stack.client.get(events, params={"last_event_id": value})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "FORGE_TOOL_INVALID_EVENT_ID"


async def test_real_listing_and_control_answers_match_their_documented_shapes() -> None:
    """``GET /tools`` (string ``gateway_identity``) and cancel/stop (``status`` plus the
    command-named field) validate against the schemas the document gives them."""
    async with running_stack() as stack:
        document = (await stack.client.get("/openapi.json")).json()
        listing = await stack.client.get("/tools")
        action = await stack.client.post(
            "/tools/mock.move:invoke", json={"arguments": {"duration_s": 1, "behaviour": "hang"}}
        )
        session = await stack.client.post("/tools/mock.stream:invoke", json={"arguments": {}})
        cancel = await stack.client.post(
            f"/invocations/{action.json()['data']['invocation_id']}/cancel"
        )
        stop = await stack.client.post(
            f"/invocations/{session.json()['data']['invocation_id']}/stop"
        )
    paths = document["paths"]
    assert _json_schema(paths["/tools"]["get"]["responses"]["200"])["$ref"].endswith(
        "ListingEnvelope"
    )
    _validator(document, "#/components/schemas/ListingEnvelope").validate(listing.json())
    control = _validator(document, "#/components/schemas/ControlEnvelope")
    for answer, field in ((cancel, "cancel_status"), (stop, "stop_status")):
        control.validate(answer.json())
        assert answer.json()["data"][field] == answer.json()["data"]["status"]
