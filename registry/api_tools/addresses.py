"""Host parsing and address normalisation for the outbound guard.

Every numeric spelling an OS resolver or URL parser might accept (decimal ``2130706433``,
octal ``0177.0.0.1``, short ``127.1``, hex ``0x7f.1``) is parsed to one address, and IPv6
forms that embed IPv4 (mapped, compatible, 6to4, NAT64, Teredo) are unwrapped before
classification. :func:`canonical_host` names the one spelling a saved bundle may use, and
:func:`split_port` reads the ``host:port`` form of rules and URLs.
"""

from __future__ import annotations

import ipaddress
import re

from doraforge.registry.api_tools.errors import OutboundDenied

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_NUMERIC_LABEL = re.compile(r"^(0[xX][0-9a-fA-F]*|[0-9]+)$")
_HOSTNAME = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)(\.(?!-)[a-z0-9_-]{1,63}(?<!-))*$")


def invalid(host: str, why: str) -> OutboundDenied:
    return OutboundDenied(
        "API_TARGET_INVALID", f"target host {host[:80]!r} is invalid: {why}", details={}
    )


def _label_value(label: str, host: str) -> int:
    if label[:2].lower() == "0x":
        return int(label[2:] or "0", 16)
    if len(label) > 1 and label.startswith("0"):
        if not set(label) <= set("01234567"):
            raise invalid(host, "bad octal component")
        return int(label, 8)
    return int(label)


def _inet_aton(host: str, labels: list[str]) -> ipaddress.IPv4Address:
    if len(labels) > 4:
        raise invalid(host, "too many IPv4 components")
    values = [_label_value(label, host) for label in labels]
    head, last = values[:-1], values[-1]
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(values)):
        raise invalid(host, "IPv4 component out of range")
    number = last
    for index, value in enumerate(head):
        number |= value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


def parse_host(host: str) -> IPAddress | str:
    """Return an IP address for any numeric spelling, else the normalised hostname."""
    text = host.strip().lower()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if not text or len(text) > 253 or any(ord(ch) < 33 or ord(ch) > 126 for ch in text):
        raise invalid(host, "empty, too long or non-ASCII")
    if ":" in text:
        try:
            return unwrap(ipaddress.IPv6Address(text))
        except ValueError:
            raise invalid(host, "malformed IPv6 address") from None
    text = text.removesuffix(".")
    labels = text.split(".")
    if labels and _NUMERIC_LABEL.match(labels[-1]):
        if not all(_NUMERIC_LABEL.match(label) for label in labels):
            raise invalid(host, "numeric final label in a non-numeric host")
        return _inet_aton(host, labels)
    if not _HOSTNAME.match(text):
        raise invalid(host, "not a valid hostname")
    return text


def unwrap(address: IPAddress) -> IPAddress:
    """Return the IPv4 address embedded in an IPv6 translation form, else the address."""
    if isinstance(address, ipaddress.IPv4Address):
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if any(address in net for net in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    number = int(address)
    if number >> 32 == 0 and number > 1:  # deprecated IPv4-compatible ::a.b.c.d
        return ipaddress.IPv4Address(number)
    return ipaddress.IPv6Address(int(address)) if address.scope_id else address


def parse_address(text: str) -> IPAddress:
    """Parse a resolver answer (always numeric) to an unwrapped address."""
    parsed = parse_host(text.split("%", 1)[0])
    if isinstance(parsed, str):
        raise invalid(text, "resolver returned a non-address")
    return parsed


def parse_port(text: str) -> int:
    """A port written as 1-5 ASCII digits in 1-65535; ``ValueError`` otherwise."""
    if not (text.isascii() and text.isdigit() and len(text) <= 5) or not 0 < int(text) < 65536:
        raise ValueError(f"port {text[:16]!r} is not a number in 1-65535")
    return int(text)


def split_port(text: str) -> tuple[str, int | None]:
    """``(host, port)`` from ``host``, ``host:port``, ``[v6]`` or ``[v6]:port``.

    A bare IPv6 address (more than one colon, no brackets) carries no port. Raises
    ``ValueError`` for an unclosed bracket, text after it, or a bad port.
    """
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError("unclosed '[' in host")
        rest = text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError("unexpected text after ']'")
        return text[: end + 1], parse_port(rest[1:]) if rest else None
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return host, parse_port(port)
    return text, None


def canonical_host(host: str) -> str:
    """The one spelling of ``host`` a saved bundle may use: lower case, dotted-quad IPv4,
    compressed IPv6 in brackets, no trailing dot.

    Upper-case letters are folded (names are case-insensitive); any other difference -
    octal, hex, zero-padded or short IPv4, IPv4 hidden in an IPv6 form, a trailing dot -
    raises ``ValueError`` naming the canonical form, and an unparsable host raises
    :class:`OutboundDenied`.
    """
    written = host.lower()
    parsed = parse_host(written)
    canonical = f"[{parsed}]" if isinstance(parsed, ipaddress.IPv6Address) else str(parsed)
    if written != canonical:
        raise ValueError(f"host {host[:80]!r} is not in canonical form; write it as {canonical}")
    return canonical
