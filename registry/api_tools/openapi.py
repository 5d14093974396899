"""OpenAPI 3 as an import source: chosen operations become a bundle draft.

OpenAPI is never stored: the import answers a draft in the bundle format, validated like any
other bundle, for the operator to review and save. Only the operations named by
``operationId`` are mapped; parameters come from ``path``, ``query`` and ``header``
parameters (path-item and operation level) and from the top-level properties of a JSON (or
form) ``requestBody``. Local ``$ref``\\ s (``#/...``) are followed, at most :data:`MAX_REFS`
deep. Anything the bundle format cannot carry (a cookie parameter, a multipart body, a
relative server URL, an operation not found) is refused with
:class:`Unprocessable` ``API_OPENAPI_UNMAPPABLE`` naming the JSON pointer of the part.
"""

from __future__ import annotations

import re
from typing import Any

from doraforge.registry.api_tools.bundle import compact_errors, parse_bundle
from doraforge.registry.api_tools.errors import Unprocessable

METHODS = ("get", "post", "put", "patch", "delete")
MAX_REFS = 16
MAX_OPERATIONS = 200
_BODY_TYPES = {"application/json": "json", "application/x-www-form-urlencoded": "form"}


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def pointer(*tokens: str | int) -> str:
    """The RFC 6901 JSON pointer of a part of the document."""
    return "".join(f"/{_escape(str(token))}" for token in tokens)


def unmappable(where: str, why: str) -> Unprocessable:
    return Unprocessable(
        "API_OPENAPI_UNMAPPABLE",
        f"{where or '/'}: {why}; choose other operations or write the bundle by hand",
        details={"pointer": where, "reason": why},
    )


def _resolve(document: dict[str, Any], node: Any, where: str) -> tuple[Any, str]:
    """``node`` with local ``$ref``\\ s followed; the pointer it finally came from."""
    for _ in range(MAX_REFS):
        if not (isinstance(node, dict) and "$ref" in node):
            return node, where
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise unmappable(where, "only local $ref (#/...) can be followed")
        node, where = document, ref[1:]
        for token in ref[2:].split("/"):
            key = token.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or key not in node:
                raise unmappable(where, f"$ref {ref!r} points nowhere")
            node = node[key]
    raise unmappable(where, f"more than {MAX_REFS} chained $ref")


def _object(value: Any, where: str, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise unmappable(where, f"{what} must be an object")
    return value


def _base_url(document: dict[str, Any]) -> str:
    servers = document.get("servers")
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], dict):
        raise unmappable(pointer("servers"), "a server with an absolute http(s) URL is required")
    url = servers[0].get("url")
    if not isinstance(url, str) or not re.match(r"^https?://", url) or "{" in url:
        raise unmappable(pointer("servers", 0, "url"), "must be an absolute http(s) URL")
    return url


def _operations(document: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """Every operation by operationId: (path, method, path item)."""
    paths = _object(document.get("paths"), pointer("paths"), "paths")
    found: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for path, item in paths.items():
        item = _object(item, pointer("paths", path), "a path item")
        for method in METHODS:
            operation = item.get(method)
            if isinstance(operation, dict) and isinstance(operation.get("operationId"), str):
                found[operation["operationId"]] = (path, method, item)
    return found


def _param(document: dict[str, Any], raw: Any, where: str) -> dict[str, Any]:
    spec, where = _resolve(document, raw, where)
    spec = _object(spec, where, "a parameter")
    location = spec.get("in")
    if location not in ("path", "query", "header"):
        raise unmappable(pointer_in(where, "in"), f"parameters in {location!r} cannot be mapped")
    param: dict[str, Any] = {"name": spec.get("name"), "in": location}
    if spec.get("required") is True or location == "path":
        param["required"] = True
    schema, _ = _resolve(document, spec.get("schema", {"type": "string"}), where)
    param["schema"] = schema if isinstance(schema, dict) else {"type": "string"}
    if isinstance(spec.get("description"), str):
        param["description"] = spec["description"]
    return param


def pointer_in(where: str, *tokens: str | int) -> str:
    return where + pointer(*tokens)


def _body(document: dict[str, Any], raw: Any, where: str) -> tuple[str, list[dict[str, Any]]]:
    spec, where = _resolve(document, raw, where)
    content = _object(_object(spec, where, "requestBody").get("content"), where, "content")
    kinds = [kind for kind in _BODY_TYPES if kind in content]
    if not kinds:
        raise unmappable(pointer_in(where, "content"), "only a JSON or form body can be mapped")
    media = content[kinds[0]]
    at = pointer_in(where, "content", kinds[0], "schema")
    schema, at = _resolve(document, media.get("schema") if isinstance(media, dict) else None, at)
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise unmappable(at, "the body schema must be an object with properties")
    listed = schema.get("required")
    required = (
        {name for name in listed if isinstance(name, str)} if isinstance(listed, list) else set()
    )
    params = []
    for name, prop in _object(schema.get("properties", {}), at, "properties").items():
        prop, _ = _resolve(document, prop, pointer_in(at, "properties", name))
        param: dict[str, Any] = {"name": name, "in": "body", "schema": prop}
        if name in required:
            param["required"] = True
        params.append(param)
    return _BODY_TYPES[kinds[0]], params


def _tool_name(operation_id: str) -> str:
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", operation_id).lower()
    snake = re.sub(r"[^a-z0-9]+", "_", snake).strip("_")
    return (snake if snake[:1].isalpha() else f"op_{snake}")[:48].rstrip("_")


def _tool(document: dict[str, Any], operation_id: str, path: str, method: str, item: Any) -> Any:
    where = pointer("paths", path, method)
    operation = item[method]
    raw_params = [
        *(
            (p, pointer("paths", path, "parameters", i))
            for i, p in enumerate(item.get("parameters") or [])
        ),
        *(
            (p, pointer_in(where, "parameters", i))
            for i, p in enumerate(operation.get("parameters") or [])
        ),
    ]
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for raw, at in raw_params:
        param = _param(document, raw, at)
        merged[(param["in"], str(param["name"]))] = param  # operation level overrides
    tool: dict[str, Any] = {
        "name": _tool_name(operation_id),
        "description": str(operation.get("summary") or operation.get("description") or "")[:2000]
        or f"{method.upper()} {path}",
        "method": method.upper(),
        "path": path,
        "params": list(merged.values()),
    }
    if "requestBody" in operation:
        tool["body"], body_params = _body(
            document, operation["requestBody"], pointer_in(where, "requestBody")
        )
        tool["params"] += body_params
    return tool


def import_openapi(request: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``{"openapi": document, "service": name, "operations": [operationId, ...]}`` → the
    bundle draft and its validation errors (compact ``field: message`` lines, empty when the
    draft would save). Raises :class:`Unprocessable` naming a pointer for what cannot map."""
    document = request.get("openapi")
    if not isinstance(document, dict) or not str(document.get("openapi", "")).startswith("3."):
        raise unmappable(pointer("openapi"), "an OpenAPI 3.x document is required")
    chosen = request.get("operations")
    if not isinstance(chosen, list) or not chosen or len(chosen) > MAX_OPERATIONS:
        raise Unprocessable(
            "API_OPENAPI_UNMAPPABLE",
            f"operations: name 1 to {MAX_OPERATIONS} operationIds to import",
            details={"pointer": "", "reason": "no operations chosen"},
        )
    operations = _operations(document)
    tools = []
    for operation_id in chosen:
        if operation_id not in operations:
            raise unmappable(pointer("paths"), f"no operation with operationId {operation_id!r}")
        tools.append(_tool(document, operation_id, *operations[operation_id]))
    info = document.get("info")
    draft: dict[str, Any] = {
        "schemaVersion": 1,
        "name": request.get("service"),
        "baseUrl": _base_url(document),
        "tools": tools,
    }
    if isinstance(info, dict) and isinstance(info.get("title"), str):
        draft["description"] = info["title"]
    try:
        parse_bundle(draft)
    except Unprocessable as exc:
        return draft, compact_errors(exc)
    return draft, []
