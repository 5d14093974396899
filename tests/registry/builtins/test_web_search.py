"""``builtin.web_search`` against local servers answering in each provider's documented
format (DuckDuckGo's HTML results page, SearXNG's JSON, Tavily's JSON): normalised
results, the cap of 10, unknown arguments ignored, the provider's egress host, fallback."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from doraforge.registry.builtins import register_builtins
from doraforge.registry.builtins.providers.duckduckgo import parse_results
from doraforge.registry.credentials import CredentialStore
from doraforge.registry.egress import EgressSettings
from doraforge.registry.service import RegistryService
from doraforge.registry.settings import ServerSettings, SettingsError
from tests.registry.builtins.conftest import call, caller, service_with
from tests.registry.builtins.upstream import Upstream, ddg_page

pytestmark = pytest.mark.anyio

SEARCH = "builtin.web_search"


def search_settings(**web_search: Any) -> ServerSettings:
    return ServerSettings(
        builtins={"enabled": ["web_search"], "web_search": web_search},
        secrets={"TAVILY_KEY": "tvly-test-key"},
    )


async def test_duckduckgo_html_results_are_parsed_and_normalised(served: Upstream) -> None:
    service = service_with(search_settings(provider="duckduckgo", base_url=served.url))
    found = await call(service, "web_search", {"query": "robot arms"}, caller())
    assert found["state"] == "completed", found
    result = found["result"]
    assert result["provider"] == "duckduckgo"
    assert result["truncated"] is True  # 15 on the page, 5 by default
    assert result["results"][0] == {
        "title": "Result 1 & more",
        "url": "https://example1.org/page?a=1",
        "snippet": "Snippet 1 about robots.",
    }
    assert len(result["results"]) == 5
    assert all("ads.example" not in hit["url"] for hit in result["results"])
    assert served.seen[-1]["path"] == "/html/"
    assert served.seen[-1]["query"] == {"q": "robot arms"}


def test_the_duckduckgo_parser_tolerates_markup_without_results() -> None:
    assert parse_results("<html><body><p>No results.</p><div class=") == []
    assert len(parse_results(ddg_page(3))) == 3


async def test_searxng_json_through_a_loopback_instance_works_with_egress_off(
    served: Upstream,
) -> None:
    service = service_with(search_settings(provider="searxng", base_url=served.url))
    entry = service.resolve(SEARCH)
    assert entry is not None
    assert entry.policy.egressHosts == []
    found = await call(service, "web_search", {"query": "mujoco", "max_results": 3}, caller())
    assert found["state"] == "completed", found
    assert found["result"]["provider"] == "searxng"
    assert found["result"]["results"] == [
        {
            "title": f"searx result {n}",
            "url": f"https://searx{n}.example/doc",
            "snippet": f"searx snippet {n}",
        }
        for n in (1, 2, 3)
    ]
    assert served.seen[-1]["query"] == {"q": "mujoco", "format": "json", "pageno": "1"}


async def test_tavily_posts_json_with_the_stored_key(served: Upstream) -> None:
    settings = search_settings(
        provider="tavily", base_url=f"{served.url}/tavily", api_key_credential="TAVILY_KEY"
    )
    service = service_with(settings)
    found = await call(service, "web_search", {"query": "dora rs", "max_results": 2}, caller())
    assert found["state"] == "completed", found
    assert found["result"]["provider"] == "tavily"
    assert [hit["title"] for hit in found["result"]["results"]] == [
        "tavily result 1",
        "tavily result 2",
    ]
    assert found["result"]["truncated"] is True  # asked one more than returned
    sent = served.seen[-1]
    assert sent["method"] == "POST"
    assert sent["path"] == "/tavily/search"
    assert json.loads(sent["body"])["query"] == "dora rs"
    assert sent["headers"]["authorization"] == "Bearer tvly-test-key"
    assert "tvly-test-key" not in json.dumps(found)


async def test_max_results_is_capped_at_ten(served: Upstream) -> None:
    service = service_with(search_settings(provider="searxng", base_url=served.url))
    found = await call(service, "web_search", {"query": "q", "max_results": 50}, caller())
    assert found["state"] == "completed", found
    assert len(found["result"]["results"]) == 10
    assert found["repairs"] == [{"kind": "clamp", "path": "max_results", "bound": "maximum"}]


async def test_the_settings_default_sets_the_result_count(served: Upstream) -> None:
    settings = search_settings(provider="searxng", base_url=served.url, max_results=7)
    found = await call(service_with(settings), "web_search", {"query": "q"}, caller())
    assert len(found["result"]["results"]) == 7


async def test_unknown_parameters_are_accepted_and_dropped(served: Upstream) -> None:
    service = service_with(search_settings(provider="searxng", base_url=served.url))
    arguments = {"query": "q", "max_results": 2, "lang": "de", "safe_search": True, "page": 3}
    found = await call(service, "web_search", arguments, caller())
    assert found["state"] == "completed", found
    assert len(found["result"]["results"]) == 2
    assert "repairs" not in found
    assert served.seen[-1]["query"] == {"q": "q", "format": "json", "pageno": "1"}


async def test_a_mislabelled_query_is_still_renamed(served: Upstream) -> None:
    service = service_with(search_settings(provider="searxng", base_url=served.url))
    found = await call(service, "web_search", {"q": "arm", "max_results": 1}, caller())
    assert found["state"] == "completed", found
    assert found["repairs"] == [{"kind": "rename", "from": "q", "to": "query"}]
    assert served.seen[-1]["query"]["q"] == "arm"


async def test_a_query_is_still_required_and_bounded(served: Upstream) -> None:
    service = service_with(search_settings(provider="searxng", base_url=served.url))
    for arguments in ({"max_results": 2}, {"query": ""}, {"query": "   "}, {"query": "x" * 401}):
        refused = await call(service, "web_search", arguments, caller())
        assert refused["error"]["code"] == "TOOL_INVALID_ARGUMENTS", arguments
    assert served.seen == []


async def test_the_provider_host_is_the_entrys_egress_host_and_is_gated() -> None:
    service = service_with(search_settings(provider="duckduckgo"))  # the real endpoint
    entry = service.resolve(SEARCH)
    assert entry is not None
    assert entry.policy.egressHosts == ["html.duckduckgo.com"]
    assert entry.policy.risk == "medium"
    denied = await call(service, "web_search", {"query": "q"}, caller())  # egress is off
    assert denied["state"] == "denied"
    assert denied["error"]["code"] == "TOOL_EGRESS_DENIED"
    tavily = service_with(search_settings(provider="tavily", api_key_credential="TAVILY_KEY"))
    tavily_entry = tavily.resolve(SEARCH)
    assert tavily_entry is not None
    assert tavily_entry.policy.egressHosts == ["api.tavily.com"]


async def test_an_allowed_provider_host_passes_the_egress_gate(served: Upstream) -> None:
    # A non-loopback name for the upstream: it must be on the egress allowlist, and the
    # provider's own outbound policy dials only that name's port.
    settings = search_settings(provider="searxng", base_url=f"http://localhost.test:{served.port}")
    closed = service_with(settings)
    assert (await call(closed, "web_search", {"query": "q"}, caller()))["error"][
        "code"
    ] == "TOOL_EGRESS_DENIED"
    opened = service_with(settings, egress=EgressSettings(enabled=True, hosts=("localhost.test",)))
    answer = await call(opened, "web_search", {"query": "q"}, caller())
    # Past the gate: the name does not resolve here, so the outbound guard reports it.
    assert answer["state"] == "failed"
    assert answer["error"]["code"] == "API_DNS_FAILED"


@pytest.mark.parametrize(
    ("web_search", "missing"),
    [
        ({"provider": "searxng"}, "builtins.web_search.base_url"),
        ({"provider": "tavily"}, "builtins.web_search.api_key_credential"),
        ({"provider": "tavily", "api_key_credential": "NOT_STORED"}, "'NOT_STORED'"),
    ],
)
async def test_a_provider_missing_its_setting_falls_back_to_duckduckgo_with_a_log_line(
    caplog: pytest.LogCaptureFixture, web_search: dict[str, Any], missing: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="doraforge.registry.builtins"):
        service = service_with(search_settings(**web_search))
    lines = [r.getMessage() for r in caplog.records if "FALLBACK" in r.getMessage()]
    assert len(lines) == 1
    assert missing in lines[0]
    assert "duckduckgo" in lines[0]
    entry = service.resolve(SEARCH)
    assert entry is not None
    assert entry.policy.egressHosts == ["html.duckduckgo.com"]
    assert "provider: duckduckgo" in entry.description


async def test_a_failing_provider_is_a_structured_failure(served: Upstream) -> None:
    settings = search_settings(
        provider="tavily", base_url=f"{served.url}/tavily", api_key_credential="WRONG"
    )
    settings = settings.model_copy(update={"secrets": {"WRONG": "tvly-wrong"}})
    found = await call(service_with(settings), "web_search", {"query": "q"}, caller())
    assert found["state"] == "failed"
    assert found["error"]["code"] == "WEB_SEARCH_PROVIDER_ERROR"
    assert found["error"]["details"] == {"provider": "tavily", "status": 401}
    assert "tvly-wrong" not in json.dumps(found)


async def test_without_the_network_permission_nothing_is_sent(served: Upstream) -> None:
    service = service_with(search_settings(provider="searxng", base_url=served.url))
    denied = await call(service, "web_search", {"query": "q"}, caller(permissions=frozenset()))
    assert denied["error"]["code"] == "TOOL_PERMISSION_DENIED"
    assert served.seen == []


@pytest.mark.parametrize(
    "builtins",
    [
        {"enabled": ["calculator", "shell"]},
        {"enabled": ["calculator", "calculator"]},
        {"web_search": {"provider": "bing"}},
        {"web_search": {"max_results": 11}},
        {"web_search": {"base_url": "ftp://127.0.0.1"}},
        {"web_search": {"base_url": "http://127.0.0.1/?q=1"}},
        {"extra": True},
    ],
)
def test_a_bad_builtins_section_is_refused_naming_the_field(builtins: dict[str, Any]) -> None:
    with pytest.raises(SettingsError) as refused:
        service_with(ServerSettings(builtins=builtins))
    assert str(refused.value).startswith("BUILTINS_INVALID: builtins.")


async def test_the_tavily_key_comes_from_the_credential_store(
    served: Upstream, tmp_path: Path
) -> None:
    store = CredentialStore(tmp_path / "credentials.json")
    store.set("TAVILY_KEY", "tvly-test-key")
    settings = ServerSettings(
        builtins={
            "enabled": ["web_search"],
            "web_search": {
                "provider": "tavily",
                "base_url": f"{served.url}/tavily",
                "api_key_credential": "TAVILY_KEY",
            },
        }
    )
    service = RegistryService()
    register_builtins(service, settings, store)
    found = await call(service, "web_search", {"query": "q"}, caller())
    assert found["state"] == "completed", found
    store.delete("TAVILY_KEY")  # read on every call: a removed key is noticed at once
    gone = await call(service, "web_search", {"query": "q"}, caller())
    assert gone["error"]["code"] == "WEB_SEARCH_CREDENTIAL_MISSING"
