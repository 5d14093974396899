"""Bundle archives: deterministic packing, round trips, and a table of evil archives.

Every evil archive is built here with ``tarfile``; each must be refused with its own
code and leave the destination absent.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import threading
import unicodedata
from collections.abc import Callable
from pathlib import Path

import pytest

from doraforge.skill_runtime.archive import (
    ARCHIVE_MANIFEST_NAME,
    PAOS_MANIFEST_NAME,
    ArchiveLimits,
    ArchiveManifest,
    extract,
    extract_artifact,
    pack,
    verify_tree,
)
from doraforge.skill_runtime.errors import ArchiveError, ManifestError

SKILL_YAML = """\
manifest_version: 2
name: demo
version: 1.0.0
description: a demo skill
gateway_url: http://127.0.0.1:9201
required_tools: [arm.home]
profiles:
  sim:
    dataflow: dataflow.yml
    startup_timeout_s: 30
"""

type Member = tuple[tarfile.TarInfo, bytes | None]


def _bundle(root: Path) -> Path:
    root.mkdir()
    (root / "skill.yaml").write_text(SKILL_YAML)
    (root / "SKILL.md").write_text("# Demo\n")
    (root / "dataflow.yml").write_text("nodes: []\n")
    (root / "bin").mkdir()
    (root / "bin" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "bin" / "run.sh").chmod(0o755)
    (root / "empty").mkdir()
    (root / "data").mkdir()
    (root / "data" / "blob.bin").write_bytes(bytes(range(256)) * 40)
    return root


def _file(name: str, data: bytes = b"x", *, size: int | None = None, mode: int = 0o644) -> Member:
    info = tarfile.TarInfo(name)
    info.size = len(data) if size is None else size
    info.mode = mode
    return info, data


def _special(name: str, kind: bytes, linkname: str = "") -> Member:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, None


def _inventory(*files: tuple[str, bytes]) -> Member:
    entries = [
        {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for path, data in files
    ]
    return _file(ARCHIVE_MANIFEST_NAME, json.dumps({"format": 1, "files": entries}).encode())


def _write(path: Path, members: list[Member]) -> Path:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, None if data is None else io.BytesIO(data))
    path.write_bytes(gzip.compress(raw.getvalue(), mtime=0))
    return path


def _listed(*files: tuple[str, bytes]) -> list[Member]:
    """A well-formed archive of ``files`` (inventory first), to be spoiled by a case."""
    return [_inventory(*files), *(_file(path, data) for path, data in files)]


class _Zeros:
    def __init__(self, size: int) -> None:
        self.left = size

    def read(self, size: int = -1) -> bytes:
        size = self.left if size < 0 else min(size, self.left)
        self.left -= size
        return bytes(size)


def _bomb(path: Path) -> Path:
    """50 MB of zeros, listed honestly in the inventory: only the ratio can stop it."""
    size = 50 * 1024 * 1024
    entry = {"path": "zeros.bin", "size": size, "sha256": hashlib.sha256(bytes(size)).hexdigest()}
    inventory, _ = _file(ARCHIVE_MANIFEST_NAME, b"")
    document = json.dumps({"format": 1, "files": [entry]}).encode()
    inventory.size = len(document)
    info = tarfile.TarInfo("zeros.bin")
    info.size = size
    with (
        gzip.open(path, "wb", compresslevel=9) as compressed,
        tarfile.open(fileobj=compressed, mode="w|") as tar,
    ):
        tar.addfile(inventory, io.BytesIO(document))
        tar.addfile(info, _Zeros(size))
    return path


NFC = unicodedata.normalize("NFC", "café.txt")
NFD = unicodedata.normalize("NFD", "café.txt")
GOOD = ("good.txt", b"good")
CONTROL = "ARCHIVE_PATH_CONTROL_CHARACTER"


def _device(name: str, kind: bytes) -> list[Member]:
    info, _ = _special(name, kind)
    info.devmajor, info.devminor = 1, 3
    return [_inventory(), (info, None)]


EVIL: dict[str, tuple[Callable[[], list[Member]], str, dict[str, int]]] = {
    "absolute path": (lambda: [_inventory(), _file("/tmp/evil")], "ARCHIVE_PATH_ABSOLUTE", {}),
    "dot-dot": (lambda: [_inventory(), _file("../evil")], "ARCHIVE_PATH_TRAVERSAL", {}),
    "traversal inside a path": (
        lambda: [_inventory(), _file("a/../../x")],
        "ARCHIVE_PATH_TRAVERSAL",
        {},
    ),
    "backslash": (lambda: [_inventory(), _file("a\\..\\evil")], "ARCHIVE_PATH_BACKSLASH", {}),
    "NUL in a pax path": (lambda: [_inventory(), _nul_member()], "ARCHIVE_PATH_NUL", {}),
    "drive letter": (lambda: [_inventory(), _file("C:/evil")], "ARCHIVE_PATH_DRIVE", {}),
    "relative drive letter": (lambda: [_inventory(), _file("c:evil")], "ARCHIVE_PATH_DRIVE", {}),
    "empty name": (lambda: [_inventory(), _file("")], "ARCHIVE_PATH_EMPTY", {}),
    "control character": (lambda: [_inventory(), _file("a\nb")], CONTROL, {}),
    "C1 control (CSI) in a name": (lambda: [_inventory(), _file("evil\x9b31m.txt")], CONTROL, {}),
    "DEL in a name": (lambda: [_inventory(), _file("evil\x7f.txt")], CONTROL, {}),
    "right-to-left override": (lambda: [_inventory(), _file("evil\u202etxt.sh")], CONTROL, {}),
    "zero-width space": (lambda: [*_listed(GOOD), _file("good\u200b.txt")], CONTROL, {}),
    "byte order mark": (lambda: [_inventory(), _file("\ufeffSKILL.md")], CONTROL, {}),
    "line separator (Zl)": (lambda: [_inventory(), _file("a\u2028b")], CONTROL, {}),
    "paragraph separator (Zp)": (lambda: [_inventory(), _file("a\u2029b")], CONTROL, {}),
    "format character in a parent": (
        lambda: [_inventory(), _file("bin\u200e/run.sh")],
        CONTROL,
        {},
    ),
    "format character in a directory member": (
        lambda: [_inventory(), _special("dir\u2066", tarfile.DIRTYPE)],
        CONTROL,
        {},
    ),
    "right-to-left override in a pax path": (
        lambda: [_inventory(), _pax_named("innocent", "evil\u202egnp.exe")],
        CONTROL,
        {},
    ),
    "inventory listing a right-to-left override": (
        lambda: [_inventory(("evil\u202etxt.sh", b"x"))],
        "ARCHIVE_MANIFEST_INVALID",
        {},
    ),
    "duplicate member": (
        lambda: [*_listed(GOOD), _file("good.txt", b"evil")],
        "ARCHIVE_DUPLICATE_MEMBER",
        {},
    ),
    "NFC collision": (
        lambda: [_inventory((NFC, b"1"), (NFD, b"2")), _file(NFC, b"1"), _file(NFD, b"2")],
        "ARCHIVE_NORMALIZATION_COLLISION",
        {},
    ),
    "case collision": (
        lambda: [*_listed(("README.md", b"1"), ("readme.md", b"2"))],
        "ARCHIVE_CASE_COLLISION",
        {},
    ),
    "case collision of a parent": (
        lambda: [*_listed(("Dir/a", b"1"), ("dir/b", b"2"))],
        "ARCHIVE_CASE_COLLISION",
        {},
    ),
    "symlink": (
        lambda: [_inventory(), _special("link", tarfile.SYMTYPE, "/etc")],
        "ARCHIVE_SYMLINK",
        {},
    ),
    "file through an outside symlink": (
        lambda: [
            _inventory(("link/evil", b"x")),
            _special("link", tarfile.SYMTYPE, "/tmp"),
            _file("link/evil"),
        ],
        "ARCHIVE_SYMLINK",
        {},
    ),
    "hardlink": (
        lambda: [_inventory(), _special("passwd", tarfile.LNKTYPE, "/etc/passwd")],
        "ARCHIVE_HARDLINK",
        {},
    ),
    "char device": (lambda: _device("null", tarfile.CHRTYPE), "ARCHIVE_SPECIAL_MEMBER", {}),
    "block device": (lambda: _device("sda", tarfile.BLKTYPE), "ARCHIVE_SPECIAL_MEMBER", {}),
    "fifo": (
        lambda: [_inventory(), _special("pipe", tarfile.FIFOTYPE)],
        "ARCHIVE_SPECIAL_MEMBER",
        {},
    ),
    "file inside a file": (
        lambda: [*_listed(("a", b"1")), _file("a/b")],
        "ARCHIVE_PATH_CONFLICT",
        {},
    ),
    "too many members": (
        lambda: _listed(*((f"f{i}", b"") for i in range(10))),
        "ARCHIVE_TOO_MANY_MEMBERS",
        {"max_members": 5},
    ),
    "member too big": (
        lambda: _listed(("big", b"b" * 200)),
        "ARCHIVE_MEMBER_TOO_LARGE",
        {"max_member_bytes": 100},
    ),
    "total too big": (
        lambda: _listed(("one", b"1" * 100), ("two", b"2" * 100)),
        "ARCHIVE_TOTAL_TOO_LARGE",
        {"max_total_bytes": 150},
    ),
    "missing archive manifest": (
        lambda: [_file("good.txt", b"good")],
        "ARCHIVE_MANIFEST_MISSING",
        {},
    ),
    "malformed archive manifest": (
        lambda: [_file(ARCHIVE_MANIFEST_NAME, b"{not json"), _file("good.txt")],
        "ARCHIVE_MANIFEST_INVALID",
        {},
    ),
    "archive manifest repeating a top-level key": (
        lambda: [
            _manifest_text(f'{{"files": {_entries(GOOD)}, "format": 1, "files": []}}'),
            _file(*GOOD),
        ],
        "ARCHIVE_MANIFEST_DUPLICATE_KEY",
        {},
    ),
    "archive manifest repeating a key inside an entry": (
        lambda: [_manifest_text(_entry_hashed_twice(*GOOD)), _file(*GOOD)],
        "ARCHIVE_MANIFEST_DUPLICATE_KEY",
        {},
    ),
    "archive manifest with unknown keys": (
        lambda: [_file(ARCHIVE_MANIFEST_NAME, b'{"format": 1, "files": [], "x": 1}')],
        "ARCHIVE_MANIFEST_INVALID",
        {},
    ),
    "hash mismatch": (
        lambda: [_inventory(("good.txt", b"good")), _file("good.txt", b"evil")],
        "ARCHIVE_HASH_MISMATCH",
        {},
    ),
    "hash mismatch, inventory last": (
        lambda: [_file("good.txt", b"evil"), _inventory(("good.txt", b"good"))],
        "ARCHIVE_HASH_MISMATCH",
        {},
    ),
    "extra file": (
        lambda: [*_listed(GOOD), _file("extra.txt")],
        "ARCHIVE_FILE_UNLISTED",
        {},
    ),
    "missing file": (
        lambda: [_inventory(GOOD, ("gone.txt", b"x")), _file(*GOOD)],
        "ARCHIVE_FILE_MISSING",
        {},
    ),
    "size mismatch": (
        lambda: [_inventory(("good.txt", b"good")), _file("good.txt", b"good!")],
        "ARCHIVE_SIZE_MISMATCH",
        {},
    ),
    # PhyAgentOS's forms: `.paos-manifest.json`, `files` as a {path: sha256} mapping.
    "both inventory names": (
        lambda: [_inventory(GOOD), _paos_inventory(GOOD), _file(*GOOD)],
        "ARCHIVE_MANIFEST_AMBIGUOUS",
        {},
    ),
    "both inventory names, contradicting": (
        lambda: [_paos_inventory(("good.txt", b"evil")), _inventory(GOOD), _file(*GOOD)],
        "ARCHIVE_MANIFEST_AMBIGUOUS",
        {},
    ),
    "the PhyAgentOS inventory twice": (
        lambda: [_paos_inventory(GOOD), _paos_inventory(("good.txt", b"evil")), _file(*GOOD)],
        "ARCHIVE_DUPLICATE_MEMBER",
        {},
    ),
    "mapping with a short digest": (
        lambda: [_mapping({"good.txt": "ab" * 31}), _file(*GOOD)],
        "ARCHIVE_MANIFEST_INVALID",
        {},
    ),
    "mapping with an upper-case digest": (
        lambda: [_mapping({"good.txt": hashlib.sha256(b"good").hexdigest().upper()}), _file(*GOOD)],
        "ARCHIVE_MANIFEST_INVALID",
        {},
    ),
    "mapping with a non-hex digest": (
        lambda: [_mapping({"good.txt": "g" * 64}), _file(*GOOD)],
        "ARCHIVE_MANIFEST_INVALID",
        {},
    ),
    "mapping with a number for a digest": (
        lambda: [_mapping({"good.txt": 12}), _file(*GOOD)],
        "ARCHIVE_MANIFEST_INVALID",
        {},
    ),
    "mapping with an object for a digest": (
        lambda: [_mapping({"good.txt": {"sha256": _sha(b"good")}}), _file(*GOOD)],
        "ARCHIVE_MANIFEST_INVALID",
        {},
    ),
    "mapping with a traversing path": (
        lambda: [_mapping({"../good.txt": _sha(b"good")})],
        "ARCHIVE_MANIFEST_INVALID",
        {},
    ),
    "mapping listing an inventory": (
        lambda: [_mapping({ARCHIVE_MANIFEST_NAME: _sha(b"x")})],
        "ARCHIVE_MANIFEST_INVALID",
        {},
    ),
    "mapping listing an inventory in another case": (
        lambda: [_mapping({"Archive-Manifest.JSON": _sha(b"x")}), _file("Archive-Manifest.JSON")],
        "ARCHIVE_MANIFEST_INVALID",
        {},
    ),
    "mapping repeating a path": (
        lambda: [_paos_text(f'{{"files": {{"a": "{_sha(b"1")}", "a": "{_sha(b"2")}"}}}}')],
        "ARCHIVE_MANIFEST_DUPLICATE_KEY",
        {},
    ),
    "mapping hash mismatch": (
        lambda: [_paos_inventory(GOOD), _file("good.txt", b"evil")],
        "ARCHIVE_HASH_MISMATCH",
        {},
    ),
    "mapping hash mismatch, inventory last": (
        lambda: [_file("good.txt", b"evil"), _paos_inventory(GOOD)],
        "ARCHIVE_HASH_MISMATCH",
        {},
    ),
    "mapping missing file": (
        lambda: [_paos_inventory(GOOD, ("gone.txt", b"x")), _file(*GOOD)],
        "ARCHIVE_FILE_MISSING",
        {},
    ),
    "mapping extra file": (
        lambda: [_paos_inventory(GOOD), _file(*GOOD), _file("extra.txt")],
        "ARCHIVE_FILE_UNLISTED",
        {},
    ),
    "mapping with unknown keys": (
        lambda: [
            _paos_text(f'{{"files": {{"good.txt": "{_sha(b"good")}"}}, "x": 1}}'),
            _file(*GOOD),
        ],
        "ARCHIVE_MANIFEST_INVALID",
        {},
    ),
    "list entry without a size, hash mismatch": (
        lambda: [
            _paos_text(json.dumps({"files": [{"path": "good.txt", "sha256": _sha(b"good")}]})),
            _file("good.txt", b"evil"),
        ],
        "ARCHIVE_HASH_MISMATCH",
        {},
    ),
}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _paos_text(text: str) -> Member:
    """A `.paos-manifest.json` member with exactly this JSON text."""
    return _file(PAOS_MANIFEST_NAME, text.encode())


def _mapping(files: dict[str, object]) -> Member:
    """A `.paos-manifest.json` whose `files` is this mapping."""
    return _paos_text(json.dumps({"files": files}))


def _paos_inventory(*files: tuple[str, bytes]) -> Member:
    """A PhyAgentOS-shaped inventory: `.paos-manifest.json`, `{path: sha256}`."""
    return _mapping({path: _sha(data) for path, data in files})


def _nul_member() -> Member:
    return _pax_named("innocent", "evil\x00.txt")


def _pax_named(name: str, pax_path: str) -> Member:
    """A file whose pax ``path`` record overrides its plain header name."""
    info, data = _file(name)
    info.pax_headers = {"path": pax_path}
    return info, data


def _entries(*files: tuple[str, bytes]) -> str:
    """The JSON text of inventory entries for ``files``."""
    return json.dumps(
        [{"path": p, "size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for p, d in files]
    )


def _entry_hashed_twice(path: str, data: bytes) -> str:
    """An inventory whose one entry names a wrong SHA-256, then (last wins) the right one."""
    wrong, right = "0" * 64, hashlib.sha256(data).hexdigest()
    entry = f'"path": "{path}", "size": {len(data)}, "sha256": "{wrong}", "sha256": "{right}"'
    return f'{{"format": 1, "files": [{{{entry}}}]}}'


def _manifest_text(text: str) -> Member:
    """An inventory member with exactly this JSON text (e.g. one that repeats a key)."""
    return _file(ARCHIVE_MANIFEST_NAME, text.encode())


@pytest.mark.parametrize("case", sorted(EVIL))
def test_evil_archive_is_refused_with_its_code_and_leaves_nothing(
    tmp_path: Path, case: str
) -> None:
    build, code, limits = EVIL[case]
    archive = _write(tmp_path / "evil.tar.gz", build())
    destination = tmp_path / "out"
    with pytest.raises(ArchiveError) as caught:
        extract(archive, destination, ArchiveLimits(**limits))
    assert caught.value.code == code
    assert not destination.exists()


def test_gzip_bomb_is_stopped_by_the_ratio_cap(tmp_path: Path) -> None:
    archive = _bomb(tmp_path / "bomb.tar.gz")
    destination = tmp_path / "out"
    with pytest.raises(ArchiveError) as caught:
        extract(archive, destination)
    assert caught.value.code == "ARCHIVE_RATIO_EXCEEDED"
    assert not destination.exists()


@pytest.mark.parametrize(
    ("content", "code"),
    [(b"not a gzip at all", "ARCHIVE_CORRUPT"), (b"truncated", "ARCHIVE_CORRUPT")],
)
def test_corrupt_archive_is_refused(tmp_path: Path, content: bytes, code: str) -> None:
    archive = tmp_path / "bad.tar.gz"
    if content == b"truncated":
        good = _write(tmp_path / "good.tar.gz", _listed(("blob", os.urandom(50_000))))
        content = good.read_bytes()[:20_000]
    archive.write_bytes(content)
    with pytest.raises(ArchiveError) as caught:
        extract(archive, tmp_path / "out")
    assert caught.value.code == code
    assert not (tmp_path / "out").exists()


def _gunzip_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "gunzip"]


def test_no_decompression_thread_outlives_a_refused_archive(tmp_path: Path) -> None:
    """Refused at its first member or stopped by the ratio cap mid-stream, the extract
    returns with its decompression worker ended, not left reading the rest."""
    bomb = _bomb(tmp_path / "bomb.tar.gz")
    evil = _write(tmp_path / "evil.tar.gz", [_inventory(), _file("../escape")])
    for archive, code in ((bomb, "ARCHIVE_RATIO_EXCEEDED"), (evil, "ARCHIVE_PATH_TRAVERSAL")):
        with pytest.raises(ArchiveError) as caught:
            extract(archive, tmp_path / "out")
        assert caught.value.code == code
        assert not _gunzip_threads()


def test_a_bundle_with_large_and_many_small_members_round_trips(tmp_path: Path) -> None:
    """Members of many sizes cross the reader's buffer and chunk edges: every byte of
    every file arrives, hashed and listed, with no worker left behind."""
    source = _bundle(tmp_path / "demo")
    sizes = [0, 1, 511, 512, 513, 65535, 65536, 65537, 262144 + 7, 3 * 1024 * 1024 + 1]
    for index, size in enumerate(sizes):
        (source / "data" / f"f{index}.bin").write_bytes(os.urandom(size))
    packed = pack(source, tmp_path / "demo.tar.gz")
    inventory = extract(packed.path, tmp_path / "out")
    assert inventory.files == packed.files
    for index, size in enumerate(sizes):
        data = (tmp_path / "out" / "data" / f"f{index}.bin").read_bytes()
        assert data == (source / "data" / f"f{index}.bin").read_bytes()
        assert len(data) == size
    assert not _gunzip_threads()


def test_pack_twice_and_from_a_touched_copy_is_byte_identical(tmp_path: Path) -> None:
    source = _bundle(tmp_path / "demo")
    first = pack(source, tmp_path / "one.tar.gz")
    second = pack(source, tmp_path / "two.tar.gz")
    copy = tmp_path / "copy"
    shutil.copytree(source, copy)
    for path in [copy, *copy.rglob("*")]:
        os.utime(path, (1_000_000, 1_234_567))
        if path.is_file() and not os.access(path, os.X_OK):
            path.chmod(0o664)
    third = pack(copy, tmp_path / "three.tar.gz")
    data = first.path.read_bytes()
    assert data == second.path.read_bytes() == third.path.read_bytes()
    assert first.sha256 == hashlib.sha256(data).hexdigest() == third.sha256
    assert first.size == len(data)


def test_packed_archive_has_inventory_first_and_normalised_headers(tmp_path: Path) -> None:
    result = pack(_bundle(tmp_path / "demo"), tmp_path / "demo.tar.gz")
    assert result.path.read_bytes()[3] & 0x08 == 0  # gzip FNAME flag: no file name stored
    with tarfile.open(result.path, "r:gz") as tar:
        members = tar.getmembers()
    assert members[0].name == ARCHIVE_MANIFEST_NAME
    names = [member.name for member in members[1:]]
    assert names == sorted(names)
    assert {(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in members} == {
        (0, 0, "", "", 315532800)
    }
    modes = {member.name: member.mode for member in members}
    assert modes["bin/run.sh"] == 0o755
    assert modes["SKILL.md"] == 0o644
    assert modes["empty"] == 0o755
    assert [entry.path for entry in result.files] == sorted(
        ["SKILL.md", "bin/run.sh", "data/blob.bin", "dataflow.yml", "skill.yaml"]
    )


def test_round_trip_restores_files_modes_and_inventory(tmp_path: Path) -> None:
    source = _bundle(tmp_path / "demo")
    result = pack(source, tmp_path / "demo.tar.gz")
    destination = tmp_path / "installed"
    inventory = extract(result.path, destination)
    assert inventory.files == result.files
    for entry in inventory.files:
        assert (destination / entry.path).read_bytes() == (source / entry.path).read_bytes()
    assert os.access(destination / "bin" / "run.sh", os.X_OK)
    assert not os.access(destination / "SKILL.md", os.X_OK)
    assert (destination / "empty").is_dir()
    stored = ArchiveManifest.from_json((destination / ARCHIVE_MANIFEST_NAME).read_bytes(), "x")
    assert stored == inventory
    verify_tree(destination, inventory)


def test_pack_refuses_a_symlink_in_the_source(tmp_path: Path) -> None:
    source = _bundle(tmp_path / "demo")
    (source / "link").symlink_to("/etc/passwd")
    with pytest.raises(ArchiveError) as caught:
        pack(source, tmp_path / "demo.tar.gz")
    assert caught.value.code == "ARCHIVE_SOURCE_UNSUPPORTED"
    assert not (tmp_path / "demo.tar.gz").exists()


def test_pack_validates_the_manifest_first(tmp_path: Path) -> None:
    source = _bundle(tmp_path / "demo")
    (source / "skill.yaml").write_text(SKILL_YAML.replace("name: demo", "name: Demo!"))
    with pytest.raises(ManifestError) as caught:
        pack(source, tmp_path / "demo.tar.gz")
    assert caught.value.details["field"] == "name"


def test_pack_refuses_an_archive_that_install_would_refuse_for_its_ratio(tmp_path: Path) -> None:
    source = _bundle(tmp_path / "demo")
    (source / "zeros.bin").write_bytes(bytes(4 * 1024 * 1024))
    with pytest.raises(ArchiveError) as caught:
        pack(source, tmp_path / "demo.tar.gz", ArchiveLimits(max_ratio=50))
    assert caught.value.code == "ARCHIVE_RATIO_EXCEEDED"
    assert not (tmp_path / "demo.tar.gz").exists()


def test_extract_refuses_a_non_empty_destination_and_leaves_it_alone(tmp_path: Path) -> None:
    result = pack(_bundle(tmp_path / "demo"), tmp_path / "demo.tar.gz")
    destination = tmp_path / "out"
    destination.mkdir()
    (destination / "keep.txt").write_text("mine")
    with pytest.raises(ArchiveError) as caught:
        extract(result.path, destination)
    assert caught.value.code == "ARCHIVE_DESTINATION_NOT_EMPTY"
    assert [p.name for p in destination.iterdir()] == ["keep.txt"]


def test_failed_extract_into_an_empty_directory_leaves_it_empty(tmp_path: Path) -> None:
    archive = _write(tmp_path / "evil.tar.gz", [*_listed(GOOD), _file("extra.txt")])
    destination = tmp_path / "out"
    destination.mkdir()
    with pytest.raises(ArchiveError):
        extract(archive, destination)
    assert destination.is_dir()
    assert list(destination.iterdir()) == []


@pytest.mark.parametrize(
    ("tamper", "code"),
    [
        (lambda root: (root / "SKILL.md").write_text("# Changed\n"), "ARCHIVE_SIZE_MISMATCH"),
        (lambda root: (root / "SKILL.md").write_text("# Dexo\n"), "ARCHIVE_HASH_MISMATCH"),
        (lambda root: (root / "dataflow.yml").unlink(), "ARCHIVE_FILE_MISSING"),
        (lambda root: (root / "extra.py").write_text(""), "ARCHIVE_FILE_UNLISTED"),
        (lambda root: (root / "ln").symlink_to("SKILL.md"), "ARCHIVE_SYMLINK"),
    ],
)
def test_verify_tree_detects_tampering(
    tmp_path: Path, tamper: Callable[[Path], object], code: str
) -> None:
    result = pack(_bundle(tmp_path / "demo"), tmp_path / "demo.tar.gz")
    root = tmp_path / "installed"
    inventory = extract(result.path, root)
    tamper(root)
    with pytest.raises(ArchiveError) as caught:
        verify_tree(root, inventory)
    assert caught.value.code == code


def test_verify_tree_may_allow_extra_files(tmp_path: Path) -> None:
    result = pack(_bundle(tmp_path / "demo"), tmp_path / "demo.tar.gz")
    root = tmp_path / "installed"
    inventory = extract(result.path, root)
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "x.pyc").write_bytes(b"\0")
    verify_tree(root, inventory, allow_extra=True)


def test_extract_artifact_keeps_executables_and_tolerates_dot_prefix(tmp_path: Path) -> None:
    root, _ = _special(".", tarfile.DIRTYPE)
    members = [
        (root, None),
        _file("./bin/node", b"\x7fELF", mode=0o4755),
        _file("./share/data.txt", b"data"),
    ]
    archive = _write(tmp_path / "node.tar.gz", members)
    files = extract_artifact(archive, tmp_path / "node")
    assert files == ["bin/node", "share/data.txt"]
    node = tmp_path / "node" / "bin" / "node"
    assert node.stat().st_mode & 0o7777 == 0o755  # set-uid from the archive is dropped


@pytest.mark.parametrize(
    ("member", "code"),
    [
        (_special("bin/node", tarfile.SYMTYPE, "/bin/sh"), "ARCHIVE_SYMLINK"),
        (_file("../node"), "ARCHIVE_PATH_TRAVERSAL"),
    ],
)
def test_extract_artifact_applies_member_checks(tmp_path: Path, member: Member, code: str) -> None:
    archive = _write(tmp_path / "node.tar.gz", [_file("ok"), member])
    with pytest.raises(ArchiveError) as caught:
        extract_artifact(archive, tmp_path / "node")
    assert caught.value.code == code
    assert not (tmp_path / "node").exists()


def test_control_character_refusal_names_the_character_and_escapes_the_member(
    tmp_path: Path,
) -> None:
    archive = _write(tmp_path / "evil.tar.gz", [_inventory(), _file("evil\u202etxt.sh")])
    with pytest.raises(ArchiveError) as caught:
        extract(archive, tmp_path / "out")
    assert caught.value.details["character"] == "U+202E"
    assert caught.value.details["member"] == "evil\\u202etxt.sh"
    assert "\u202e" not in str(caught.value)


@pytest.mark.parametrize("name", ["run\u202etxt.sh", "SKILL\u200b.md", "notes\x9b.txt"])
def test_pack_refuses_a_source_file_whose_name_hides_characters(tmp_path: Path, name: str) -> None:
    source = _bundle(tmp_path / "demo")
    (source / name).write_text("#!/bin/sh\n")
    with pytest.raises(ArchiveError) as caught:
        pack(source, tmp_path / "demo.tar.gz")
    assert caught.value.code == CONTROL
    assert not (tmp_path / "demo.tar.gz").exists()


@pytest.mark.parametrize(
    "inventory",
    [
        pytest.param(lambda files: _paos_inventory(*files), id="paos name, mapping"),
        pytest.param(
            lambda files: _file(
                ARCHIVE_MANIFEST_NAME,
                json.dumps({"files": {p: _sha(d) for p, d in files}}).encode(),
            ),
            id="doraforge name, mapping",
        ),
        pytest.param(
            lambda files: _paos_text(
                json.dumps({"files": [{"path": p, "sha256": _sha(d)} for p, d in files]})
            ),
            id="paos name, list without sizes",
        ),
    ],
)
def test_phyagentos_shaped_archives_extract_with_a_canonical_inventory(
    tmp_path: Path, inventory: Callable[[list[tuple[str, bytes]]], Member]
) -> None:
    files = [("skill.yaml", SKILL_YAML.encode()), ("SKILL.md", b"# Demo\n"), ("bin/run", b"x")]
    archive = _write(tmp_path / "paos.tar.gz", [inventory(files), *(_file(p, d) for p, d in files)])
    destination = tmp_path / "out"

    result = extract(archive, destination)

    assert {(e.path, e.size, e.sha256) for e in result.files} == {
        (p, len(d), _sha(d)) for p, d in files
    }
    assert not (destination / PAOS_MANIFEST_NAME).exists()
    stored = ArchiveManifest.from_json((destination / ARCHIVE_MANIFEST_NAME).read_bytes(), "x")
    assert stored == result
    verify_tree(destination, result)
