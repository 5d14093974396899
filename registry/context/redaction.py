"""High-confidence redaction of private text for the *redacted summaries* profile.

This is redaction, not anonymisation: :func:`redact` replaces what it recognises with
confidence — secrets and tokens, e-mail addresses, IP addresses, home-directory paths,
phone numbers and explicit coordinates — by a marker naming the kind (``[secret]``,
``[email]``, ``[ip]``, ``[path]``, ``[phone]``, ``[coordinates]``). It promises nothing
about what it does not recognise: names, street addresses, free-text descriptions, a
secret written in words, an unusual phone format, a number that happens to be a position.
A summary after redaction may still identify a person or a place.

What it keeps on purpose, since metadata summaries would be useless without it and none of
it is a credential: version numbers (``1.1.1``, ``v2.0.3``), dates, times and ISO
timestamps, durations, counts, ports written alone (``:8765``), ``localhost`` and the
addresses that name no machine (loopback ``127.0.0.1`` and ``::1``, unspecified
``0.0.0.0``, a network range such as ``10.0.0.0/8``), dotted tool
and skill names (``arm.move_to``), git short hashes (fewer than 32 hex digits), UUIDs (the
ids of tasks and invocations), and a digest *labelled* with its algorithm
(``sha256:<hex>``, ``SHA-256: <hex>``, ``commit <hex>``): the evidence scope reports
SHA-256 digests as public metadata anyway. An unlabelled run of 32 or more hex digits, or
a long mixed-case base64 run of high entropy, is taken for a key and redacted.

Both functions are pure and total over ``str``: the patterns are compiled once, every
repetition is bounded, so the time is linear in the text (a few seconds per megabyte of
hostile text at worst: callers redact bounded source text, not whole files),
and ``redact(redact(text)) == redact(text)``: no rule matches a marker, and passes repeat
until one changes nothing. The one environmental input, the running user's home
directory, is read once on first use: that path names the operator wherever it is, so it
is redacted even outside ``/home``.
"""

from __future__ import annotations

import functools
import ipaddress
import math
import os
import re
from collections import Counter
from collections.abc import Callable

from doraforge.wire.guard import is_loopback

SECRET = "[secret]"
EMAIL = "[email]"
IP = "[ip]"
PATH = "[path]"
PHONE = "[phone]"
COORDINATES = "[coordinates]"
#: Every marker :func:`redact` writes.
MARKERS = (SECRET, EMAIL, IP, PATH, PHONE, COORDINATES)
_LONGEST = max(map(len, MARKERS))
#: What :func:`bounded` appends when it cuts (one character).
ELLIPSIS = "…"
DEFAULT_LIMIT = 320
_MAX_PASSES = 16

type Replacement = str | Callable[[re.Match[str]], str]

_I = re.IGNORECASE
_MARKER = re.compile(r"\[(?:secret|email|ip|path|phone|coordinates)\]")
# A value may not start with a marker: an already redacted value stays as it is.
_NOT_MARKER = r"(?!\[(?:secret|email|ip|path|phone|coordinates)\])"


# --- secrets and tokens -------------------------------------------------------------

_PRIVATE_KEY = re.compile(
    # An unterminated block (a cut text) is redacted to the end: what follows is key.
    r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|.*\Z)",
    re.DOTALL,
)
_URL_USERINFO = re.compile(r"\b([a-z][a-z0-9+.-]{0,20}://)[^\s/?#@\[\]]{1,256}@", _I)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")
_AUTH_SCHEME = re.compile(
    r"\b((?i:Bearer|Basic))\s+" + _NOT_MARKER + r"(?P<credential>[A-Za-z0-9._~+/-]{8,}=*)"
)
_VENDOR_KEY = re.compile(
    r"\b(?:"
    r"sk-(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic (sk-ant-…)
    r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}"  # GitHub
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"  # AWS access key ids
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|hf_[A-Za-z0-9]{30,}|npm_[A-Za-z0-9]{36}"  # Hugging Face, npm
    r")\b"
)
# Keys whose value is a secret whatever its length (judged by the key's last segment:
# ``db_password``); other credential keys (token, authorization, cookie, session id,
# credentials) need a value of 8 or more characters, so ``token: 5`` stays. The separator
# stays on the key's line, and ``{{secret:NAME}}`` (a template slot naming a credential)
# is no assignment.
_PASSWORD_KEY = re.compile(r"password|passwd|passphrase|pwd|secret|key|apikey", _I)
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9{])(?P<key>(?:[A-Za-z0-9]{1,40}[_-]){0,4}"
    r"(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|client[_-]?secret|authorization|credentials?|cookie"
    r"|session[_-]?id))(?![A-Za-z0-9])"
    r"(?P<sep>[\"']?[ \t]{0,3}[:=][ \t]{0,3})"
    r"(?P<quote>[\"'])?" + _NOT_MARKER + r"(?!(?:Bearer|Basic)\b)"
    r"(?P<value>(?(quote)[^\"'\n]{1,256}|[^\s\"',;&<>()\[\]{}]{1,256}+(?![(\[])))",
    _I,
)


def _looks_random(value: str, *, inner_capitals: bool = False) -> bool:
    """Whether a word reads as generated rather than written: it holds a digit or a
    punctuation mark (``hunter2``, ``a-b_c``), or with ``inner_capitals`` a capital after
    its first letter (base64 ``dXNlcjpw``); a sentence's closing punctuation does not
    count, and a CamelCase name (``PhyAgentOS``) is written."""
    word = value.rstrip(".,;:!?")
    if any(not c.isalpha() for c in word):
        return True
    return inner_capitals and any(c.isupper() for c in word[1:])


def _auth_scheme(match: re.Match[str]) -> str:
    """``Bearer <credential>``: the credential must look generated, so prose such as
    ``Basic functionality`` stays."""
    if _looks_random(match["credential"], inner_capitals=True):
        return f"{match[1]} {SECRET}"
    return match[0]


# ``token=settings.token``, ``token=runtime_token``: code naming a variable or an
# attribute, not a credential.
_CODE_NAME = re.compile(
    r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+"
)
_LINE_PREFIX = re.compile(r"[ \t]*(?:[-*][ \t]+)?[\"']?")
_MAX_PREFIX = 80


def _starts_line(text: str, at: int) -> bool:
    """Whether only indentation, a list bullet or a quote precede ``at`` on its line."""
    line = text.rfind("\n", max(0, at - _MAX_PREFIX), at) + 1
    if line == 0 and at > _MAX_PREFIX:
        return False
    return _LINE_PREFIX.fullmatch(text, line, at) is not None


def _assignment(match: re.Match[str]) -> str:
    """``password=hunter2``, ``api_key: "…"``, ``token: 3f9…``. Prose (``not a secret:
    it only``) is told apart by the value: a bare word of one case counts only after ``=``
    or in a ``key: value`` line of its own (YAML, headers), where it is config."""
    key, value = match["key"], match["value"]
    password = _PASSWORD_KEY.fullmatch(re.split(r"[_-]", key)[-1]) is not None
    if not password and len(value) < 8:
        return match[0]
    config = (
        match["quote"] is not None
        or "=" in match["sep"]
        or _starts_line(match.string, match.start())
    )
    if not config and not _looks_random(value):
        return match[0]
    if not password and _CODE_NAME.fullmatch(value):
        return match[0]
    quote = match["quote"] or ""
    return f"{key}{match['sep']}{quote}{SECRET}"


# Digests labelled with their algorithm (or as a commit) are public metadata and kept;
# any other run of 32+ hex digits with a letter and a digit is taken for a key.
_HEX = re.compile(
    r"(?P<labelled>(?<![A-Za-z0-9])(?:sha-?(?:1|224|256|384|512)|md5|blake2[bs]?|digest|commit)"
    r"[\"']?\s{0,3}[:=]?\s{0,3}[\"']?[0-9a-f]{32,128}\b)"
    r"|\b(?=[0-9]*[a-f])(?=[a-f]*[0-9])[0-9a-f]{32,}\b",
    _I,
)
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_=-])[A-Za-z0-9+/_-]{32,}={0,2}(?![A-Za-z0-9+/_=-])")
#: Random base64 of 32+ characters measures about 4.5 bits a character (99% above 4.2);
#: CamelCase names with a digit measure about 4.0.
_MIN_ENTROPY_BITS = 4.2


def _hex(match: re.Match[str]) -> str:
    return match[0] if match["labelled"] else SECRET


def _entropy(run: str) -> float:
    counts = Counter(run)
    return -sum(n / len(run) * math.log2(n / len(run)) for n in counts.values())


def _base64(match: re.Match[str]) -> str:
    """A long run that mixes upper case, lower case and digits at high entropy is a key;
    snake_case names, paths and words are not (they lack one class or the entropy)."""
    run = match[0].rstrip("=")
    upper = sum(c.isupper() for c in run)
    lower = sum(c.islower() for c in run)
    digits = sum(c.isdigit() for c in run)
    if min(upper, lower) < 2 or digits < 1 or _entropy(run) < _MIN_ENTROPY_BITS:
        return match[0]
    return SECRET


# --- e-mail and network addresses ---------------------------------------------------

_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*"
    r"\.[A-Za-z]{2,24}\b"
)
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?!\w|\.\d)")
_H = r"[0-9a-f]{1,4}"
_IPV6 = re.compile(
    r"(?<![\w:.-])(?:"
    rf"(?:{_H}:){{1,6}}:?(?:{_H}:){{0,5}}\d{{1,3}}(?:\.\d{{1,3}}){{3}}"  # with an IPv4 tail
    rf"|::(?:ffff(?::0{{1,4}})?:)?\d{{1,3}}(?:\.\d{{1,3}}){{3}}"
    rf"|(?:{_H}:){{7}}{_H}"
    rf"|(?:{_H}:){{1,7}}:(?:{_H}(?::{_H}){{0,5}})?"
    rf"|::{_H}(?::{_H}){{0,6}}"
    r")(?![\w:])",
    _I,
)


def _identifies_no_host(text: str) -> bool:
    """Loopback and unspecified addresses (``127.0.0.1``, ``::1`` and its IPv4-mapped
    forms, ``0.0.0.0``, ``::``) name no machine, like ``localhost``; ``False`` for anything
    else, an address ``ipaddress`` refuses included (it is redacted)."""
    if is_loopback(text):
        return True
    try:
        return ipaddress.ip_address(text).is_unspecified
    except ValueError:
        return False


_PREFIX_LENGTH = re.compile(r"/(\d{1,3})(?!\d)")


def _is_range(match: re.Match[str]) -> bool:
    """``10.0.0.0/8``, ``fe80::/10``: a network written as its range (host bits zero, a
    prefix shorter than one host) names no machine; ``192.168.1.7/24`` does."""
    prefix = _PREFIX_LENGTH.match(match.string, match.end())
    if prefix is None:
        return False
    try:
        network = ipaddress.ip_network(f"{match[0]}/{prefix[1]}", strict=True)
    except ValueError:
        return False
    return network.num_addresses > 1


def _ipv4(match: re.Match[str]) -> str:
    text = match[0]
    return text if _identifies_no_host(text) or _is_range(match) else IP


def _ipv6(match: re.Match[str]) -> str:
    # ``add::bee`` is hex but no address: a compressed address holds a digit.
    text = match[0]
    if "::" in text and not any(c.isdigit() for c in text):
        return text
    return text if _identifies_no_host(text) or _is_range(match) else IP


# --- home-directory paths -----------------------------------------------------------

_PATH_TAIL = r"(?:[/\\][^\s\"'<>`|\[\]]*[^\s\"'<>`|\[\].,;:!?)}])?"
_HOME_PATH = re.compile(
    r"(?<![\w./\\~-])(?:"
    r"/home/[A-Za-z0-9._-]{1,64}"
    r"|/Users/[A-Za-z0-9._-]{1,64}"
    r"|/root(?![\w.-])"
    r"|~[A-Za-z0-9._-]{0,32}(?=[/\\])"
    r"|\$\{?HOME\}?(?=[/\\]|\b)"
    r"|[A-Za-z]:\\Users\\[^\\\s\"'<>]{1,64}"
    r")" + _PATH_TAIL
)
_SYSTEM_HOMES = re.compile(r"^(?:/home/[^/]+|/Users/[^/]+|/root)$")


@functools.cache
def _own_home() -> re.Pattern[str] | None:
    """The running user's home when the general patterns would miss it (``/srv/robot``);
    ``None`` when it is one of them or is no real directory prefix (``/``)."""
    home = os.path.expanduser("~").rstrip("/")
    if not home.startswith("/") or _SYSTEM_HOMES.match(home):
        return None  # "" or "/" (no home) or a home the general patterns already cover
    return re.compile(rf"(?<![\w./-]){re.escape(home)}(?![\w.-]){_PATH_TAIL}")


# --- phone numbers ------------------------------------------------------------------

_SEP = r"[ .\-]?"
_PHONE = re.compile(
    r"(?<![\w+.\-/])(?:"
    rf"\+[1-9]\d{{0,2}}{_SEP}(?:\(0?\d{{1,4}}\){_SEP})?\d{{1,4}}(?:{_SEP}\d{{2,5}}){{1,4}}"
    r"|\(\d{3}\)\s?\d{3}[-. ]\d{4}"  # North American (202) 555-0143
    r"|\d{3}[-.]\d{3}[-.]\d{4}"  # 202-555-0143
    r"|0[1-9](?:[ .\-]\d{2}){4}"  # French 06 12 34 56 78
    r"|0\d{2,4}[ /\-]\d{3,8}(?:[ \-]\d{3,4})?"  # UK, German 020 7946 0958, 030 1234567
    r")(?!\w|[.\-/:]\d)"
)


def _phone(match: re.Match[str]) -> str:
    text = match[0]
    digits = sum(c.isdigit() for c in text)
    low, high = (8, 15) if text.startswith("+") else (10, 12)
    return PHONE if low <= digits <= high else text


# --- explicit coordinates -----------------------------------------------------------

_NUMBER = r"[-+]?\d{1,6}(?:\.\d{1,12})?"


def _labelled(labels: str) -> str:
    """``lat=48.85``, ``"x": 0.42``: one labelled number."""
    return rf"[\"']?(?:{labels})[\"']?\s{{0,3}}[:=]\s{{0,3}}{_NUMBER}(?!\w|\.\d)"


# 48.8584° or 48°51'30" (minutes and seconds also as the prime signs U+2032, U+2033)
_DEGREES = (
    r"\d{1,3}(?:\.\d{1,12})?°\s?(?:\d{1,2}['\u2032]\s?(?:\d{1,2}(?:\.\d{1,6})?[\"\u2033]\s?)?)?"
)
_GEO_ITEM = _labelled(r"lat(?:itude)?|lon(?:gitude)?|lng")
_POSE_ITEM = _labelled(r"[xyz]|roll|pitch|yaw|r[xyz]|q[wxyz]")
_LIST_SEP = r"[,;]?\s{0,3}"
_COORDINATES = re.compile(
    r"(?<![\w.])(?:"
    # lat=48.85, lon=2.29 (one labelled latitude or longitude suffices)
    rf"{_GEO_ITEM}(?:{_LIST_SEP}(?:{_GEO_ITEM}|{_POSE_ITEM}))*"
    # x=0.42 y=-0.1 z=0.3: a pose needs two labelled axes, a lone x=3 is arithmetic
    rf"|{_POSE_ITEM}(?:{_LIST_SEP}{_POSE_ITEM})+"
    # [0.42, -0.10, 0.30]: three to seven decimals in brackets (position, quaternion, pose)
    r"|[\[(]\s{0,3}[-+]?\d{1,6}\.\d{1,12}(?:\s{0,3},\s{0,3}[-+]?\d{1,6}\.\d{1,12}){2,6}\s{0,3}[\])]"
    # 48.8584° N, 2.2945° E and 48°51'30"N 2°17'40"E
    rf"|{_DEGREES}[NS][,;]?\s{{0,3}}{_DEGREES}[EW]"
    # 48.8584, 2.2945: a bare pair needs four decimals each and a valid latitude/longitude
    r"|(?P<lat>-?\d{1,2}\.\d{4,12}),\s{0,3}(?P<lon>-?\d{1,3}\.\d{4,12})"
    r")(?!\w|\.\d|°)",
    _I,
)


def _coordinates(match: re.Match[str]) -> str:
    lat, lon = match["lat"], match["lon"]
    if lat is not None and lon is not None and (abs(float(lat)) > 90 or abs(float(lon)) > 180):
        return match[0]
    return COORDINATES


# --- the pipeline -------------------------------------------------------------------

#: In order: whole secret shapes before the pieces they contain (a URL's userinfo before
#: the e-mail look-alike in it, a JWT before its base64 parts), entropy runs last.
_RULES: tuple[tuple[re.Pattern[str], Replacement], ...] = (
    (_PRIVATE_KEY, SECRET),
    (_URL_USERINFO, rf"\1{SECRET}@"),
    (_JWT, SECRET),
    (_AUTH_SCHEME, _auth_scheme),
    (_VENDOR_KEY, SECRET),
    (_ASSIGNMENT, _assignment),
    (_EMAIL, EMAIL),
    (_IPV6, _ipv6),
    (_IPV4, _ipv4),
    (_HOME_PATH, PATH),
    (_COORDINATES, _coordinates),
    (_PHONE, _phone),
    (_HEX, _hex),
    (_BASE64, _base64),
)


def redact(text: str) -> str:
    """``text`` with every recognised secret, e-mail address, IP address, home-directory
    path, phone number and explicit coordinate replaced by its marker (see the module
    text for what is recognised and what is deliberately kept). Idempotent."""
    # A marker can free its neighbour (``…0143+1-202…`` is one run until the first number
    # becomes ``[phone]``), so passes repeat until one changes nothing. Each change turns
    # unmarked characters into a marker and no rule matches a marker, so this ends.
    for _ in range(_MAX_PASSES):
        redacted = _one_pass(text)
        if redacted == text:
            break
        text = redacted
    return text


def _one_pass(text: str) -> str:
    own_home = _own_home()
    if own_home is not None:
        text = own_home.sub(PATH, text)
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text


def redact_bounded(text: str, limit: int = DEFAULT_LIMIT) -> str:
    """:func:`redact`, then :func:`bounded` to at most ``limit`` characters (ending in
    ``…`` when cut). Raises ``ValueError`` for a ``limit`` below 1."""
    return bounded(redact(text), limit)


def bounded(redacted: str, limit: int = DEFAULT_LIMIT) -> str:
    """``redacted`` (text :func:`redact` returned, perhaps reformatted since) cut to at
    most ``limit`` characters, ending in ``…`` when cut; a marker is never split (the cut
    moves before it, so ``[coordinates]`` never reads as ``[coor…``). Raises
    ``ValueError`` for a ``limit`` below 1."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    if len(redacted) <= limit:
        return redacted
    cut = limit - len(ELLIPSIS)
    for marker in _MARKER.finditer(redacted, max(0, cut - _LONGEST), cut + _LONGEST):
        if marker.start() < cut < marker.end():
            cut = marker.start()
            break
    return redacted[:cut].rstrip() + ELLIPSIS
