"""Preparing a profile for Dora: preflight, placeholders, the launch copy and its digest.

A bundle is installed read-only and hash-checked, so the dataflow Dora runs is a rendered
copy under ``runtime/launch/<name>/``. Dora runs every node with the directory of the
dataflow file as its working directory and resolves relative node ``path:`` values against
it, so the copy keeps relative references working two ways: every sibling of the source
dataflow is symlinked beside the copy (``--config gateway.yml`` still finds its file), and
relative node paths that point at existing files are rewritten to absolute ones (which
also covers ``../`` references). Dora writes its per-node logs to ``out/`` in that same
directory, which keeps them out of the bundle.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import yaml

from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.skill_runtime.manifest import Profile
from doraforge.wire import strict_yaml

#: ``${NAME}`` placeholders. Only the PAOS_ and FORGE_ namespaces are ours; any other
#: ``${...}`` is left for Dora, which expands descriptor variables itself.
PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
OWN_NAMESPACES = ("PAOS_", "FORGE_")
DIGEST_DOMAIN = b"paos-environment-digest-v1\0"
#: The module a Gateway node runs (``path: python``, ``args: -m doraforge.gateway ...``).
GATEWAY_MODULE = "doraforge.gateway"


def placeholder_values(*, root: Path, runtime_bin: Path, name: str, version: str) -> dict[str, str]:
    """The values of the four placeholders a dataflow may use."""
    return {
        "PAOS_SKILL_ROOT": str(root),
        "FORGE_RUNTIME_BIN": str(runtime_bin),
        "PAOS_SKILL_NAME": name,
        "PAOS_SKILL_VERSION": version,
    }


def render_placeholders(text: str, values: Mapping[str, str], *, source: str) -> str:
    """Replace ``${NAME}`` for every known placeholder in ``text``.

    Raises :class:`RuntimeStateError` ``SKILL_PLACEHOLDER_UNKNOWN`` for a ``${PAOS_*}`` or
    ``${FORGE_*}`` placeholder that has no value (a typo must not reach Dora, which would
    expand it to an empty string). Other ``${...}`` are left as they are.
    """

    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key in values:
            return values[key]
        if key.startswith(OWN_NAMESPACES):
            raise RuntimeStateError(
                "SKILL_PLACEHOLDER_UNKNOWN",
                f"{source}: unknown placeholder ${{{key}}}",
                details={"file": source, "placeholder": key, "known": sorted(values)},
            )
        return match.group(0)

    return PLACEHOLDER.sub(replace, text)


def runs_gateway(node: object) -> bool:
    """Whether a dataflow node runs the doraforge Gateway (its ``args`` name the module)."""
    args = node.get("args") if isinstance(node, dict) else None
    try:
        words = shlex.split(args) if isinstance(args, str) else []
    except ValueError:
        return False
    return GATEWAY_MODULE in words


def write_launch_copy(
    dataflow: Path,
    launch_dir: Path,
    values: Mapping[str, str],
    gateway_env: Mapping[str, str] | None = None,
) -> Path:
    """Render ``dataflow`` into ``launch_dir`` and return the path Dora should start.

    ``gateway_env`` is added to the ``env`` of the Gateway nodes (:func:`runs_gateway`)
    only, over what the dataflow sets: what only a Gateway may hold (its token file's
    path) never reaches the other nodes. The directory is rebuilt on every start except
    ``out/`` (Dora's node logs of earlier runs, which ``dora logs`` reads). Raises
    :class:`RuntimeStateError` ``SKILL_DATAFLOW_INVALID`` when the rendered file is not a
    dataflow with nodes.
    """
    source_dir = dataflow.parent
    _reset_launch_dir(launch_dir)
    for entry in sorted(source_dir.iterdir()):
        if entry.name not in (dataflow.name, "out"):
            (launch_dir / entry.name).symlink_to(entry.resolve())
    text = dataflow.read_text(encoding="utf-8")
    rendered = render_placeholders(text, values, source=str(dataflow))
    document = _parse_dataflow(rendered, str(dataflow))
    changed = _absolutise_node_paths(document, source_dir)
    if _gateway_environment(document, gateway_env or {}) or changed:
        rendered = yaml.safe_dump(document, sort_keys=False)
    target = launch_dir / dataflow.name
    target.write_text(rendered, encoding="utf-8")
    return target


def _reset_launch_dir(launch_dir: Path) -> None:
    launch_dir.mkdir(parents=True, exist_ok=True)
    for entry in launch_dir.iterdir():
        if entry.name == "out":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _parse_dataflow(text: str, source: str) -> dict[str, Any]:
    # Strict, as every file of a downloaded bundle is read; aliases stay allowed (Dora
    # reads them), bounded in how far they expand.
    try:
        document = strict_yaml.load(text, aliases=True)
    except strict_yaml.YAMLRefused as exc:
        raise _invalid_dataflow(
            source, f"{exc.field}: not valid YAML after rendering: {exc.message}"
        ) from exc
    if not isinstance(document, dict) or not isinstance(document.get("nodes"), list):
        raise _invalid_dataflow(source, "a dataflow is a mapping with a `nodes` list")
    return document


def _absolutise_node_paths(document: dict[str, Any], source_dir: Path) -> bool:
    """Make relative node paths that name existing files absolute; ``True`` if any did."""
    changed = False
    for node in document["nodes"]:
        path = node.get("path") if isinstance(node, dict) else None
        # A bare name (`python`, `dora-echo`) is looked up on PATH by the daemon.
        if not isinstance(path, str) or "/" not in path or os.path.isabs(path):
            continue
        candidate = (source_dir / path).resolve()
        if candidate.exists():
            node["path"] = str(candidate)
            changed = True
    return changed


def _gateway_environment(document: dict[str, Any], env: Mapping[str, str]) -> bool:
    """Give every Gateway node ``env`` over its own; ``True`` if any node got it."""
    gateways = [node for node in document["nodes"] if runs_gateway(node)] if env else []
    for node in gateways:
        own = node.get("env")
        node["env"] = {**(own if isinstance(own, dict) else {}), **env}
    return bool(gateways)


def _invalid_dataflow(source: str, message: str) -> RuntimeStateError:
    return RuntimeStateError(
        "SKILL_DATAFLOW_INVALID", f"{source}: {message}", details={"file": source}
    )


def environment_digest(bundle: Path, dataflow: str, profile: str) -> str:
    """SHA-256 over the profile's dataflow path and the contents of its files.

    The files are the dataflow and every regular file under ``profiles/<profile>/`` of the
    bundle (when that directory exists), each named by its bundle-relative path, so the
    digest changes when any byte, name or the selected dataflow changes and is the same
    for the same bundle in any home.
    """
    files = {dataflow: bundle / dataflow}
    profile_dir = bundle / "profiles" / profile
    if profile_dir.is_dir():
        for path in profile_dir.rglob("*"):
            if path.is_file() and not path.is_symlink():
                files[path.relative_to(bundle).as_posix()] = path
    digest = hashlib.sha256(DIGEST_DOMAIN)
    digest.update(b"dataflow\0" + dataflow.encode() + b"\0")
    for relative in sorted(files):
        content = hashlib.sha256(files[relative].read_bytes()).hexdigest()
        digest.update(b"file\0" + relative.encode() + b"\0" + content.encode() + b"\0")
    return digest.hexdigest()


def preflight_problems(
    bundle: Path,
    profile: Profile,
    environ: Mapping[str, str],
    search_path: str,
    *,
    entrypoints: Collection[str],
) -> dict[str, list[str]]:
    """What the profile needs and this host lacks, by kind (empty when ready to start).

    Kinds: ``dataflow`` (the file is missing), ``binaries`` (a ``required_binaries`` entry
    that is not the ``entrypoint`` of one of the skill's node-artifact locks, PhyAgentOS's
    meaning of the field; the locks' entrypoints are ``entrypoints``), ``commands`` (a
    bare node ``path:`` of the dataflow, such as ``python``, not found on
    ``search_path``: what a skill needs on ``PATH`` is read from
    its dataflow, not declared), ``assets`` (missing in the bundle) and ``environment``
    (unset or empty in ``environ``).
    """
    dataflow = bundle / profile.dataflow
    available = set(entrypoints)
    problems = {
        "dataflow": [] if dataflow.is_file() else [profile.dataflow],
        "binaries": [b for b in profile.required_binaries if b not in available],
        "commands": [
            c for c in dataflow_commands(dataflow) if shutil.which(c, path=search_path) is None
        ],
        "assets": [a for a in profile.required_assets if not (bundle / a).exists()],
        "environment": [v for v in profile.required_environment if not environ.get(v)],
    }
    return {kind: missing for kind, missing in problems.items() if missing}


def dataflow_commands(dataflow: Path) -> list[str]:
    """The bare command names (no ``/``, no placeholder) the dataflow's nodes run, sorted.

    Dora's daemon looks these up on its ``PATH``; ``dynamic`` (a node that attaches itself)
    is not a command. A missing or unreadable dataflow has none: the ``dataflow`` kind and
    the launch copy report it.
    """
    try:
        document = strict_yaml.load(dataflow.read_text(encoding="utf-8"), aliases=True)
    except (OSError, UnicodeDecodeError, strict_yaml.YAMLRefused):
        return []
    nodes = document.get("nodes") if isinstance(document, dict) else None
    commands: set[str] = set()
    for node in nodes if isinstance(nodes, list) else []:
        path = node.get("path") if isinstance(node, dict) else None
        if isinstance(path, str) and path and "/" not in path and "$" not in path:
            commands.add(path)
    commands.discard("dynamic")
    return sorted(commands)
