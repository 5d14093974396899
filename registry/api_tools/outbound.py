"""Outbound policy: a default action plus internal/external rule lists, enforced at dial.

Under ``allow`` the lists are blacklists, under ``deny`` whitelists. Each resolved address
is judged against the list of its own network side (public addresses -> ``external``,
everything else -> ``internal``), so a name listed as external never blesses a private
resolution. Link-local, cloud-metadata and unroutable targets are refused in every mode.

A rule may name a port (``api.example.com:8443``, ``127.0.0.1:9000``, ``[::1]:9000``,
``10.0.0.0/8:8080``; IPv6 ranges take none). A whitelist rule without a port opens only the
scheme's default port (80 for http, 443 for https), so allowing one upstream never opens
another service on the same address, such as the Gateway's port; a blacklist rule without
a port closes every port of its target.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from doraforge.registry.api_tools.addresses import IPAddress, parse_address, parse_host, split_port
from doraforge.registry.api_tools.errors import OutboundDenied

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
Side = Literal["internal", "external"]
Scheme = Literal["http", "https"]
SIDES: tuple[Side, Side] = ("internal", "external")
DEFAULT_PORTS: dict[str, int] = {"http": 80, "https": 443}

METADATA_HOSTS = frozenset(
    {"metadata.google.internal", "metadata.goog", "metadata", "instance-data", "metadata.azure"}
)
_HARD_DENIED = tuple(
    ipaddress.ip_network(net)
    for net in (
        "169.254.0.0/16",
        "fe80::/10",
        "100.100.100.200/32",
        "fd00:ec2::254/128",
        "0.0.0.0/8",
        "255.255.255.255/32",
    )
)


@dataclass(frozen=True)
class Rule:
    """One policy entry: hostname, ``*.domain`` wildcard, IP literal or CIDR range, with an
    optional port (``None``: the rule names no port)."""

    text: str
    hostname: str | None = None
    suffix: str | None = None
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> Rule:
        try:
            target, port = split_port(text.strip().lower())
        except ValueError as exc:
            raise ValueError(f"rule {text!r}: {exc}") from None
        if target.startswith("*."):
            name = parse_host(target[2:])
            if not isinstance(name, str):
                raise ValueError(f"rule {text!r}: a wildcard needs a domain name")
            return cls(text, suffix="." + name, port=port)
        if "/" in target:
            try:
                network = ipaddress.ip_network(target, strict=False)
            except ValueError:
                raise ValueError(f"rule {text!r}: invalid CIDR range") from None
            return cls(text, network=network, port=port)
        try:
            parsed = parse_host(target)
        except OutboundDenied:
            raise ValueError(f"rule {text!r}: not a hostname, IP or CIDR") from None
        if isinstance(parsed, str):
            return cls(text, hostname=parsed, port=port)
        return cls(text, network=ipaddress.ip_network(parsed), port=port)

    @property
    def names_host(self) -> bool:
        return self.network is None

    def matches_name(self, host: str) -> bool:
        if self.hostname is not None:
            return host == self.hostname
        return self.suffix is not None and host.endswith(self.suffix)

    def matches_address(self, address: IPAddress) -> bool:
        return self.network is not None and address in self.network

    def covers_port(self, port: int, default_port: int, *, whitelist: bool) -> bool:
        """Whether the rule speaks for ``port``: its own port when it names one; else, as a
        whitelist entry only the scheme's default port, as a blacklist entry every port
        (both the fail-closed reading of a rule that names no port)."""
        if self.port is not None:
            return port == self.port
        return port == default_port or not whitelist


def side_of(address: IPAddress) -> Side:
    return "external" if address.is_global else "internal"


def hard_denied(address: IPAddress) -> bool:
    if address.is_multicast or address.is_unspecified:
        return True
    if address.is_reserved and not address.is_loopback:
        return True
    return any(address in net for net in _HARD_DENIED)


async def system_resolver(host: str, port: int) -> list[str]:
    """Resolve with the event loop's getaddrinfo (TCP answers only)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class OutboundPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default: Literal["allow", "deny"] = "allow"
    internal: list[str] = Field(default_factory=list)
    external: list[str] = Field(default_factory=list)

    @field_validator("internal", "external")
    @classmethod
    def _rules_parse(cls, rules: list[str]) -> list[str]:
        for rule in rules:
            Rule.parse(rule)
        return rules

    @cached_property
    def _parsed(self) -> dict[Side, list[Rule]]:
        return {side: [Rule.parse(text) for text in getattr(self, side)] for side in SIDES}

    def rules(self, side: Side) -> list[Rule]:
        return self._parsed[side]

    def names_host(self, host: str, port: int, *, scheme: Scheme) -> bool:
        """True when a NAME rule (or, for an IP literal host, an IP rule) lists the host
        and, read as a whitelist entry, covers ``port`` for ``scheme``."""
        parsed = parse_host(host)
        default_port = DEFAULT_PORTS[scheme]
        rules = [
            rule
            for rule in self.rules("internal") + self.rules("external")
            if rule.covers_port(port, default_port, whitelist=True)
        ]
        if isinstance(parsed, str):
            return any(rule.names_host and rule.matches_name(parsed) for rule in rules)
        return any(rule.matches_address(parsed) for rule in rules)

    def check(self, host: str, address: IPAddress, port: int, *, scheme: Scheme) -> None:
        """Raise OutboundDenied unless dialing ``address``:``port`` for ``host`` is allowed."""
        if hard_denied(address):
            raise _denied(host, address, port, "link-local, metadata or unroutable address")
        side = side_of(address)
        whitelist = self.default == "deny"
        listed = any(
            (rule.matches_address(address) or rule.matches_name(host))
            and rule.covers_port(port, DEFAULT_PORTS[scheme], whitelist=whitelist)
            for rule in self.rules(side)
        )
        if listed != whitelist:
            verdict = "is blacklisted" if listed else "matches no whitelist rule"
            raise _denied(host, address, port, f"{side} target {verdict}")

    async def vet(
        self, host: str, port: int, resolver: Resolver | None = None, *, scheme: Scheme
    ) -> IPAddress:
        """Resolve once, check every address on ``port``, and return the one to connect to."""
        parsed = parse_host(host)
        if isinstance(parsed, str) and parsed in METADATA_HOSTS:
            raise _denied(parsed, None, port, "cloud metadata hostname")
        if not isinstance(parsed, str):
            self.check(str(parsed), parsed, port, scheme=scheme)
            return parsed
        addresses = await _resolve(parsed, port, resolver or system_resolver)
        for address in addresses:
            self.check(parsed, address, port, scheme=scheme)
        return addresses[0]


async def _resolve(host: str, port: int, resolver: Resolver) -> list[IPAddress]:
    try:
        answers = list(await resolver(host, port))
    except (OSError, UnicodeError) as exc:
        raise OutboundDenied(
            "API_DNS_FAILED", f"could not resolve {host!r}: {exc}", retryable=True
        ) from None
    if not answers:
        raise OutboundDenied("API_DNS_FAILED", f"{host!r} resolved to no address", retryable=True)
    return [parse_address(answer) for answer in answers]


def _denied(host: str, address: IPAddress | None, port: int, why: str) -> OutboundDenied:
    where = f"{host} ({address})" if address is not None and str(address) != host else host
    return OutboundDenied(
        "API_EGRESS_DENIED",
        f"outbound request to {where} port {port} refused: {why}",
        details={"host": host, "address": str(address) if address else None, "port": port},
    )
