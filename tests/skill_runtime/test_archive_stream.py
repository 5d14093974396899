"""The archive's gzip reader decompresses in a worker thread: the bytes, their order and
the errors a reader sees are those of a plain ``gzip`` read, and no worker outlives it."""

from __future__ import annotations

import gzip
import io
import os
import threading

import pytest

from doraforge.skill_runtime.archive_stream import ThreadedGunzip

DATA = os.urandom(300_000) + bytes(700_000) + b"tail"


def _workers() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "gunzip"]


def _read_all(reader: ThreadedGunzip, sizes: list[int]) -> bytes:
    pieces = []
    index = 0
    while piece := reader.read(size := sizes[index % len(sizes)]):
        assert size < 0 or len(piece) <= size
        pieces.append(piece)
        index += 1
    return b"".join(pieces)


@pytest.mark.parametrize("sizes", [[512], [65536], [1, 4096, 1 << 20], [-1]])
def test_reads_of_any_size_return_the_stream_in_order(sizes: list[int]) -> None:
    raw = io.BytesIO(gzip.compress(DATA))
    with ThreadedGunzip(raw, chunk=64 * 1024, depth=2) as reader:
        assert _read_all(reader, sizes) == DATA
        assert reader.read(10) == b""
    assert not _workers()


def test_concatenated_gzip_members_read_as_one_stream() -> None:
    raw = io.BytesIO(gzip.compress(b"first ") + gzip.compress(b"second"))
    with ThreadedGunzip(raw) as reader:
        assert _read_all(reader, [4]) == b"first second"


def test_a_truncated_stream_raises_after_every_good_byte_before_it() -> None:
    packed = gzip.compress(os.urandom(200_000))
    raw = io.BytesIO(packed[: len(packed) // 2])
    got = bytearray()

    def drain(reader: ThreadedGunzip) -> None:
        while piece := reader.read(1000):
            got.extend(piece)

    with ThreadedGunzip(raw, chunk=4096) as reader, pytest.raises(EOFError):
        drain(reader)
    assert 0 < len(got) < 200_000
    assert not _workers()


def test_not_a_gzip_stream_raises_on_the_first_read() -> None:
    with (
        ThreadedGunzip(io.BytesIO(b"plain text, not gzip")) as reader,
        pytest.raises(gzip.BadGzipFile),
    ):
        reader.read(10)


def test_closing_early_stops_the_worker_before_it_reads_the_whole_file() -> None:
    """A reader that stops (a refused member) leaves the worker no more than its bounded
    queue ahead: the rest of a large file is never decompressed, and the thread ends."""
    raw = io.BytesIO(gzip.compress(os.urandom(4 << 20), compresslevel=1))
    with ThreadedGunzip(raw, chunk=64 * 1024, depth=2) as reader:
        assert len(reader.read(100)) == 100
    assert not _workers()
    assert raw.tell() < len(raw.getvalue())
