"""Skill bundles both ways between doraforge and a real PhyAgentOS 1.1.1.

* What ``doraforge skill pack skills/pick-place`` writes is accepted by PhyAgentOS's own
  ``ArchiveValidator``, ``load_manifest`` and ``SkillInstaller`` (into a temporary
  PhyAgentOS home), and its ``SkillEnvironmentBuilder`` finds every ``required_binaries``
  entry (none: doraforge's ``python`` comes from the dataflow, not from that field).
* An archive built the way PhyAgentOS reads one (PhyAgentOS 1.1.1 ships no packer: its
  ``.paos-manifest.json`` inventory with ``files`` as ``{path: sha256}``, the payload at
  the root) passes PhyAgentOS's validator and installs with doraforge's ``Installer``.

The PhyAgentOS side runs in its own venv (:mod:`tests.peers.phyagentos`).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from doraforge.paos.home import PaosHome
from doraforge.skill_runtime.archive import verify_tree
from doraforge.skill_runtime.archive_format import ArchiveManifest
from doraforge.skill_runtime.installer import Installer
from doraforge.skill_runtime.manifest import load_manifest
from tests.paths import PROJECT_ROOT
from tests.peers import phyagentos
from tests.support.skill_copies import doraforge_pack

pytestmark = pytest.mark.e2e

PICK_PLACE = PROJECT_ROOT / "skills" / "pick-place"

#: Installs ARCHIVE with PhyAgentOS's own classes into the PhyAgentOS home HOME.
INSTALL_WITH_PHYAGENTOS = """
import json, os, shutil
from pathlib import Path
from PhyAgentOS.skill_runtime.archive import ArchiveValidator
from PhyAgentOS.skill_runtime.installer import SkillEnvironmentBuilder, SkillInstaller
from PhyAgentOS.skill_runtime.manifest import ManifestError, load_manifest
from PhyAgentOS.skill_runtime.state import RuntimeStateStore

archive, home = Path(os.environ["ARCHIVE"]), Path(os.environ["HOME"])
extracted = ArchiveValidator().extract(archive, home / "scratch" / "pick-place")
manifest = load_manifest(extracted / "skill.yaml")
state = RuntimeStateStore(home / "state")
installed = SkillInstaller(home / "skills", state_store=state).install(archive)
root = installed.bundle_root
bin_dir = SkillEnvironmentBuilder(home / "forge_runtime", state_store=state).prepare(
    installed, "sim"
)
legacy = home / "legacy" / "pick-place"
shutil.copytree(root, legacy)
with (legacy / "skill.yaml").open("a") as handle:
    handle.write("verification:\\n  mode: enforce\\n")
try:
    load_manifest(legacy / "skill.yaml")
    legacy_refusal = None
except ManifestError as exc:
    legacy_refusal = str(exc)
print(json.dumps({
    "validated": sorted(str(p.relative_to(extracted)) for p in extracted.rglob("*") if p.is_file()),
    "name": manifest.name,
    "version": manifest.version,
    "tools": list(installed.required_tools),
    "profiles": {
        name: {
            "dataflow": profile.dataflow.as_posix(),
            "required_binaries": [b.as_posix() for b in profile.required_binaries],
        }
        for name, profile in installed.profiles.items()
    },
    "installed_at": str(root),
    "installed_files": sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()),
    "bin_dir": str(bin_dir),
    "legacy_refusal": legacy_refusal,
}))
"""


def test_phyagentos_installs_a_bundle_doraforge_packed(tmp_path: Path) -> None:
    archive = tmp_path / "pick-place.tar.gz"
    packed = doraforge_pack(PICK_PLACE, archive)
    assert packed["path"] == str(archive)
    paos_home = tmp_path / "paos-home"
    paos_home.mkdir()

    seen = phyagentos.run(INSTALL_WITH_PHYAGENTOS, ARCHIVE=str(archive), HOME=str(paos_home))

    ours = load_manifest(PICK_PLACE)
    assert (seen["name"], seen["version"]) == (ours.name, ours.version)
    assert seen["tools"] == ours.required_tools
    assert seen["profiles"] == {
        name: {"dataflow": profile.dataflow, "required_binaries": []}
        for name, profile in ours.profiles.items()
    }
    assert seen["installed_at"] == str(paos_home / "skills" / "pick-place")
    # The contract travels in the bundle, in a file PhyAgentOS ignores but keeps.
    assert "verification.yaml" in seen["validated"]
    assert "verification.yaml" in seen["installed_files"]
    assert "skill.yaml" in seen["installed_files"]
    assert Path(seen["bin_dir"]).is_dir()
    # The old layout is exactly what PhyAgentOS refuses.
    assert "unknown field(s): verification" in seen["legacy_refusal"]


def _paos_shaped_archive(bundle: Path, output: Path) -> Path:
    """The bundle's files at the archive root plus ``.paos-manifest.json`` (``{path:
    sha256}``), as PhyAgentOS's ``ArchiveValidator`` documents and reads it."""
    files = {
        path.relative_to(bundle).as_posix(): path.read_bytes()
        for path in sorted(bundle.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }
    inventory = {"files": {p: hashlib.sha256(d).hexdigest() for p, d in files.items()}}
    members = {**files, ".paos-manifest.json": json.dumps(inventory).encode()}
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for path, data in members.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o755 if path.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
    output.write_bytes(gzip.compress(raw.getvalue()))
    return output


def test_doraforge_installs_an_archive_shaped_the_phyagentos_way(tmp_path: Path) -> None:
    archive = _paos_shaped_archive(PICK_PLACE, tmp_path / "paos-pick-place.tar.gz")
    paos_home = tmp_path / "paos-home"
    paos_home.mkdir()
    # PhyAgentOS itself takes this archive: it is the shape PhyAgentOS reads.
    seen = phyagentos.run(INSTALL_WITH_PHYAGENTOS, ARCHIVE=str(archive), HOME=str(paos_home))
    assert seen["name"] == "pick-place"

    home = PaosHome(tmp_path / "doraforge-home")
    result = Installer(home, runtime_state=lambda _name: None).install(str(archive), yes=True)

    assert (result.name, result.version) == ("pick-place", load_manifest(PICK_PLACE).version)
    installed = load_manifest(result.path)
    assert installed.verification == load_manifest(PICK_PLACE).verification
    inventory = ArchiveManifest.from_json((result.path / "archive-manifest.json").read_bytes(), "x")
    verify_tree(result.path, inventory)
    assert not (result.path / ".paos-manifest.json").exists()
