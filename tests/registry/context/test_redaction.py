"""High-confidence redaction: every category is replaced by its marker, near misses stay
exactly as they were, a second pass changes nothing, and a bounded summary never splits a
marker."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doraforge.registry.context import redaction
from doraforge.registry.context.redaction import (
    COORDINATES,
    ELLIPSIS,
    EMAIL,
    IP,
    MARKERS,
    PATH,
    PHONE,
    SECRET,
    bounded,
    redact,
    redact_bounded,
)

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkEifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nq1w2e3r4\n-----END RSA PRIVATE KEY-----"
SHA256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
GIT_FULL = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

#: (private text, what redaction must leave of it).
POSITIVES: list[tuple[str, str]] = [
    # secrets and tokens
    ("Authorization: Bearer abc123.def456-ghi", f"Authorization: Bearer {SECRET}"),
    ("curl -H 'authorization: bearer AbCdEfGhIjKl'", f"curl -H 'authorization: bearer {SECRET}'"),
    ("Basic dXNlcjpwYXNzd29yZA==", f"Basic {SECRET}"),
    ("key sk-proj-4f9KQz1Lx8Vb2Nc7Rt5Y in env", f"key {SECRET} in env"),
    ("ANTHROPIC sk-ant-api03-AAAA1111BBBB2222CCCC", f"ANTHROPIC {SECRET}"),
    ("token ghp_0123456789abcdefghijABCDEFGHIJ012345", f"token {SECRET}"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijKLMN", SECRET),
    ("slack xoxb-123456789012-abcdefABCDEF", f"slack {SECRET}"),
    ("aws AKIAIOSFODNN7EXAMPLE here", f"aws {SECRET} here"),
    (f"aws_secret {AWS_SECRET}", f"aws_secret {SECRET}"),
    (f"jwt {JWT}", f"jwt {SECRET}"),
    (f"api key {GIT_FULL} (unlabelled hex)", f"api key {SECRET} (unlabelled hex)"),
    ("password=hunter2", f"password={SECRET}"),
    ("cell:\n  password: correcthorse\n", f"cell:\n  password: {SECRET}\n"),
    ("Cookie: sid12345678", f"Cookie: {SECRET}"),
    ("db_password: 1234", f"db_password: {SECRET}"),
    ('{"api_key": "abc"}', f'{{"api_key": "{SECRET}"}}'),
    ("GITLAB_TOKEN=glxx-0123456789abcdef&x=1", f"GITLAB_TOKEN={SECRET}&x=1"),
    ("?access_token=aZ09aZ09aZ09 next", f"?access_token={SECRET} next"),
    (f"key:\n{PEM}\nend", f"key:\n{SECRET}\nend"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk", SECRET),
    (
        "pull https://bot:s3cr3t@git.example.com/r.git",
        f"pull https://{SECRET}@git.example.com/r.git",
    ),
    ("ftp://anon@files.example.org/pub", f"ftp://{SECRET}@files.example.org/pub"),
    # e-mail addresses
    ("mail alice.smith+robots@example.co.uk now", f"mail {EMAIL} now"),
    ("<ops@lab-7.example.com>", f"<{EMAIL}>"),
    # IP addresses
    ("gateway at 192.168.1.10:8080", f"gateway at {IP}:8080"),
    ("from 10.0.0.1.", f"from {IP}."),
    ("lan 192.168.1.7/24 and 172.16.4.2", f"lan {IP}/24 and {IP}"),
    ("peer fe80::1%eth0", f"peer {IP}%eth0"),
    ("v6 2001:0db8:85a3:0000:0000:8a2e:0370:7334 ok", f"v6 {IP} ok"),
    ("v6 2001:db8::8a2e:370:7334", f"v6 {IP}"),
    ("mapped ::ffff:192.0.2.1", f"mapped {IP}"),
    ("url http://[2001:db8::1]:8765/api", f"url http://[{IP}]:8765/api"),
    # home-directory paths
    ("log at /home/alice/.paos/run.log.", f"log at {PATH}."),
    ("cd /root/.ssh", f"cd {PATH}"),
    ("/Users/bob/Library/Caches", PATH),
    ("see ~/notes/robot.md", f"see {PATH}"),
    ("see ~carol/cell.yaml", f"see {PATH}"),
    ("$HOME/.config/doraforge", PATH),
    (r"C:\Users\dave\AppData\x.json", PATH),
    # phone numbers
    ("call +33 6 12 34 56 78.", f"call {PHONE}."),
    ("+1-202-555-0143", PHONE),
    ("tel:+44 20 7946 0958", f"tel:{PHONE}"),
    ("office (202) 555-0143", f"office {PHONE}"),
    ("202.555.0143 or 202-555-0143", f"{PHONE} or {PHONE}"),
    ("portable 06 12 34 56 78", f"portable {PHONE}"),
    ("London 020 7946 0958", f"London {PHONE}"),
    ("Berlin 030 1234567", f"Berlin {PHONE}"),
    ("+49 (0)30 1234567", PHONE),
    # explicit coordinates
    ("tower at 48.8584, 2.2945", f"tower at {COORDINATES}"),
    ("tower at -33.8568, 151.2153.", f"tower at {COORDINATES}."),
    ("lat=48.8584, lon=2.2945", COORDINATES),
    ('{"latitude": 48.85, "longitude": 2.29}', f"{{{COORDINATES}}}"),
    ("48.8584° N, 2.2945° E", COORDINATES),
    ("48°51'30\"N 2°17'40\"E", COORDINATES),
    ("48°51\u203230\u2033N 2°17\u203240\u2033E", COORDINATES),
    ("goal x=0.42 y=-0.1 z=0.3 reached", f"goal {COORDINATES} reached"),
    ('pose {"x": 0.42, "y": -0.10, "yaw": 1.57}', f"pose {{{COORDINATES}}}"),
    ("target [0.42, -0.10, 0.30]", f"target {COORDINATES}"),
    ("quat (0.0, 0.0, 0.7071, 0.7071)", f"quat {COORDINATES}"),
]

#: Text that looks close to a category and must come out exactly as it went in.
NEAR_MISSES: list[str] = [
    "PhyAgentOS 1.1.1 and doraforge v2.0.3",
    "release 10.2.3-rc1",
    "on 2026-12-01 at 14:35:20",
    "finished 2026-12-01T14:35:20.123Z",
    "at 2026-12-01T14:35:20+01:00",
    "12/01/2026 and 01.12.2026",
    f"evidence sha256:{SHA256}",
    f"SHA-256: {SHA256}",
    f'{{"sha256": "{SHA256}"}}',
    f"commit {GIT_FULL}",
    "fixed in 88542c1 and 23c1df8a9b",
    "task 123e4567-e89b-12d3-a456-426614174000",
    "call arm.move_to then gripper.close",
    "skill pick.place.v2 installed",
    "3 of 5 criteria passed",
    "took 2.5 s (about 2500 ms)",
    "listening on :8765 in prose",
    "served on localhost",
    "limit 20,000 characters and 1,000 items",
    "token: 5",
    "max_tokens=5000 tokens: 320",
    "pass: 12, fail: 0",
    "Basic functionality and Bearer tokens.",
    "Bearer authentication. and ``Authorization: Bearer``;",
    "an approval id is not a secret: it only binds",
    "The token: PhyAgentOS never writes it",
    "headers with {{secret:NAME}} slots",
    "token=settings.token and token = runtime_token(state)",
    '{"no-token": "FORGE_TOOL_AUTH_REQUIRED"}',
    "Token = Annotated[str, Field(max_length=200)]",
    "loopback 127.0.0.1:8765, [::1]:9000 and bind 0.0.0.0 or ::",
    "ranges 10.0.0.0/8 and fe80::/10",
    "size and SHA-256:: digest",
    "session: arm-teleop",
    "the skill-learning-pipeline-example",
    "doraforge_registry_context_service_tool_definitions_for_mcp_clients",
    "/console/static/js/pages/api_tools.js",
    "/api/tools/calls/r-1 and /api/api-docs/catalog.json",
    "std::vector and add::bee",
    "MAC 00:1a:2b:3c:4d:5e at 12:30:45",
    "x=3 alone",
    "[1, 2, 3] and (1, 2)",
    "interval (0.5, 1.0)",
    "ratio 0.25, 0.75",
    "+1.5 s and +0.42",
    "order 1234567 of 12 items",
    "about ~5 s",
    "/home and /rootfs",
    "a ~ b",
    "e.g. README.md",
]


@pytest.mark.parametrize(("text", "expected"), POSITIVES)
def test_a_recognised_value_is_replaced_by_its_marker(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_a_near_miss_stays_exactly_as_it_was(text: str) -> None:
    assert redact(text) == text


def test_the_table_covers_every_marker_and_at_least_forty_strings() -> None:
    produced = {marker for _, expected in POSITIVES for marker in MARKERS if marker in expected}
    assert produced == set(MARKERS)
    assert len(POSITIVES) + len(NEAR_MISSES) >= 40


def test_the_running_users_home_is_redacted_wherever_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOME", "/srv/robot-ops")
    redaction._own_home.cache_clear()
    try:
        assert redact("cfg /srv/robot-ops/cell.yaml and /srv/robot-opsx") == (
            f"cfg {PATH} and /srv/robot-opsx"
        )
    finally:
        redaction._own_home.cache_clear()


def test_a_bounded_summary_is_redacted_then_cut_with_an_ellipsis() -> None:
    text = "mail bob@example.com " + "word " * 100
    bounded = redact_bounded(text, limit=40)
    assert len(bounded) <= 40
    assert bounded.startswith(f"mail {EMAIL} word")
    assert bounded.endswith(ELLIPSIS)
    assert "bob" not in bounded


def test_a_bounded_summary_that_fits_is_the_redacted_text() -> None:
    assert redact_bounded("ip 10.0.0.1") == f"ip {IP}"


@pytest.mark.parametrize("limit", range(1, 30))
def test_a_cut_never_splits_a_marker(limit: int) -> None:
    text = f"ab {'c' * 5} 48.8584, 2.2945 and 10.0.0.1 then more and more words"
    bounded = redact_bounded(text, limit)
    assert len(bounded) <= limit
    body = bounded.removesuffix(ELLIPSIS)
    opened, closed = body.count("["), body.count("]")
    assert opened == closed


def test_redacted_text_reformatted_afterwards_is_cut_without_splitting_a_marker() -> None:
    collapsed = " ".join(redact("pose:\n  x=0.42 y=-0.1\n  next").split())
    assert collapsed == f"pose: {COORDINATES} next"
    assert bounded(collapsed, 12) == f"pose:{ELLIPSIS}"
    assert bounded(collapsed, 19) == f"pose:{ELLIPSIS}"  # the marker would end at 19
    assert bounded(collapsed, 20) == f"pose: {COORDINATES}{ELLIPSIS}"


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        redact_bounded("x", 0)


def test_a_megabyte_of_adversarial_text_is_redacted_in_bounded_time() -> None:
    hostile = ("+1 " + "1" * 40 + "-" + "a" * 40 + ":" * 20 + "0." * 30) * 2_000
    started = time.perf_counter()
    redact(hostile)
    assert time.perf_counter() - started < 5.0


_FRAGMENTS = st.sampled_from(
    [text for text, _ in POSITIVES] + NEAR_MISSES + [*MARKERS, " ", ", ", "=", ":", "@", "/"]
)
_MIXED = st.lists(st.one_of(_FRAGMENTS, st.text(max_size=12)), max_size=8).map("".join)


@settings(max_examples=400, deadline=None)
@given(_MIXED)
def test_redaction_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


@settings(max_examples=200, deadline=None)
@given(_MIXED, st.integers(min_value=1, max_value=400))
def test_a_bounded_summary_never_exceeds_its_limit(text: str, limit: int) -> None:
    assert len(redact_bounded(text, limit)) <= limit
