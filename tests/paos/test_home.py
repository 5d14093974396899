import asyncio
from pathlib import Path
from typing import Any

import pytest

from doraforge.gateway.core import Gateway
from doraforge.gateway.http import gateway_policy
from doraforge.gateway.local import LocalCarrier
from doraforge.paos.errors import ForgeHttpError
from doraforge.paos.home import PaosHome, open_service
from tests.gateway.harness import mock_config
from tests.gateway.support import live_gateway


def test_the_home_comes_from_the_flag_the_environment_or_the_default(tmp_path: Path) -> None:
    env = {"DORAFORGE_HOME": str(tmp_path / "env"), "HOME": str(tmp_path)}
    assert PaosHome.from_environment(env).root == tmp_path / "env"
    assert PaosHome.from_environment(env, explicit=tmp_path / "flag").root == tmp_path / "flag"
    default = PaosHome.from_environment({"HOME": str(tmp_path)})
    assert default.root == tmp_path / ".doraforge"
    assert default.store_path.name == "paos.db"


def test_open_service_creates_the_store_and_workspace(tmp_path: Path) -> None:
    service = open_service(PaosHome(tmp_path / "home"))
    try:
        assert service.store.path.exists()
        assert service.workspace.is_dir()
        assert service.store.active_task() is None
    finally:
        service.store.close()


def test_open_service_clients_ask_for_their_urls_token_on_every_request(tmp_path: Path) -> None:
    token = "home-test-token-0123456789"
    gateway = Gateway(mock_config(), send=LocalCarrier().send)
    presented: dict[str, str] = {}
    with live_gateway(gateway, policy=gateway_policy(mock_config(), token)) as server:
        url = server.url
        presented[url] = token
        service = open_service(PaosHome(tmp_path / "home"), token_for=presented.get)

        async def list_twice() -> tuple[dict[str, Any], ForgeHttpError]:
            client = service.client(url)
            listing = await client.list_tools()
            presented[url] = "a-restarted-skill-has-another-token"
            with pytest.raises(ForgeHttpError) as refused:
                await service.client(url).list_tools()  # the same cached client
            await service.aclose()
            return listing, refused.value

        try:
            listing, refused = asyncio.run(list_twice())
        finally:
            service.store.close()
    assert "mock.move" in {tool["tool_id"] for tool in listing["tools"]}
    assert (refused.status_code, refused.code) == (401, "FORGE_TOOL_AUTH_INVALID")
