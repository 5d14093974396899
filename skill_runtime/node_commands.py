"""What code a bundle runs (its start hook, each profile's node commands) and where each
command comes from; a command from outside the bundle and the runtime's environment is
refused unless the operator allows it."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from doraforge.skill_runtime.errors import InstallError
from doraforge.skill_runtime.launch import PLACEHOLDER, placeholder_values
from doraforge.skill_runtime.manifest import SkillManifest
from doraforge.wire import strict_yaml

#: The hook a bundle may carry; ``skill start`` runs it with ``bash`` before the dataflow.
HOOK = "start.sh"

type Origin = Literal["bundle", "runtime", "artifact", "path", "dynamic", "external"]


@dataclass(frozen=True)
class NodeCommand:
    """One node of one profile: what Dora runs for it and where that comes from."""

    profile: str
    node_id: str
    path: str
    args: str
    origin: Origin

    def shown(self) -> str:
        """``profile/node (origin): path args`` for a listing."""
        command = f"{self.path} {self.args}".strip()
        return f"{self.profile}/{self.node_id} ({self.origin}): {command}"


@dataclass(frozen=True)
class BundleCode:
    """The bundle's start hook (``None`` when it has none) and every profile's nodes."""

    hook: str | None
    nodes: list[NodeCommand] = field(default_factory=list)

    @property
    def external(self) -> list[NodeCommand]:
        """The nodes whose command lies outside the bundle and the runtime's environment."""
        return [node for node in self.nodes if node.origin == "external"]

    def lines(self) -> list[str]:
        """The listing ``skill install`` prints, one line per hook and node."""
        hook = [f"hook (bundle): bash {self.hook}"] if self.hook else []
        return hook + [node.shown() for node in self.nodes]


def bundle_code(
    bundle: Path, manifest: SkillManifest, *, runtime_bin: Path, artifacts_dir: Path
) -> BundleCode:
    """What ``bundle`` (an extracted, validated bundle) would run, profile by profile."""
    hook = HOOK if (bundle / HOOK).is_file() else None
    values = placeholder_values(
        root=bundle, runtime_bin=runtime_bin, name=manifest.name, version=manifest.version
    )
    places = _Places(_absolute(bundle), _absolute(runtime_bin), _absolute(artifacts_dir))
    nodes = [
        _command(profile, raw, (bundle / chosen.dataflow).parent, values, places)
        for profile, chosen in sorted(manifest.profiles.items())
        for raw in _nodes(bundle / chosen.dataflow)
    ]
    return BundleCode(hook, nodes)


def refuse_external(code: BundleCode, *, allowed: bool) -> None:
    """Raise :class:`InstallError` ``SKILL_INSTALL_EXTERNAL_COMMAND`` (naming the nodes and
    the flag) when a node runs a command from outside the bundle and the runtime's
    environment and the operator did not allow it."""
    outside = code.external
    if not outside or allowed:
        return
    shown = "; ".join(f"{n.profile}/{n.node_id} runs {n.path}" for n in outside)
    raise InstallError(
        "SKILL_INSTALL_EXTERNAL_COMMAND",
        f"the bundle runs commands from outside itself ({shown}); they would run as your "
        "user: install with --allow-external-commands if you trust them",
        details={"nodes": [f"{n.profile}/{n.node_id}" for n in outside]},
    )


@dataclass(frozen=True)
class _Places:
    bundle: Path
    runtime_bin: Path
    artifacts: Path


def _nodes(dataflow: Path) -> Iterator[Mapping[str, Any]]:
    try:
        document = strict_yaml.load(dataflow.read_text(encoding="utf-8"), aliases=True)
    except (OSError, UnicodeDecodeError, strict_yaml.YAMLRefused):
        return  # a missing or broken dataflow fails the start's preflight, by name
    nodes = document.get("nodes") if isinstance(document, dict) else None
    yield from (node for node in nodes or [] if isinstance(node, dict))


def _command(
    profile: str, raw: Mapping[str, Any], folder: Path, values: Mapping[str, str], places: _Places
) -> NodeCommand:
    # Shown as the dataflow spells it (placeholders kept); judged where it points.
    path, args = _text(raw.get("path")), _text(raw.get("args"))
    rendered = PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), path)
    origin = "external" if raw.get("git") is not None else _origin(rendered, folder, places)
    return NodeCommand(profile, str(raw.get("id")), path, args, origin)


def _text(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _absolute(path: Path) -> Path:
    return Path(os.path.normpath(os.path.abspath(path)))


def _origin(path: str, folder: Path, places: _Places) -> Origin:
    if path == "dynamic":
        return "dynamic"
    if not path or "$" in path:
        return "external"  # no command, or one Dora expands from variables of its own
    if "/" not in path:
        return "path"
    # Relative to the dataflow's folder, as Dora resolves it; not through symlinks, which a
    # bundle cannot hold (extraction refuses them) and the runtime's `python` is.
    target = _absolute(folder / path)
    for origin, root in (
        ("bundle", places.bundle),
        ("runtime", places.runtime_bin),
        ("artifact", places.artifacts),
    ):
        if target.is_relative_to(root):
            return origin  # type: ignore[return-value]
    return "external"
