from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doraforge.registry.api_tools.addresses import parse_host
from doraforge.registry.api_tools.errors import OutboundDenied
from doraforge.registry.api_tools.outbound import OutboundPolicy, Resolver, Scheme

ALLOW = OutboundPolicy(
    default="allow",
    internal=["127.0.0.0/8", "::1", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"],
    external=["evil.example", "203.0.113.0/24"],
)
DENY = OutboundPolicy(
    default="deny",
    internal=["10.1.2.3"],
    external=["api.example.com", "*.good.example", "93.184.216.34", "2606:4700::/32"],
)
PUBLIC = "93.184.216.34"
PUBLIC_DECIMAL = str(int(ipaddress.IPv4Address(PUBLIC)))


def _resolver(answers: Sequence[str] | None) -> Resolver:
    async def resolve(host: str, port: int) -> list[str]:
        if answers is None:
            raise OSError("no such host")
        return list(answers)

    return resolve


# (host, resolver answers, allowed under ALLOW, allowed under DENY)
SSRF_TABLE: list[tuple[str, list[str] | None, bool, bool]] = [
    ("127.0.0.1", None, False, False),
    ("2130706433", None, False, False),  # decimal
    ("0177.0.0.1", None, False, False),  # octal
    ("0177.1", None, False, False),  # octal + short
    ("127.1", None, False, False),  # short IPv4
    ("0x7f.0.0.1", None, False, False),  # hex label
    ("0x7f000001", None, False, False),  # hex whole
    ("::ffff:127.0.0.1", None, False, False),  # IPv4-mapped IPv6
    ("[::ffff:7f00:1]", None, False, False),  # bracketed mapped, hex tail
    ("::127.0.0.1", None, False, False),  # IPv4-compatible
    ("2002:7f00:1::", None, False, False),  # 6to4 embedding loopback
    ("64:ff9b::7f00:1", None, False, False),  # NAT64 embedding loopback
    ("169.254.169.254", None, False, False),  # metadata v4
    ("2852039166", None, False, False),  # metadata, decimal
    ("::ffff:169.254.169.254", None, False, False),  # metadata, mapped
    ("64:ff9b::a9fe:a9fe", None, False, False),  # metadata, NAT64
    ("2002:a9fe:a9fe::1", None, False, False),  # metadata, 6to4
    ("fd00:ec2::254", None, False, False),  # metadata v6 (AWS)
    ("100.100.100.200", None, False, False),  # metadata (Alibaba)
    ("metadata.google.internal", ["8.8.8.8"], False, False),  # metadata hostname
    ("METADATA.GOOGLE.INTERNAL.", ["8.8.8.8"], False, False),
    ("169.254.1.1", None, False, False),  # link-local v4
    ("fe80::1", None, False, False),  # link-local v6
    ("0.0.0.0", None, False, False),  # unspecified
    ("224.0.0.1", None, False, False),  # multicast
    ("::1", None, False, False),  # loopback v6
    ("10.0.0.5", None, False, False),  # private, blacklisted / not whitelisted
    ("10.1.2.3", None, False, True),  # private, whitelisted by IP in DENY
    ("012.1.2.3", None, False, True),  # same, octal first label
    ("192.168.1.1", None, False, False),
    ("172.16.0.1", None, False, False),
    ("fc00::1", None, False, False),  # unique local
    ("100.64.0.1", None, True, False),  # CGNAT: internal, not listed
    ("8.8.8.8", None, True, False),  # public, not listed
    (PUBLIC, None, True, True),  # public, whitelisted
    (PUBLIC_DECIMAL, None, True, True),  # same, decimal
    ("203.0.113.9", None, True, False),  # non-global: only the internal list applies
    ("2606:4700::1111", None, True, True),  # public v6 in whitelisted CIDR
    ("2002:5db8:d822::", None, True, True),  # 6to4 of the public whitelisted address
    ("api.example.com", [PUBLIC], True, True),
    ("api.example.com", [PUBLIC, "10.0.0.1"], False, False),  # mixed answers
    ("api.example.com", ["127.0.0.1"], False, False),  # public name, private answer
    ("api.example.com", ["::ffff:169.254.169.254"], False, False),
    ("x.good.example", ["8.8.4.4"], True, True),  # wildcard
    ("good.example", ["8.8.4.4"], True, False),  # wildcard does not cover the apex
    ("evil.example", ["8.8.4.4"], False, False),  # blacklisted name
    ("other.example", ["8.8.4.4"], True, False),
    ("other.example", ["::ffff:10.0.0.1"], False, False),
    ("other.example", None, False, False),  # DNS failure
    ("other.example", [], False, False),  # empty answer
    ("1.2.3.4.5", None, False, False),  # malformed numeric
    ("256.1.1.1", None, False, False),
    ("08.1.1.1", None, False, False),  # bad octal
    ("exa mple.com", None, False, False),
]


def _allowed(policy: OutboundPolicy, host: str, answers: list[str] | None) -> bool:
    try:
        asyncio.run(policy.vet(host, 443, _resolver(answers), scheme="https"))
    except OutboundDenied:
        return False
    return True


def test_table_is_big_enough() -> None:
    assert len(SSRF_TABLE) >= 25


@pytest.mark.parametrize(("host", "answers", "under_allow", "under_deny"), SSRF_TABLE)
def test_ssrf_table(
    host: str, answers: list[str] | None, under_allow: bool, under_deny: bool
) -> None:
    assert _allowed(ALLOW, host, answers) is under_allow
    assert _allowed(DENY, host, answers) is under_deny


def test_empty_allow_policy_still_hard_denies_metadata() -> None:
    policy = OutboundPolicy(default="allow")
    for host in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "fe80::2"):
        assert not _allowed(policy, host, None)
    open_policy = OutboundPolicy(default="allow", internal=[], external=[])
    whitelisted = OutboundPolicy(default="deny", internal=["169.254.0.0/16", "fe80::/10"])
    assert not _allowed(whitelisted, "169.254.169.254", None)
    assert _allowed(open_policy, "127.0.0.1", None)


def test_vet_resolves_once_and_returns_the_checked_address() -> None:
    calls: list[str] = []
    answers = iter([["8.8.8.8"], ["127.0.0.1"]])

    async def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return next(answers)

    policy = OutboundPolicy(default="allow", internal=["127.0.0.0/8"])
    first = asyncio.run(policy.vet("rebind.example", 80, rebinding, scheme="http"))
    assert str(first) == "8.8.8.8"
    assert calls == ["rebind.example"]
    with pytest.raises(OutboundDenied) as info:
        asyncio.run(policy.vet("rebind.example", 80, rebinding, scheme="http"))
    assert info.value.code == "API_EGRESS_DENIED"
    assert "127.0.0.1" in info.value.message


def test_invalid_rules_are_rejected() -> None:
    with pytest.raises(ValueError, match="rule"):
        OutboundPolicy(internal=["10.0.0.0/99"])
    with pytest.raises(ValueError, match="rule"):
        OutboundPolicy(external=["*.1.2.3.4"])


def test_names_host_for_save() -> None:
    assert DENY.names_host("api.example.com", 443, scheme="https")
    assert DENY.names_host("a.good.example", 443, scheme="https")
    assert DENY.names_host("93.184.216.34", 80, scheme="http")
    assert not DENY.names_host("unlisted.example", 443, scheme="https")
    assert not DENY.names_host("api.example.com", 8443, scheme="https")
    assert not DENY.names_host("api.example.com", 443, scheme="http")


@settings(deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_decimal_and_hex_forms_parse_to_the_same_address(number: int) -> None:
    expected = ipaddress.IPv4Address(number)
    assert parse_host(str(number)) == expected
    assert parse_host(hex(number)) == expected
    assert parse_host(f"::ffff:{expected}") == expected


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=40),
        st.text(alphabet="0123456789abcdefxX.:[]%", max_size=40),
        st.lists(st.integers(min_value=0, max_value=2**33), min_size=1, max_size=5).map(
            lambda parts: ".".join(str(p) for p in parts)
        ),
    )
)
def test_address_parsing_fuzz_raises_only_outbound_denied(host: str) -> None:
    codes = {"API_TARGET_INVALID", "API_EGRESS_DENIED", "API_DNS_FAILED"}
    code = "allowed"
    try:
        asyncio.run(DENY.vet(host, 80, _resolver(["8.8.8.8"]), scheme="http"))
    except OutboundDenied as exc:
        code = exc.code
    assert code in codes | {"allowed"}


PORTED = OutboundPolicy(
    default="deny",
    internal=["127.0.0.1:9000", "[::1]:9000", "10.0.0.0/8:8080", "db.internal"],
    external=["api.example.com:8443", "*.cdn.example:7000", "93.184.216.34"],
)

# (host, resolver answers, port, scheme, allowed under PORTED)
PORT_TABLE: list[tuple[str, list[str] | None, int, Scheme, bool]] = [
    ("127.0.0.1", None, 9000, "http", True),  # the named port
    ("127.0.0.1", None, 8080, "http", False),  # another service on the same address
    ("127.0.0.1", None, 80, "http", False),  # a rule with a port opens nothing else
    ("::1", None, 9000, "http", True),
    ("::1", None, 9001, "http", False),
    ("10.2.3.4", None, 8080, "https", True),  # a range with a port
    ("10.2.3.4", None, 443, "https", False),
    ("db.internal", ["10.9.9.9"], 80, "http", True),  # no port: http's default only
    ("db.internal", ["10.9.9.9"], 443, "https", True),  # no port: https's default only
    ("db.internal", ["10.9.9.9"], 5432, "http", False),
    ("db.internal", ["10.9.9.9"], 443, "http", False),  # 443 is not http's default
    ("api.example.com", ["1.1.1.1"], 8443, "https", True),
    ("api.example.com", ["1.1.1.1"], 443, "https", False),
    ("x.cdn.example", ["8.8.8.8"], 7000, "https", True),  # a wildcard with a port
    ("x.cdn.example", ["8.8.8.8"], 443, "https", False),
    ("93.184.216.34", None, 443, "https", True),
    ("93.184.216.34", None, 8443, "https", False),
]


@pytest.mark.parametrize(("host", "answers", "port", "scheme", "allowed"), PORT_TABLE)
def test_a_rule_that_names_a_port_allows_only_that_port_and_one_without_the_default(
    host: str, answers: list[str] | None, port: int, scheme: Scheme, allowed: bool
) -> None:
    vetted = PORTED.vet(host, port, _resolver(answers), scheme=scheme)
    if allowed:
        asyncio.run(vetted)
        return
    with pytest.raises(OutboundDenied) as info:
        asyncio.run(vetted)
    assert info.value.code == "API_EGRESS_DENIED"
    assert info.value.details["port"] == port


def test_a_blacklist_rule_without_a_port_closes_every_port_and_one_with_a_port_only_it() -> None:
    policy = OutboundPolicy(default="allow", external=["evil.example", "8.8.8.8:53"])
    for port in (80, 443, 8080):
        assert not _allowed_on(policy, "evil.example", ["8.8.4.4"], port)
    assert not _allowed_on(policy, "8.8.8.8", None, 53)
    assert _allowed_on(policy, "8.8.8.8", None, 443)


def _allowed_on(policy: OutboundPolicy, host: str, answers: list[str] | None, port: int) -> bool:
    try:
        asyncio.run(policy.vet(host, port, _resolver(answers), scheme="https"))
    except OutboundDenied:
        return False
    return True


@pytest.mark.parametrize(
    "rule", ["a.example:0", "a.example:65536", "a.example:abc", "a.example:", "[::1]x", "[::1"]
)
def test_rules_with_a_bad_port_are_rejected(rule: str) -> None:
    with pytest.raises(ValueError, match="rule"):
        OutboundPolicy(internal=[rule])
