"""Installing, listing, inspecting and removing skill bundles in a PAOS home.

An install never leaves a skill half-installed. The bundle is resolved, downloaded into the
digest-keyed cache, extracted and verified into ``skills/.staging-<uuid>`` (same
filesystem, so renames are atomic), its manifest is validated there and its node artifacts
are installed; only then, if the skill is neither running nor bound to an active AgentTask
and the operator confirmed, the swap happens::

    previous -> .trash-<uuid>     (the older backup, kept until the swap commits)
    current  -> previous
    staging  -> current           (the commit point)

Any failure during the swap restores all three. A crash between the first rename and the
commit leaves ``current`` missing; the next :class:`Installer` use restores ``previous``
(:meth:`Installer.recover`). One ``skills/.lock`` (``flock``) serialises installers across
processes. ``skills/<name>/install.json`` records where the current version came from.

Errors are :class:`~doraforge.skill_runtime.errors.InstallError` (or ``ArchiveError``/
``ManifestError``
from extraction and validation); codes raised here:

``SKILL_INSTALL_NOT_CONFIRMED``  the operator did not confirm
``SKILL_INSTALL_RUNNING``        the skill's runtime is starting, running or stopping
``SKILL_INSTALL_IN_USE``         the active AgentTask is bound to the skill
``SKILL_INSTALL_MISMATCH``       the bundle is not the name/version that was resolved
``SKILL_INSTALL_BUSY``           another installer holds the lock (retryable)
``SKILL_INSTALL_BAD_NAME``       a name, artifact id or version is not a safe path component
``SKILL_ARTIFACT_PLATFORM``      a node lock is for another platform or architecture
``SKILL_ARTIFACT_NOT_FOUND``     a locally resolved node artifact is missing
``SKILL_ARTIFACT_NO_REGISTRY``   a registry-resolved lock but no registry to ask
``SKILL_ARTIFACT_DIGEST_MISMATCH`` an index lists a node with a digest other than the lock's
``SKILL_NOT_INSTALLED``          inspect/remove of an unknown skill
``SKILL_SOURCE_IS_DIRECTORY``    a bundle folder was given where its packed archive belongs
``SKILL_INSTALL_EXTERNAL_COMMAND`` a node runs a command from outside the bundle and the
                                 runtime's environment, and it was not allowed

Before the swap the installer lists the code the bundle would run (its ``start.sh`` hook
and every profile's node commands, :mod:`~doraforge.skill_runtime.node_commands`): in
the confirmation question and in the result.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import json
import os
import platform
import re
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from doraforge.paos.home import PaosHome
from doraforge.paos.store import AgentTaskStore
from doraforge.skill_runtime.archive import ArchiveLimits, extract, extract_artifact
from doraforge.skill_runtime.artifacts import ArtifactReceipt, NodeLock, install_artifact, installed
from doraforge.skill_runtime.artifacts import verify_receipt as verify_artifact_receipt
from doraforge.skill_runtime.catalog import current_bundle, not_installed
from doraforge.skill_runtime.download import (
    DownloadCache,
    ProgressCallback,
    fetch_with_retry,
    local_path,
)
from doraforge.skill_runtime.errors import InstallError
from doraforge.skill_runtime.manifest import SkillManifest, load_manifest
from doraforge.skill_runtime.node_commands import BundleCode, bundle_code, refuse_external
from doraforge.skill_runtime.sources import PackageIndex, Registry, classify, load_index, resolve
from doraforge.wire.files import atomic_write_text

ACTIVE_RUNTIME_STATES = frozenset({"starting", "running", "stopping"})
INSTALL_RECORD = "install.json"
# Names become path components under skills/ and artifacts/.
_SAFE_COMPONENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")


@dataclass(frozen=True)
class InstalledArtifact:
    """A node artifact the install verified or installed."""

    node_id: str
    artifact_id: str
    version: str
    sha256: str
    path: Path


@dataclass(frozen=True)
class InstallResult:
    """What :meth:`Installer.install` committed."""

    name: str
    version: str
    path: Path
    sha256: str
    previous_version: str | None
    artifacts: list[InstalledArtifact] = field(default_factory=list)
    #: The code the installed bundle runs (its hook, every profile's node commands).
    code: BundleCode = field(default_factory=lambda: BundleCode(None))


@dataclass(frozen=True)
class InstalledSkill:
    """One installed skill as :meth:`Installer.list` reports it."""

    name: str
    version: str
    path: Path
    sha256: str | None
    previous_version: str | None


@dataclass(frozen=True)
class _Origin:
    """Where the bundle came from, for resolving its node artifacts."""

    kind: str
    location: str
    index: PackageIndex | None


def host_platform() -> tuple[str, str]:
    """``(platform, arch)`` of this host as node locks spell them."""
    return platform.system().lower(), platform.machine()


def _safe(value: str, what: str) -> str:
    if not _SAFE_COMPONENT.fullmatch(value) or value in (".", ".."):
        raise InstallError(
            "SKILL_INSTALL_BAD_NAME", f"{what} {value!r} is not a safe name", details={what: value}
        )
    return value


def _refuse_directory(source: str) -> None:
    """A bundle folder is not installable as it is: say so, and how to make its archive
    (the inventory and digests the installer checks are written by ``skill pack``)."""
    path = local_path(source)
    if path is not None and path.is_dir():
        raise InstallError(
            "SKILL_SOURCE_IS_DIRECTORY",
            f"{source} is a directory, not a bundle archive: pack it first with "
            f"`doraforge skill pack {source}` and install the .tar.gz it writes",
            details={"source": source},
        )


def _refuse_all(_message: str) -> bool:
    return False


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Installer:
    """Installs skills into ``home`` (see the module docstring for the guarantees).

    ``confirm`` is asked before the swap unless ``yes``; the default refuses.
    ``runtime_state(name)`` reports a skill's runtime state (default: the ``state`` field
    of ``runtime/<name>.json``). ``store`` is the AgentTask store to check for an active
    binding (default: the home's store when it exists). ``registry`` is the registry base
    URL for ``resolver: registry`` locks when the bundle itself did not come from one.
    ``runtime_bin`` is the ``bin`` of the interpreter skills run with (``${FORGE_RUNTIME_BIN}``,
    default this one's): a node command there is the runtime's own, not external.
    """

    def __init__(
        self,
        home: PaosHome,
        *,
        confirm: Callable[[str], bool] | None = None,
        store: AgentTaskStore | None = None,
        runtime_state: Callable[[str], str | None] | None = None,
        progress: ProgressCallback | None = None,
        registry: str | None = None,
        client: httpx.Client | None = None,
        max_download_bytes: int | None = None,
        limits: ArchiveLimits | None = None,
        runtime_bin: Path | None = None,
    ) -> None:
        self.home = home.ensure()
        self._runtime_bin = runtime_bin or Path(sys.executable).parent
        self._confirm = confirm or _refuse_all
        self._store = store
        self._runtime_state = runtime_state or self._state_from_file
        self._registry = registry
        self._client = client
        self._limits = limits if limits is not None else ArchiveLimits()
        cache_options = {} if max_download_bytes is None else {"max_bytes": max_download_bytes}
        self._cache = DownloadCache(
            home.cache_dir, progress=progress, client=client, **cache_options
        )
        # Fault-injection seams for tests: called after `current` became `previous`, and
        # after staging became `current` (before the install commits).
        self._after_backup: Callable[[], None] = lambda: None
        self._after_swap: Callable[[], None] = lambda: None
        self.recover()

    # ------------------------------------------------------------------ public

    def install(
        self,
        source: str,
        *,
        yes: bool = False,
        name: str | None = None,
        version: str | None = None,
        allow_external_commands: bool = False,
    ) -> InstallResult:
        """Install ``source`` (archive, index or registry); the previous version survives
        any failure and stays as ``previous`` after success. A bundle with a node command
        from outside itself and the runtime's environment (``/bin/bash``) is refused with
        ``SKILL_INSTALL_EXTERNAL_COMMAND`` unless ``allow_external_commands``."""
        with self._locked():
            self._recover_locked()
            _refuse_directory(source)
            origin = self._origin(source)
            resolved = resolve(source, name=name, version=version, client=self._client)
            cached = fetch_with_retry(
                self._cache, resolved.url_or_path, sha256=resolved.sha256, size=resolved.size
            )
            staging = self.home.skills_dir / f".staging-{uuid.uuid4().hex}"
            try:
                # Messages name the user's file or URL, not the cache copy they never saw.
                shown = resolved.url_or_path
                extract(cached.path, staging, limits=self._limits, shown_as=shown)
                manifest = load_manifest(staging)
                skill = _safe(manifest.name, "name")
                _safe(manifest.version, "version")
                self._check_identity(manifest, resolved.name, resolved.version)
                code = bundle_code(
                    staging,
                    manifest,
                    runtime_bin=self._runtime_bin,
                    artifacts_dir=self.home.artifacts_dir,
                )
                refuse_external(code, allowed=allow_external_commands)
                artifacts = self._install_artifacts(manifest, staging, origin)
                self._check_not_busy(skill, "install")
                self._ask(skill, manifest.version, yes, code)
                record = self._record(skill, manifest.version, cached.sha256, source, artifacts)
                previous = self._swap(skill, staging, record)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        return InstallResult(
            name=skill,
            version=manifest.version,
            path=current_bundle(self.home, skill),
            sha256=cached.sha256,
            previous_version=previous,
            artifacts=artifacts,
            code=code,
        )

    def list(self) -> list[InstalledSkill]:
        """Installed skills, by name; the version is read from each installed manifest."""
        result: builtins.list[InstalledSkill] = []
        if not self.home.skills_dir.is_dir():
            return result
        for skill_dir in sorted(self.home.skills_dir.iterdir()):
            current = skill_dir / "current"
            if skill_dir.name.startswith(".") or not current.is_dir():
                continue
            record = self._read_record(skill_dir)
            previous = skill_dir / "previous"
            result.append(
                InstalledSkill(
                    name=skill_dir.name,
                    version=load_manifest(current).version,
                    path=current,
                    sha256=record.get("sha256"),
                    previous_version=(
                        load_manifest(previous).version if previous.is_dir() else None
                    ),
                )
            )
        return result

    def inspect(self, name: str) -> dict[str, Any]:
        """The installed manifest, archive manifest, install record and verified receipts.

        Raises ``SKILL_ARTIFACT_TAMPERED`` when an artifact no longer matches its receipt.
        """
        skill_dir = self._skill_dir(name)
        current = skill_dir / "current"
        manifest = load_manifest(current)
        record = self._read_record(skill_dir)
        receipts = [
            verify_artifact_receipt(
                self.home.artifacts_dir / a["artifact_id"] / a["version"]
            ).public()
            for a in record.get("artifacts", [])
        ]
        return {
            "name": manifest.name,
            "version": manifest.version,
            "path": str(current),
            "manifest": manifest.model_dump(mode="json"),
            "archive_manifest": json.loads(
                (current / "archive-manifest.json").read_text(encoding="utf-8")
            ),
            "install": record,
            "receipts": receipts,
        }

    def remove(self, name: str) -> None:
        """Remove skill ``name`` (current and previous); refused while running or bound.

        Node artifacts stay: other skills may lock the same ones.
        """
        with self._locked():
            skill_dir = self._skill_dir(name)
            self._check_not_busy(name, "remove")
            trash = self.home.skills_dir / f".trash-{uuid.uuid4().hex}"
            os.replace(skill_dir, trash)
            shutil.rmtree(trash, ignore_errors=True)

    def recover(self) -> builtins.list[str]:
        """Finish what a crashed install left; return the skills whose backup was restored.

        Skipped (empty list) when another installer holds the lock: it recovers itself.
        """
        try:
            with self._locked():
                return self._recover_locked()
        except InstallError as exc:
            if exc.code == "SKILL_INSTALL_BUSY":
                return []
            raise

    # ------------------------------------------------------------------ steps

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.home.skills_dir.mkdir(parents=True, exist_ok=True)
        with (self.home.skills_dir / ".lock").open("a") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                raise InstallError(
                    "SKILL_INSTALL_BUSY", "another install is in progress", retryable=True
                ) from exc
            yield

    def _recover_locked(self) -> builtins.list[str]:
        restored = []
        for parent in (self.home.skills_dir, self.home.artifacts_dir):
            if not parent.is_dir():
                continue
            for entry in parent.iterdir():
                if entry.name.startswith((".staging-", ".trash-")):
                    shutil.rmtree(entry, ignore_errors=True)
        for skill_dir in self.home.skills_dir.iterdir():
            current, previous = skill_dir / "current", skill_dir / "previous"
            if skill_dir.is_dir() and not current.exists() and previous.is_dir():
                os.replace(previous, current)
                _fsync_dir(skill_dir)
                restored.append(skill_dir.name)
        return restored

    def _origin(self, source: str) -> _Origin:
        where = classify(source)
        index = load_index(where.location, client=self._client) if where.kind == "index" else None
        return _Origin(where.kind, where.location, index)

    def _check_identity(
        self, manifest: SkillManifest, name: str | None, version: str | None
    ) -> None:
        for what, wanted, actual in (
            ("name", name, manifest.name),
            ("version", version, manifest.version),
        ):
            if wanted is not None and wanted != actual:
                raise InstallError(
                    "SKILL_INSTALL_MISMATCH",
                    f"bundle {what} is {actual!r}, expected {wanted!r}",
                    details={"field": what, "expected": wanted, "actual": actual},
                )

    def _check_not_busy(self, name: str, verb: str) -> None:
        state = self._runtime_state(name)
        if state in ACTIVE_RUNTIME_STATES or state == "unknown":
            raise InstallError(
                f"SKILL_{verb.upper()}_RUNNING",
                f"cannot {verb} {name}: its runtime is {state}; stop it first",
                details={"name": name, "state": state},
            )
        task_id = self._bound_task(name)
        if task_id is not None:
            raise InstallError(
                f"SKILL_{verb.upper()}_IN_USE",
                f"cannot {verb} {name}: active AgentTask {task_id} is bound to it",
                details={"name": name, "task_id": task_id},
            )

    def _bound_task(self, name: str) -> str | None:
        store = self._store
        if store is None and not self.home.store_path.exists():
            return None
        opened = store or AgentTaskStore(self.home.store_path)
        try:
            task = opened.active_task_of(name)
            return None if task is None else task.task_id
        finally:
            if store is None:
                opened.close()

    def _state_from_file(self, name: str) -> str | None:
        path = self.home.runtime_dir / f"{name}.json"
        if not path.exists():
            return None
        try:
            state = json.loads(path.read_text(encoding="utf-8")).get("state")
        except (OSError, ValueError, AttributeError):
            # Fail closed: an unreadable state file cannot prove the runtime is stopped.
            return "unknown"
        return state if isinstance(state, str) else "unknown"

    def _ask(self, name: str, version: str, yes: bool, code: BundleCode) -> None:
        current = current_bundle(self.home, name)
        was = f" (replacing {load_manifest(current).version})" if current.is_dir() else ""
        lines = code.lines()
        runs = f"{name} {version} runs, as your user:\n" if lines else ""
        runs += "".join(f"  {line}\n" for line in lines)
        if yes or self._confirm(f"{runs}Install skill {name} {version}{was}?"):
            return
        raise InstallError(
            "SKILL_INSTALL_NOT_CONFIRMED",
            f"installation of {name} {version} was not confirmed (use --yes)",
            details={"name": name, "version": version},
        )

    # ------------------------------------------------------------------ artifacts

    def _install_artifacts(
        self, manifest: SkillManifest, staging: Path, origin: _Origin
    ) -> builtins.list[InstalledArtifact]:
        spec = getattr(manifest, "artifacts", None)
        if spec is None:
            return []
        result = []
        for node_id, lock in sorted(spec.nodes.items()):
            _safe(lock.artifact_id, "artifact_id")
            _safe(lock.version, "version")
            self._check_host(node_id, lock)
            receipt = installed(self.home.artifacts_dir, lock)
            if receipt is None:
                receipt = self._fetch_artifact(lock, spec.resolver, staging, origin)
            result.append(
                InstalledArtifact(
                    node_id, lock.artifact_id, lock.version, lock.sha256, receipt.path
                )
            )
        return result

    def _check_host(self, node_id: str, lock: NodeLock) -> None:
        system, machine = host_platform()
        if (lock.platform, lock.arch) != (system, machine):
            raise InstallError(
                "SKILL_ARTIFACT_PLATFORM",
                f"node {node_id} is locked to {lock.platform}/{lock.arch}, "
                f"this host is {system}/{machine}",
                details={"node_id": node_id, "platform": lock.platform, "arch": lock.arch},
            )

    def _fetch_artifact(
        self, lock: NodeLock, resolver: str, staging: Path, origin: _Origin
    ) -> ArtifactReceipt:
        url, size = self._locate_artifact(lock, resolver, staging, origin)
        # The lock, verified as part of the bundle, is the digest authority.
        cached = fetch_with_retry(self._cache, url, sha256=lock.sha256, size=size)
        return install_artifact(
            cached.path,
            lock,
            self.home.artifacts_dir,
            extract=lambda src, dst: extract_artifact(src, dst, self._limits),
        )

    def _locate_artifact(
        self, lock: NodeLock, resolver: str, staging: Path, origin: _Origin
    ) -> tuple[str, int | None]:
        if resolver == "registry":
            base = origin.location if origin.kind == "registry" else self._registry
            if base is None:
                raise InstallError(
                    "SKILL_ARTIFACT_NO_REGISTRY",
                    f"{lock.artifact_id} resolves from a registry but none is known",
                    details={"artifact_id": lock.artifact_id},
                )
            system, machine = host_platform()
            found = Registry(base, client=self._client).node(
                lock.artifact_id, lock.version, system, machine
            )
            return found.url, found.size
        if origin.index is not None and (
            package := origin.index.node(lock.artifact_id, lock.version)
        ):
            if package.sha256 != lock.sha256.lower():
                raise InstallError(
                    "SKILL_ARTIFACT_DIGEST_MISMATCH",
                    f"index lists {lock.artifact_id} {lock.version} with another digest",
                    details={"index": package.sha256, "lock": lock.sha256},
                )
            return package.url, package.size
        bundled = staging / "artifacts" / bundled_artifact_name(lock)
        if not bundled.is_file():
            raise InstallError(
                "SKILL_ARTIFACT_NOT_FOUND",
                f"{lock.artifact_id} {lock.version} is neither in the index nor bundled "
                f"as artifacts/{bundled.name}",
                details={"artifact_id": lock.artifact_id},
            )
        return str(bundled), None

    # ------------------------------------------------------------------ swap

    def _record(
        self,
        name: str,
        version: str,
        sha256: str,
        source: str,
        artifacts: builtins.list[InstalledArtifact],
    ) -> dict[str, Any]:
        return {
            "name": name,
            "version": version,
            "sha256": sha256,
            "source": source,
            "installed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "artifacts": [
                {"node_id": a.node_id, "artifact_id": a.artifact_id, "version": a.version}
                for a in artifacts
            ],
        }

    def _swap(self, name: str, staging: Path, record: dict[str, Any]) -> str | None:
        """Atomically make ``staging`` the current version; the old one becomes ``previous``.

        Returns the replaced version. On any failure every rename is undone.
        """
        skill_dir = self.home.skills_dir / name
        skill_dir.mkdir(exist_ok=True)
        current, previous = skill_dir / "current", skill_dir / "previous"
        replaced = load_manifest(current).version if current.is_dir() else None
        record_path = skill_dir / INSTALL_RECORD
        old_record = record_path.read_bytes() if record_path.exists() else None
        old_backup = None
        if replaced is not None and previous.exists():
            old_backup = self.home.skills_dir / f".trash-{uuid.uuid4().hex}"
            os.replace(previous, old_backup)
        swapped = False
        try:
            if replaced is not None:
                os.replace(current, previous)
            self._after_backup()
            os.replace(staging, current)
            swapped = True
            _fsync_dir(skill_dir)
            self._after_swap()
            _write_atomic(record_path, {**record, "previous_version": replaced})
        except BaseException:
            # Undo in reverse order; each step only runs if its rename happened.
            if swapped:
                failed = self.home.skills_dir / f".trash-{uuid.uuid4().hex}"
                os.replace(current, failed)
                shutil.rmtree(failed, ignore_errors=True)
            if replaced is not None and previous.exists() and not current.exists():
                os.replace(previous, current)
            if old_backup is not None:
                os.replace(old_backup, previous)
            if old_record is not None:
                record_path.write_bytes(old_record)
            _fsync_dir(skill_dir)
            raise
        if old_backup is not None:
            shutil.rmtree(old_backup, ignore_errors=True)
        return replaced

    def _skill_dir(self, name: str) -> Path:
        skill_dir = self.home.skills_dir / _safe(name, "name")
        if not (skill_dir / "current").is_dir():
            raise not_installed(self.home, name, InstallError)
        return skill_dir

    def _read_record(self, skill_dir: Path) -> dict[str, Any]:
        try:
            record = json.loads((skill_dir / INSTALL_RECORD).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return record if isinstance(record, dict) else {}


def bundled_artifact_name(lock: NodeLock) -> str:
    """The file name a ``resolver: local`` artifact has under the bundle's ``artifacts/``."""
    return f"{lock.artifact_id}-{lock.version}-{lock.platform}-{lock.arch}.tar.gz"


def _write_atomic(path: Path, document: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(document, indent=2, sort_keys=True))
