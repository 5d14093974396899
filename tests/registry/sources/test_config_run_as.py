"""A server's ``limits.run_as`` in the serve config: a numeric non-root ``uid:gid`` that
reaches the execution tier's limits; root or a name is refused naming the field."""

from __future__ import annotations

import pytest

from doraforge.registry.errors import Unprocessable
from doraforge.registry.sources.config import parse_server, server_run_as
from doraforge.registry.sources.tiers import Limits


def test_run_as_defaults_to_one_of_the_servers_own_and_a_given_one_reaches_the_tier() -> None:
    default = parse_server("time", {"command": "/bin/true"})
    assert default.limits.run_as is None  # the server's own, at launch
    assert server_run_as("time") == server_run_as("time") != server_run_as("clock")
    uid, _, gid = server_run_as("time").partition(":")
    assert uid == gid
    assert 1_000_000_000 <= int(uid) < 2_000_000_000
    own = parse_server("time", {"command": "/bin/true", "limits": {"run_as": "4242:4343"}})
    assert Limits(**own.limits.model_dump()).run_as == "4242:4343"


@pytest.mark.parametrize("value", ["0:0", "0:65534", "65534:0", "nobody:nogroup", "65534"])
def test_root_or_a_name_is_refused_naming_the_field(value: str) -> None:
    with pytest.raises(Unprocessable) as refused:
        parse_server("time", {"command": "/bin/true", "limits": {"run_as": value}})
    assert refused.value.code == "MCP_SOURCE_INVALID"
    assert "run_as" in refused.value.message
