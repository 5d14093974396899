"""Where a skill bundle comes from: a local archive, a static package index, or a registry.

``resolve(source)`` decides by the shape of ``source``:

* an existing local file (or ``file://`` URL) whose name ends in ``.json`` is a static
  package index; any other local file is a bundle archive (its digest is computed);
* an ``http(s)://`` URL whose path ends in ``.json`` is a static package index;
* any other ``http(s)://`` URL is a registry base URL.

Static package index, schema v3 (extra keys are allowed and ignored; the listed keys are
required and type-checked, and errors name the field, e.g. ``packages[2].sha256``)::

    {"schema_version": 3,
     "packages": [{"package_key": "pick-place", "version": "1.2.0", "kind": "skill",
                   "direct_download_url": "pick-place-1.2.0.tar.gz",
                   "sha256": "<64 hex>", "size": 12345}, ...]}

``kind`` is ``skill`` or ``forge-node`` (for a node, ``package_key`` is the artifact id).
A relative ``direct_download_url`` is resolved against the index's own location.

Registry (``{base}`` is the source URL without a trailing slash)::

    GET {base}/v1/skills/{name}
    {"name": "pick-place",
     "versions": [{"version": "1.2.0", "direct_download_url": "https://…/pick-place.tar.gz",
                   "sha256": "<64 hex>", "size": 12345}, ...]}

    GET {base}/v1/forge-nodes/{artifact_id}
    {"artifact_id": "arm-driver",
     "versions": [{"version": "0.3.0", "platform": "linux", "arch": "x86_64",
                   "direct_download_url": "https://…", "size": 67890}, ...]}

A node version's ``sha256`` is never taken from the registry: the skill's lock is the digest
authority. ``size`` is optional for nodes; when absent the exact size is taken from a
``HEAD`` of the direct-download URL (``Content-Length``) before anything enters the cache.

The highest version wins when none is requested; versions compare as dotted numbers with a
pre-release (``-rc.1``) sorting before its release. Errors are
:class:`~doraforge.skill_runtime.errors.InstallError` with ``SKILL_SOURCE_INVALID`` (bad document,
names
the field), ``SKILL_SOURCE_NOT_FOUND`` (no such skill, version or node) or
``SKILL_SOURCE_UNREACHABLE`` (transport or HTTP failure).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import httpx

from doraforge.skill_runtime.download import check_digest, local_path
from doraforge.skill_runtime.errors import InstallError
from doraforge.wire import strict_json

MAX_DOCUMENT_BYTES = 4 << 20
KINDS = ("skill", "forge-node")


@dataclass(frozen=True)
class ResolvedBundle:
    """A concrete download: ``sha256``/``size`` are ``None`` only for a bare local archive."""

    url_or_path: str
    sha256: str | None
    size: int | None
    name: str | None
    version: str | None


@dataclass(frozen=True)
class SourceKind:
    """How ``resolve`` read a source: ``archive``, ``index`` or ``registry``, and where."""

    kind: str
    location: str


def _invalid(where: str, field: str, problem: str) -> InstallError:
    return InstallError(
        "SKILL_SOURCE_INVALID", f"{where}: {field} {problem}", details={"field": field}
    )


def _not_found(message: str, **details: object) -> InstallError:
    return InstallError("SKILL_SOURCE_NOT_FOUND", message, details=details)


def classify(source: str) -> SourceKind:
    """Decide whether ``source`` is an archive, an index or a registry (see module doc)."""
    path = local_path(source)
    if path is not None:
        if not path.is_file():
            raise _not_found(
                f"no such file: {path}; give a bundle archive's path, or pack a folder into "
                "one with `doraforge skill pack DIR`",
                source=source,
            )
        kind = "index" if path.suffix == ".json" else "archive"
        return SourceKind(kind, str(path.resolve()))
    if urlsplit(source).path.endswith(".json"):
        return SourceKind("index", source)
    return SourceKind("registry", source.rstrip("/"))


def resolve(
    source: str,
    *,
    name: str | None = None,
    version: str | None = None,
    client: httpx.Client | None = None,
) -> ResolvedBundle:
    """The bundle to download for ``source``, picking ``name``/``version`` from an index."""
    where = classify(source)
    if where.kind == "archive":
        return ResolvedBundle(where.location, None, None, name, version)
    if where.kind == "index":
        index = load_index(where.location, client=client)
        return index.skill(name, version)
    return Registry(where.location, client=client).skill(name, version)


# ---------------------------------------------------------------------- versions


def version_key(version: str) -> tuple[Any, ...]:
    """A sort key: numeric dotted release, a pre-release before its release."""
    core, _, _build = version.partition("+")
    release, dash, pre = core.partition("-")
    numbers = tuple(int(p) if p.isdigit() else -1 for p in release.split("."))
    pre_key = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return (numbers, 0 if dash else 1, pre_key if dash else ())


def pick_version[E](
    entries: Sequence[E], version: str | None, what: str, *, version_of: Callable[[E], str]
) -> E:
    """The entry whose ``version_of`` is ``version``, or the highest one."""
    if version is not None:
        for entry in entries:
            if version_of(entry) == version:
                return entry
        raise _not_found(f"{what} has no version {version}", version=version)
    if not entries:
        raise _not_found(f"{what} has no versions")
    return max(entries, key=lambda e: version_key(version_of(e)))


# ---------------------------------------------------------------------- documents


def _fetch_json(location: str, client: httpx.Client | None) -> Any:
    """Read a JSON document from a path or URL, bounded to ``MAX_DOCUMENT_BYTES``."""
    path = local_path(location)
    if path is not None:
        if path.stat().st_size > MAX_DOCUMENT_BYTES:
            raise _invalid(location, "document", "is larger than the 4 MiB limit")
        raw = path.read_bytes()
    else:
        raw = _get_bounded(location, client)
    try:
        return strict_json.loads(raw)
    except strict_json.JSONRefused as exc:
        raise _invalid(location, "document", f"is not JSON: {exc.message}") from exc


def _get_bounded(url: str, client: httpx.Client | None) -> bytes:
    owned = client is None
    http = client or httpx.Client(timeout=30.0, follow_redirects=True)
    try:
        with http.stream("GET", url, headers={"Accept": "application/json"}) as response:
            if response.status_code == 404:
                raise _not_found(f"GET {url} answered 404", url=url)
            if response.status_code != 200:
                raise InstallError(
                    "SKILL_SOURCE_UNREACHABLE",
                    f"GET {url} answered HTTP {response.status_code}",
                    retryable=response.status_code >= 500,
                    details={"url": url, "status_code": response.status_code},
                )
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise _invalid(url, "document", "is larger than the 4 MiB limit")
            return bytes(body)
    except httpx.HTTPError as exc:
        raise InstallError(
            "SKILL_SOURCE_UNREACHABLE", f"GET {url} failed: {exc}", retryable=True
        ) from exc
    finally:
        if owned:
            http.close()


def _require(entry: Any, field: str, kind: type, where: str, prefix: str) -> Any:
    if not isinstance(entry, dict):
        raise _invalid(where, prefix, "must be an object")
    if field not in entry:
        raise _invalid(where, f"{prefix}.{field}", "is required")
    value = entry[field]
    # bool is an int subclass; a size of `true` is still wrong.
    if not isinstance(value, kind) or isinstance(value, bool):
        raise _invalid(where, f"{prefix}.{field}", f"must be a {kind.__name__}")
    if kind is str and not value:
        raise _invalid(where, f"{prefix}.{field}", "must not be empty")
    return value


def _digest(value: str, where: str, field: str) -> str:
    try:
        return check_digest(value)
    except InstallError as exc:
        raise _invalid(where, field, "must be a 64-character hex SHA-256") from exc


def _size(value: int, where: str, field: str) -> int:
    if value <= 0:
        raise _invalid(where, field, "must be a positive integer")
    return value


def _join(base: str, url: str) -> str:
    """``url`` relative to the document at ``base`` (a path or an http URL)."""
    if urlsplit(url).scheme in ("http", "https", "file"):
        return url
    path = local_path(base)
    if path is not None:
        return str(path.parent / url)
    return urljoin(base, url)


# ---------------------------------------------------------------------- index


@dataclass(frozen=True)
class IndexPackage:
    """One validated entry of a static package index."""

    package_key: str
    version: str
    kind: str
    url: str
    sha256: str
    size: int


@dataclass(frozen=True)
class PackageIndex:
    """A validated schema-v3 static package index."""

    location: str
    packages: tuple[IndexPackage, ...]

    def skill(self, name: str | None, version: str | None) -> ResolvedBundle:
        """The skill package ``name`` (optional when the index has one skill)."""
        skills = [p for p in self.packages if p.kind == "skill"]
        if name is None:
            names = sorted({p.package_key for p in skills})
            if len(names) != 1:
                raise _not_found(
                    f"{self.location} lists skills {names}; choose one with a name",
                    skills=names,
                )
            name = names[0]
        found = self._pick(skills, name, version, f"skill {name}")
        return ResolvedBundle(found.url, found.sha256, found.size, name, found.version)

    def node(self, artifact_id: str, version: str) -> IndexPackage | None:
        """The ``forge-node`` package ``artifact_id`` at exactly ``version``, if listed."""
        for package in self.packages:
            if (package.kind, package.package_key, package.version) == (
                "forge-node",
                artifact_id,
                version,
            ):
                return package
        return None

    def _pick(
        self, packages: list[IndexPackage], key: str, version: str | None, what: str
    ) -> IndexPackage:
        matching = [p for p in packages if p.package_key == key]
        if not matching:
            raise _not_found(f"{self.location} does not list {what}", package_key=key)
        return pick_version(matching, version, what, version_of=lambda p: p.version)


def load_index(location: str, *, client: httpx.Client | None = None) -> PackageIndex:
    """Read and strictly validate a schema-v3 index from a path or http(s) URL."""
    document = _fetch_json(location, client)
    if not isinstance(document, dict):
        raise _invalid(location, "document", "must be a JSON object")
    if document.get("schema_version") != 3:
        raise _invalid(location, "schema_version", "must be 3")
    packages = document.get("packages")
    if not isinstance(packages, list):
        raise _invalid(location, "packages", "must be a list")
    parsed = tuple(_index_package(location, f"packages[{i}]", p) for i, p in enumerate(packages))
    return PackageIndex(location, parsed)


def _index_package(location: str, prefix: str, entry: Any) -> IndexPackage:
    kind = _require(entry, "kind", str, location, prefix)
    if kind not in KINDS:
        raise _invalid(location, f"{prefix}.kind", f"must be one of {list(KINDS)}")
    return IndexPackage(
        package_key=_require(entry, "package_key", str, location, prefix),
        version=_require(entry, "version", str, location, prefix),
        kind=kind,
        url=_join(location, _require(entry, "direct_download_url", str, location, prefix)),
        sha256=_digest(
            _require(entry, "sha256", str, location, prefix), location, f"{prefix}.sha256"
        ),
        size=_size(_require(entry, "size", int, location, prefix), location, f"{prefix}.size"),
    )


# ---------------------------------------------------------------------- registry


@dataclass(frozen=True)
class NodeDownload:
    """Where to fetch one node artifact and its exact size (digest comes from the lock)."""

    url: str
    size: int


class Registry:
    """A skill registry at ``base`` (see the module docstring for the JSON shapes)."""

    def __init__(self, base: str, *, client: httpx.Client | None = None) -> None:
        self.base = base.rstrip("/")
        self._client = client

    def skill(self, name: str | None, version: str | None) -> ResolvedBundle:
        """The download for skill ``name`` at ``version`` (default: the highest)."""
        if not name:
            raise _not_found("a registry source needs a skill name", source=self.base)
        url = f"{self.base}/v1/skills/{quote(name, safe='')}"
        versions = self._versions(url, "name", name)
        entry = pick_version(versions, version, f"skill {name}", version_of=lambda e: e["version"])
        i = versions.index(entry)
        prefix = f"versions[{i}]"
        return ResolvedBundle(
            url_or_path=_join(url, _require(entry, "direct_download_url", str, url, prefix)),
            sha256=_digest(_require(entry, "sha256", str, url, prefix), url, f"{prefix}.sha256"),
            size=_size(_require(entry, "size", int, url, prefix), url, f"{prefix}.size"),
            name=name,
            version=entry["version"],
        )

    def node(self, artifact_id: str, version: str, platform: str, arch: str) -> NodeDownload:
        """The download of node ``artifact_id`` at exactly ``version`` for the host."""
        url = f"{self.base}/v1/forge-nodes/{quote(artifact_id, safe='')}"
        versions = self._versions(url, "artifact_id", artifact_id)
        for i, entry in enumerate(versions):
            prefix = f"versions[{i}]"
            if entry["version"] != version:
                continue
            # platform/arch are optional in the document; when present they must match.
            if entry.get("platform", platform) != platform or entry.get("arch", arch) != arch:
                continue
            target = _join(url, _require(entry, "direct_download_url", str, url, prefix))
            if "size" in entry:
                return NodeDownload(
                    target, _size(_require(entry, "size", int, url, prefix), url, f"{prefix}.size")
                )
            return NodeDownload(target, self._head_size(target))
        raise _not_found(
            f"registry has no {artifact_id} {version} for {platform}/{arch}",
            artifact_id=artifact_id,
            version=version,
        )

    def _versions(self, url: str, key: str, expected: str) -> list[dict[str, Any]]:
        document = _fetch_json(url, self._client)
        if not isinstance(document, dict):
            raise _invalid(url, "document", "must be a JSON object")
        if document.get(key) != expected:
            raise _invalid(url, key, f"must be {expected!r}")
        versions = document.get("versions")
        if not isinstance(versions, list):
            raise _invalid(url, "versions", "must be a list")
        for i, entry in enumerate(versions):
            _require(entry, "version", str, url, f"versions[{i}]")
        return versions

    def _head_size(self, url: str) -> int:
        owned = self._client is None
        http = self._client or httpx.Client(timeout=30.0, follow_redirects=True)
        try:
            response = http.head(url)
        except httpx.HTTPError as exc:
            raise InstallError(
                "SKILL_SOURCE_UNREACHABLE", f"HEAD {url} failed: {exc}", retryable=True
            ) from exc
        finally:
            if owned:
                http.close()
        length = response.headers.get("content-length", "")
        if response.status_code != 200 or not length.isdigit() or int(length) <= 0:
            raise _invalid(url, "Content-Length", "must give the exact artifact size")
        return int(length)
