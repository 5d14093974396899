from __future__ import annotations

from typing import Any

import pytest

from doraforge.registry.api_tools.bundle import parse_bundle
from doraforge.registry.api_tools.errors import RegistryError
from doraforge.registry.http import status_for

GOOD_TOOL = {
    "name": "get_item",
    "description": "Fetch one item",
    "path": "/items/{id}",
    "params": [{"name": "id", "in": "path", "required": True}],
}


def _doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schemaVersion": 1,
        "name": "shop",
        "baseUrl": "https://api.example.com/v1/",
        "headers": {"Authorization": "Bearer {{secret:TOKEN}}"},
        "credentials": ["TOKEN"],
        "tools": [GOOD_TOOL],
    }
    doc.update(changes)
    return doc


def _tool(**changes: Any) -> dict[str, Any]:
    return {**GOOD_TOOL, **changes}


def test_valid_bundle_parses() -> None:
    bundle = parse_bundle(_doc())
    assert bundle.baseUrl == "https://api.example.com/v1"
    assert bundle.host == "api.example.com"
    assert bundle.tools[0].maxResultChars == 10_000
    assert bundle.tools[0].response.type == "json"


BAD_PORTS = ["65536", "99999", "0", "abc", "", "+80", "8080x"]
ODD_HOSTS = [
    "0177.0.0.1",  # octal
    "127.000.000.001",  # zero-padded
    "127.1",  # short
    "2130706433",  # one decimal number
    "0x7f.0.0.1",  # hex
    "[::ffff:127.0.0.1]",  # IPv4 inside IPv6
    "[0:0:0:0:0:0:0:1]",  # uncompressed IPv6
    "api.example.com.",  # trailing dot
]
CONTROL_URLS = [
    "http://127.0.0.1\t:8080",
    "http://api.example.com\t/v1",
    "http://api.example.com/v1\n",
    "http://api.exa mple.com",
    "http://api.example.com\u00a0/v1",
    "http://api.example.com/\u202ev1",
]

INVALID = [
    (_doc(schemaVersion=2), "schemaVersion"),
    (_doc(extra=1), "extra"),
    (_doc(name="Bad Name"), "name"),
    (_doc(name="a__b"), "name"),
    (_doc(baseUrl="ftp://x.example"), "baseUrl"),
    (_doc(baseUrl="https://user:pw@x.example"), "baseUrl"),
    (_doc(baseUrl="https://x.example/?q=1"), "baseUrl"),
    (_doc(baseUrl="https://{{secret:TOKEN}}.example"), "baseUrl"),
    *((_doc(baseUrl=f"http://127.0.0.1:{port}/"), "1-65535") for port in BAD_PORTS),
    *((_doc(baseUrl=f"http://{host}:8080/v1"), "canonical form") for host in ODD_HOSTS),
    *((_doc(baseUrl=url), "control characters") for url in CONTROL_URLS),
    (_doc(baseUrl="http://bücher.example"), "non-ASCII"),
    (_doc(baseUrl="http://[::1/"), "baseUrl"),
    (_doc(tools=[]), "tools"),
    (_doc(headers={"X-Key": "{{secret:OTHER}}"}), "not in credentials"),
    (_doc(headers={"Bad Header": "v"}), "headers"),
    (_doc(credentials=["not-an-ident"]), "credentials"),
    (_doc(headers={"Host": "internal.example"}), "headers.Host"),
    (_doc(tools=[_tool(description="")]), "tools[0].description"),
    (
        _doc(tools=[{k: v for k, v in GOOD_TOOL.items() if k != "description"}]),
        "tools[0].description",
    ),
    (_doc(tools=[_tool(path="/items/{other}")]), "not declared"),
    (_doc(tools=[_tool(path="/items")]), "no slot"),
    (_doc(tools=[_tool(path="/items/{id}?x={{secret:TOKEN}}")]), "tools[0].path"),
    (_doc(baseUrl="https://x.example/v1/../admin"), "'..' path segments"),
    (_doc(tools=[_tool(path="/../admin/{id}")]), "'..' segments"),
    (_doc(tools=[_tool(path="/%2E%2e/{id}")]), "'..' segments"),
    (_doc(tools=[_tool(path="/./{id}")]), "'..' segments"),
    (_doc(tools=[_tool(method="TRACE")]), "tools[0].method"),
    (_doc(tools=[_tool(body="multipart")]), "tools[0].body"),
    (_doc(tools=[_tool(timeoutMs=0)]), "tools[0].timeoutMs"),
    (_doc(tools=[_tool(maxResultChars=10)]), "tools[0].maxResultChars"),
    (_doc(tools=[_tool(response={"type": "binary"})]), "tools[0].response.type"),
    (_doc(tools=[_tool(response={"type": "text", "envelope": {}})]), "envelope"),
    (_doc(tools=[_tool(response={"envelope": {"codeField": "code"}})]), "success"),
    (_doc(tools=[_tool(params=[{"name": "id", "in": "cookie"}])]), "tools[0].params[0].in"),
    (
        _doc(
            tools=[
                _tool(
                    params=[
                        {"name": "id", "in": "path", "required": True},
                        {"name": "id", "in": "query"},
                    ]
                )
            ]
        ),
        "duplicate param",
    ),
    (_doc(tools=[_tool(params=[*GOOD_TOOL["params"], {"name": "q", "in": "body"}])]), "GET tools"),
    (_doc(tools=[GOOD_TOOL, GOOD_TOOL]), "duplicate tool"),
    (
        _doc(
            tools=[_tool(params=[*GOOD_TOOL["params"], {"name": "Authorization", "in": "header"}])]
        ),
        "shadows",
    ),
    (
        _doc(tools=[_tool(params=[{"name": "id", "in": "path", "required": False}])]),
        "must be required",
    ),
]


@pytest.mark.parametrize(("document", "needle"), INVALID)
def test_invalid_bundles_name_the_field(document: dict[str, Any], needle: str) -> None:
    with pytest.raises(RegistryError) as info:
        parse_bundle(document)
    assert info.value.code == "API_BUNDLE_INVALID"
    assert status_for(info.value) == 422
    assert needle in info.value.message
    assert info.value.details["errors"]


def test_loose_success_values_accepted() -> None:
    envelope = {
        "codeField": "status.code",
        "success": [0, "0", True, 200.0],
        "payloadField": "data",
        "errorFields": ["msg"],
    }
    bundle = parse_bundle(_doc(tools=[_tool(response={"type": "json", "envelope": envelope})]))
    assert bundle.tools[0].response.envelope is not None


def test_upper_case_in_the_host_is_folded_to_the_one_saved_spelling() -> None:
    bundle = parse_bundle(_doc(baseUrl="HTTPS://API.Example.COM:8443/V1/"))
    assert bundle.baseUrl == "https://api.example.com:8443/V1"
    assert (bundle.scheme, bundle.host, bundle.port) == ("https", "api.example.com", 8443)
    ipv6 = parse_bundle(_doc(baseUrl="http://[FD00::1]/"))
    assert ipv6.baseUrl == "http://[fd00::1]"
    assert (ipv6.host, ipv6.port) == ("fd00::1", 80)
