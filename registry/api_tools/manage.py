"""The assistant-side management tools: list, get, save and delete API services.

``api_tools_list`` and ``api_tools_get`` read (grant ``api.read``): the services, then one
full bundle by its unique name, the editing base; bundles name credentials and never carry
a value. ``api_tools_save`` and ``api_tools_delete`` are *meta* (grant ``api.write``): they
open or close an outbound surface, so each call is ``critical`` risk with
``confirmation: "required"``, which the approval gate answers by asking an operator every
time (a standing ``--approve`` rule, even ``*``, never covers it; ``registry.gates``). A
save is pre-validated into compact field-named errors returned as the tool error's
``details.errors`` (``tools[0].path: ...``), so the assistant can fix them verbatim; a
saved service's tools are in the catalog from the next read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from doraforge.registry.api_tools.bundle import Bundle, compact_errors, parse_bundle
from doraforge.registry.api_tools.errors import RegistryError, ToolFailure, Unprocessable
from doraforge.registry.api_tools.library import ApiTools, referenced_credentials
from doraforge.registry.api_tools.tools import tool_name

if TYPE_CHECKING:
    from doraforge.registry.service import RegistryService

type Handler = Callable[[ApiTools, dict[str, Any]], Any]

_SERVICE_ARG = {
    "type": "object",
    "properties": {"service": {"type": "string", "minLength": 1, "maxLength": 48}},
    "required": ["service"],
    "additionalProperties": False,
}
_SAVE_DESCRIPTION = (
    "Create or fully replace one API service (meta: an operator approves every call). "
    "Argument bundle: {schemaVersion: 1, name (snake_case), description?, baseUrl (absolute "
    "http/https, no query), headers? {Name: value, secrets only as {{secret:NAME}}}, "
    "credentials? [NAME] (each must be set by the operator; values are never visible), "
    "tools: [{name (snake_case), description (required), method GET|POST|PUT|PATCH|DELETE, "
    "path starting with / and holding {param} slots, params? [{name, in: "
    "path|query|header|body, required?, schema?, description?}], body? json|form, "
    "timeoutMs?, maxResultChars?, response? {type: json|text, envelope? {codeField, "
    "success, payloadField, errorFields, treatBodyOnNon2xx}}}]}. ONE service = ONE API host; "
    "its endpoints are the tools. When the outbound policy denies by default, the host must "
    "already be listed by the operator: on API_TOOL_HOST_NOT_ALLOWED tell the user, do not "
    "retry. Field errors come back as details.errors; fix them and save again."
)


def _summary(bundle: Bundle) -> dict[str, Any]:
    return {
        "name": bundle.name,
        "description": bundle.description,
        "baseUrl": bundle.baseUrl,
        "credentials": referenced_credentials(bundle),
        "tools": [tool_name(bundle, t) for t in bundle.tools],
    }


def _list(api_tools: ApiTools, _arguments: dict[str, Any]) -> Any:
    return {"services": [_summary(b) for _, b in sorted(api_tools.bundles.items())]}


def _get(api_tools: ApiTools, arguments: dict[str, Any]) -> Any:
    bundle = api_tools.get(arguments["service"])
    return {"bundle": bundle.model_dump(by_alias=True, exclude_none=True)}


def _save(api_tools: ApiTools, arguments: dict[str, Any]) -> Any:
    try:
        bundle = parse_bundle(arguments["bundle"])
    except Unprocessable as exc:
        errors = compact_errors(exc)
        raise ToolFailure(
            "API_BUNDLE_INVALID",
            f"the bundle has {len(errors)} error(s): {'; '.join(errors[:3])}",
            details={"errors": errors},
        ) from None
    created = api_tools.save(bundle)
    return {"service": bundle.name, "created": created, **_summary(bundle)}


def _delete(api_tools: ApiTools, arguments: dict[str, Any]) -> Any:
    bundle = api_tools.delete(arguments["service"])
    return {"deleted": bundle.name, "tools": [tool_name(bundle, t) for t in bundle.tools]}


def _entry(name: str, description: str, schema: dict[str, Any], *, meta: bool) -> dict[str, Any]:
    return {
        "name": name,
        "providerName": name,
        "description": description,
        "input_schema": schema,
        "output_schema": {"type": "object"},
        "policy": {
            "scopes": ["agent", "ui"],
            "requiredCapabilities": ["api.write" if meta else "api.read"],
            "sideEffect": "write" if meta else "read",
            "idempotent": name != "api_tools_delete",
            "confirmation": "required" if meta else "none",
            "risk": "critical" if meta else "low",
            "timeoutMs": 30_000,
        },
    }


TOOLS: list[tuple[dict[str, Any], Handler]] = [
    (
        _entry(
            "api_tools_list",
            "List the saved API services: name, baseUrl, credential names and tool names.",
            {"type": "object", "properties": {}, "additionalProperties": False},
            meta=False,
        ),
        _list,
    ),
    (
        _entry(
            "api_tools_get",
            "The full bundle of one API service by its name: the base for an edit with "
            "api_tools_save. Credentials appear by name only.",
            _SERVICE_ARG,
            meta=False,
        ),
        _get,
    ),
    (
        _entry(
            "api_tools_save",
            _SAVE_DESCRIPTION,
            {
                "type": "object",
                "properties": {"bundle": {"type": "object"}},
                "required": ["bundle"],
                "additionalProperties": False,
            },
            meta=True,
        ),
        _save,
    ),
    (
        _entry(
            "api_tools_delete",
            "Delete one API service by name (meta: an operator approves every call); its "
            "tools leave the catalog and a later save restores it.",
            _SERVICE_ARG,
            meta=True,
        ),
        _delete,
    ),
]


def _adapter(api_tools: ApiTools, handler: Handler) -> Callable[[dict[str, Any]], Awaitable[Any]]:
    async def call(arguments: dict[str, Any]) -> Any:
        try:
            return handler(api_tools, arguments)
        except RegistryError as exc:  # a refusal of the save/delete is the tool's failure
            raise ToolFailure(exc.code, exc.message, details=exc.details) from None

    return call


def register_management_tools(service: RegistryService, api_tools: ApiTools) -> None:
    """Register the four management tools over ``api_tools`` on ``service``."""
    for entry, handler in TOOLS:
        service.register(entry, _adapter(api_tools, handler))
