"""Downloads enter the digest-keyed cache only when size and SHA-256 match."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.skill_runtime.download import DownloadCache, fetch_with_retry, terminal_progress
from doraforge.skill_runtime.errors import InstallError
from tests.skill_runtime.loopback import Fault, Loopback, serve

BODY = bytes(range(256)) * 1024  # 256 KiB, several chunks
DIGEST = hashlib.sha256(BODY).hexdigest()


@pytest.fixture
def server() -> Iterator[Loopback]:
    with serve() as running:
        running.routes["/bundle.tar.gz"] = BODY
        yield running


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0) as http:
        yield http


def cache_for(tmp_path: Path, client: httpx.Client, **options: Any) -> DownloadCache:
    return DownloadCache(tmp_path / "cache", client=client, **options)


def cache_files(tmp_path: Path) -> list[str]:
    directory = tmp_path / "cache"
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_download_is_cached_under_its_digest(
    tmp_path: Path, server: Loopback, client: httpx.Client
) -> None:
    seen: list[tuple[int, int]] = []
    cache = cache_for(tmp_path, client, progress=lambda done, total: seen.append((done, total)))
    got = cache.download(server.url("/bundle.tar.gz"), sha256=DIGEST, size=len(BODY))
    assert got.path == tmp_path / "cache" / DIGEST
    assert got.path.read_bytes() == BODY
    assert cache_files(tmp_path) == [DIGEST]
    assert seen[-1] == (len(BODY), len(BODY))


def test_digest_mismatch_is_refused_and_nothing_is_cached(
    tmp_path: Path, server: Loopback, client: httpx.Client
) -> None:
    wrong = hashlib.sha256(b"other").hexdigest()
    with pytest.raises(InstallError) as caught:
        cache_for(tmp_path, client).download(
            server.url("/bundle.tar.gz"), sha256=wrong, size=len(BODY)
        )
    assert caught.value.code == "SKILL_DOWNLOAD_DIGEST_MISMATCH"
    assert cache_files(tmp_path) == []


def test_declared_length_other_than_expected_is_refused(
    tmp_path: Path, server: Loopback, client: httpx.Client
) -> None:
    with pytest.raises(InstallError) as caught:
        cache_for(tmp_path, client).download(
            server.url("/bundle.tar.gz"), sha256=DIGEST, size=len(BODY) - 1
        )
    assert caught.value.code == "SKILL_DOWNLOAD_SIZE_MISMATCH"
    assert cache_files(tmp_path) == []


def test_body_longer_than_expected_is_cut_off(
    tmp_path: Path, server: Loopback, client: httpx.Client
) -> None:
    server.faults["/bundle.tar.gz"] = Fault(no_length=True)
    with pytest.raises(InstallError) as caught:
        cache_for(tmp_path, client).download(
            server.url("/bundle.tar.gz"), sha256=DIGEST, size=len(BODY) // 2
        )
    assert caught.value.code == "SKILL_DOWNLOAD_SIZE_MISMATCH"
    assert cache_files(tmp_path) == []


def test_expected_size_over_the_cap_is_refused_before_any_request(
    tmp_path: Path, server: Loopback, client: httpx.Client
) -> None:
    cache = cache_for(tmp_path, client, max_bytes=1000)
    with pytest.raises(InstallError) as caught:
        cache.download(server.url("/bundle.tar.gz"), sha256=DIGEST, size=len(BODY))
    assert caught.value.code == "SKILL_DOWNLOAD_TOO_LARGE"
    assert server.requests == []


def test_declared_length_over_the_cap_is_refused(
    tmp_path: Path, server: Loopback, client: httpx.Client
) -> None:
    server.faults["/bundle.tar.gz"] = Fault(content_length=10**9)
    cache = cache_for(tmp_path, client, max_bytes=len(BODY))
    with pytest.raises(InstallError) as caught:
        cache.download(server.url("/bundle.tar.gz"), sha256=DIGEST, size=len(BODY))
    assert caught.value.code == "SKILL_DOWNLOAD_TOO_LARGE"
    assert cache_files(tmp_path) == []


def test_interrupted_download_resumes_with_a_range_request(
    tmp_path: Path, server: Loopback, client: httpx.Client
) -> None:
    half = len(BODY) // 2
    server.faults["/bundle.tar.gz"] = Fault(cut_after=half)
    cache = cache_for(tmp_path, client)
    with pytest.raises(InstallError) as caught:
        cache.download(server.url("/bundle.tar.gz"), sha256=DIGEST, size=len(BODY))
    assert caught.value.code == "SKILL_DOWNLOAD_INTERRUPTED"
    assert caught.value.retryable
    assert (tmp_path / "cache" / f"{DIGEST}.part").stat().st_size == half

    got = cache.download(server.url("/bundle.tar.gz"), sha256=DIGEST, size=len(BODY))
    assert got.path.read_bytes() == BODY
    assert server.gets("/bundle.tar.gz") == [None, f"bytes={half}-"]
    assert cache_files(tmp_path) == [DIGEST]


def test_retry_helper_resumes_transparently(
    tmp_path: Path, server: Loopback, client: httpx.Client
) -> None:
    server.faults["/bundle.tar.gz"] = Fault(cut_after=1000)
    got = fetch_with_retry(
        cache_for(tmp_path, client), server.url("/bundle.tar.gz"), sha256=DIGEST, size=len(BODY)
    )
    assert got.path.read_bytes() == BODY
    assert server.gets("/bundle.tar.gz") == [None, "bytes=1000-"]


@pytest.mark.parametrize("fault", [Fault(ignore_range=True), Fault(wrong_range=True)])
def test_range_not_honoured_restarts_from_zero(
    tmp_path: Path, server: Loopback, client: httpx.Client, fault: Fault
) -> None:
    server.faults["/bundle.tar.gz"] = fault
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    # A partial whose bytes are wrong: appending to it would fail the digest.
    (cache_dir / f"{DIGEST}.part").write_bytes(b"\xff" * 5000)
    got = cache_for(tmp_path, client).download(
        server.url("/bundle.tar.gz"), sha256=DIGEST, size=len(BODY)
    )
    assert got.path.read_bytes() == BODY
    assert cache_files(tmp_path) == [DIGEST]


def test_cache_hit_is_rehashed_and_a_corrupt_entry_replaced(
    tmp_path: Path, server: Loopback, client: httpx.Client
) -> None:
    cache = cache_for(tmp_path, client)
    url = server.url("/bundle.tar.gz")
    cache.download(url, sha256=DIGEST, size=len(BODY))
    cache.download(url, sha256=DIGEST, size=len(BODY))
    assert len(server.gets("/bundle.tar.gz")) == 1  # the hit needed no request

    (tmp_path / "cache" / DIGEST).write_bytes(b"rotten")
    got = cache.download(url, sha256=DIGEST, size=len(BODY))
    assert got.path.read_bytes() == BODY
    assert len(server.gets("/bundle.tar.gz")) == 2


def test_digest_that_is_not_hex_never_names_a_file(
    tmp_path: Path, server: Loopback, client: httpx.Client
) -> None:
    with pytest.raises(InstallError) as caught:
        cache_for(tmp_path, client).download(
            server.url("/bundle.tar.gz"), sha256="../../etc/passwd", size=len(BODY)
        )
    assert caught.value.code == "SKILL_DOWNLOAD_BAD_DIGEST"


def test_http_error_status_is_reported(
    tmp_path: Path, server: Loopback, client: httpx.Client
) -> None:
    with pytest.raises(InstallError) as caught:
        cache_for(tmp_path, client).download(
            server.url("/missing.tar.gz"), sha256=DIGEST, size=len(BODY)
        )
    assert caught.value.code == "SKILL_DOWNLOAD_FAILED"
    assert caught.value.details["status_code"] == 404


def test_local_file_and_file_url_are_copied_in_with_a_computed_digest(
    tmp_path: Path, client: httpx.Client
) -> None:
    source = tmp_path / "bundle.tar.gz"
    source.write_bytes(BODY)
    cache = cache_for(tmp_path, client)
    assert cache.fetch(str(source), sha256=None, size=None).sha256 == DIGEST
    assert cache.fetch(source.as_uri(), sha256=DIGEST, size=len(BODY)).path.read_bytes() == BODY
    assert cache_files(tmp_path) == [DIGEST]


def test_local_file_with_the_wrong_digest_is_refused(tmp_path: Path, client: httpx.Client) -> None:
    source = tmp_path / "bundle.tar.gz"
    source.write_bytes(BODY)
    with pytest.raises(InstallError) as caught:
        cache_for(tmp_path, client).fetch(
            str(source), sha256=hashlib.sha256(b"x").hexdigest(), size=None
        )
    assert caught.value.code == "SKILL_DOWNLOAD_DIGEST_MISMATCH"
    assert cache_files(tmp_path) == []


def test_local_file_over_the_cap_is_refused(tmp_path: Path, client: httpx.Client) -> None:
    source = tmp_path / "bundle.tar.gz"
    source.write_bytes(BODY)
    with pytest.raises(InstallError) as caught:
        cache_for(tmp_path, client, max_bytes=100).fetch(str(source), sha256=None, size=None)
    assert caught.value.code == "SKILL_DOWNLOAD_TOO_LARGE"


def test_http_source_without_size_and_digest_is_refused(
    tmp_path: Path, server: Loopback, client: httpx.Client
) -> None:
    with pytest.raises(InstallError) as caught:
        cache_for(tmp_path, client).fetch(server.url("/bundle.tar.gz"), sha256=DIGEST, size=None)
    assert caught.value.code == "SKILL_DOWNLOAD_FAILED"
    assert server.requests == []


def test_plain_progress_prints_a_line_per_tenth(tmp_path: Path) -> None:
    stream = io.StringIO()
    with terminal_progress(stream, label="bundle", interactive=False) as report:
        for done in range(0, 1001, 50):
            report(done, 1000)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "bundle: 0/1000 bytes"
    assert lines[-1] == "bundle: 1000/1000 bytes"
    assert len(lines) == 11


def test_interactive_progress_draws_a_rich_bar(tmp_path: Path) -> None:
    stream = io.StringIO()
    with terminal_progress(stream, label="bundle", interactive=True) as report:
        report(500, 1000)
        report(1000, 1000)
    assert "bundle" in stream.getvalue()
