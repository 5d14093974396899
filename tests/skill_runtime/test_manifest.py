"""Manifest v2: strict validation whose errors name the file and the dotted field."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from doraforge.skill_runtime.errors import ManifestError
from doraforge.skill_runtime.manifest import (
    load_manifest,
    manifest_sha256,
    parse_manifest,
    skill_document_sha256,
)

VALID = """\
manifest_version: 2
name: pick-place
version: 1.2.3-rc.1
description: pick and place
gateway_url: http://127.0.0.1:9201
required_tools: [arm.home, camera.capture]
profiles:
  sim:
    dataflow: profiles/sim/dataflow.yml
    startup_timeout_s: 90
    required_binaries: [python]
    required_assets: [profiles/sim/gateway.yml]
    required_environment: [HOME]
    environment: {LOG_LEVEL: WARNING}
    required_tools: [world.scene_state]
verification:
  mode: enforce
  replan_budget: 1
artifacts:
  resolver: registry
  nodes:
    arm-driver:
      artifact_id: arm-driver
      version: 0.3.0
      platform: linux
      arch: x86_64
      artifact_type: executable_tar_gz
      entrypoint: bin/arm-driver
      sha256: "%s"
""" % ("a" * 64)


SIM = "profiles.sim"
NODE = ("artifacts", "nodes", "arm-driver")


def _raw() -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(VALID)
    return raw


def _error(text: str) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(text, "bundle/skill.yaml")
    assert caught.value.code == "SKILL_MANIFEST_INVALID"
    assert "bundle/skill.yaml" in caught.value.message
    assert caught.value.details["file"] == "bundle/skill.yaml"
    return caught.value


def _field_error(raw: dict[str, Any]) -> str:
    error = _error(yaml.safe_dump(raw))
    field: str = error.details["field"]
    assert field in error.message
    return field


def test_valid_manifest_parses_with_defaults() -> None:
    manifest = parse_manifest(VALID, "skill.yaml")
    assert manifest.name == "pick-place"
    assert manifest.skill_document == "SKILL.md"
    assert manifest.profiles["sim"].startup_timeout_s == 90
    assert manifest.profiles["sim"].required_tools == ["world.scene_state"]
    assert manifest.artifacts is not None
    assert manifest.artifacts.nodes["arm-driver"].arch == "x86_64"
    assert manifest.verification == {"mode": "enforce", "replan_budget": 1}


@pytest.mark.parametrize(
    ("where", "field"),
    [
        ((), "surprise"),
        (("profiles", "sim"), "profiles.sim.surprise"),
        (("artifacts",), "artifacts.surprise"),
        (("artifacts", "nodes", "arm-driver"), "artifacts.nodes.arm-driver.surprise"),
    ],
)
def test_unknown_keys_are_rejected_at_every_level(where: tuple[str, ...], field: str) -> None:
    raw = _raw()
    target = raw
    for key in where:
        target = target[key]
    target["surprise"] = 1
    assert _field_error(raw) == field


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("manifest_version",), "2", "manifest_version"),
        (("manifest_version",), 1, "manifest_version"),
        (("version",), 1.0, "version"),
        (("name",), "Pick Place", "name"),
        (("required_tools",), "arm.home", "required_tools"),
        (("required_tools",), [], "required_tools"),
        (("required_tools",), ["a", "a"], "required_tools"),
        (("profiles",), {}, "profiles"),
        (("profiles", "sim", "startup_timeout_s"), "90", "profiles.sim.startup_timeout_s"),
        (("profiles", "sim", "startup_timeout_s"), 0, "profiles.sim.startup_timeout_s"),
        (("profiles", "sim", "startup_timeout_s"), 601, "profiles.sim.startup_timeout_s"),
        (("profiles", "sim", "environment"), {"A": 1}, "profiles.sim.environment.A"),
        (
            ("profiles", "sim", "required_environment"),
            ["1X"],
            "profiles.sim.required_environment.0",
        ),
        (("gateway_url",), "ftp://host/", "gateway_url"),
        (("gateway_url",), "http://user:pw@host/", "gateway_url"),
        (("artifacts", "resolver"), "s3", "artifacts.resolver"),
        (("artifacts", "nodes", "arm-driver", "arch"), "i386", "artifacts.nodes.arm-driver.arch"),
        (
            ("artifacts", "nodes", "arm-driver", "sha256"),
            "ABC",
            "artifacts.nodes.arm-driver.sha256",
        ),
        (("verification",), ["not", "an", "object"], "verification"),
    ],
)
def test_bad_types_and_values_name_the_field(
    path: tuple[str, ...], value: object, field: str
) -> None:
    raw = _raw()
    target = raw
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert _field_error(raw) == field


@pytest.mark.parametrize(
    "bad", ["/etc/passwd", "../up.yml", "a/../../b", "a\\b", "C:/x", "a//b", ""]
)
@pytest.mark.parametrize(
    "path",
    [
        ("profiles", "sim", "dataflow"),
        ("skill_document",),
        ("artifacts", "nodes", "arm-driver", "entrypoint"),
    ],
)
def test_unsafe_relative_paths_are_rejected(path: tuple[str, ...], bad: str) -> None:
    raw = _raw()
    target = raw
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = bad
    assert _field_error(raw) == ".".join(path)


def test_nul_in_an_asset_path_is_rejected() -> None:
    raw = _raw()
    raw["profiles"]["sim"]["required_assets"] = ["a\x00b"]
    assert _field_error(raw) == "profiles.sim.required_assets.0"


def test_duplicate_keys_are_rejected_naming_the_key() -> None:
    error = _error(VALID.replace("name: pick-place\n", "name: pick-place\nname: other\n"))
    assert error.details["field"] == "name"
    assert "duplicate" in error.message


def test_yaml_dates_are_not_json_values_in_the_verification_template() -> None:
    error = _error(VALID.replace("mode: enforce", "mode: enforce\n  when: 2024-01-01"))
    assert error.details["field"] == "verification"


def test_yes_stays_a_string_so_a_string_field_accepts_it() -> None:
    manifest = parse_manifest(VALID.replace("LOG_LEVEL: WARNING", "LOG_LEVEL: yes"), "s.yaml")
    assert manifest.profiles["sim"].environment == {"LOG_LEVEL": "yes"}


def test_aliases_are_refused() -> None:
    text = VALID.replace("required_tools: [arm.home, camera.capture]", "required_tools: &t [a]")
    error = _error(text + "x: *t\n")
    assert "aliases" in error.message


def test_deep_nesting_and_non_mappings_are_refused() -> None:
    _error(VALID + "verification: " + "[" * 100 + "]" * 100 + "\n")
    _error("- just a list\n")
    _error("key: [unclosed\n")


def test_load_manifest_reads_skill_yaml_and_requires_the_document(tmp_path: Path) -> None:
    (tmp_path / "skill.yaml").write_text(VALID)
    with pytest.raises(ManifestError) as caught:
        load_manifest(tmp_path)
    assert caught.value.details == {"file": str(tmp_path / "skill.yaml"), "field": "skill_document"}
    (tmp_path / "SKILL.md").write_text("# Skill\n")
    manifest = load_manifest(tmp_path)
    assert manifest_sha256(tmp_path) == hashlib.sha256(VALID.encode()).hexdigest()
    expected = hashlib.sha256(b"# Skill\n").hexdigest()
    assert skill_document_sha256(tmp_path, manifest) == expected


def test_load_manifest_refuses_a_missing_or_linked_file(tmp_path: Path) -> None:
    with pytest.raises(ManifestError):
        load_manifest(tmp_path)
    real = tmp_path / "real.yaml"
    real.write_text(VALID)
    (tmp_path / "skill.yaml").symlink_to(real)
    with pytest.raises(ManifestError) as caught:
        load_manifest(tmp_path)
    assert "not a regular file" in caught.value.message


def test_the_example_skill_manifest_is_valid() -> None:
    manifest = load_manifest(Path(__file__).resolve().parents[2] / "skills" / "pick-place")
    assert manifest.manifest_version == 2
    # The contract is in verification.yaml; skill.yaml carries only what PhyAgentOS accepts.
    assert manifest.verification is not None
    assert manifest.verification["mode"] == "enforce"
    raw = yaml.safe_load((manifest_dir() / "skill.yaml").read_text())
    assert "verification" not in raw
    assert all("required_binaries" not in profile for profile in raw["profiles"].values())


def manifest_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "skills" / "pick-place"


LEGACY = VALID
MODERN = VALID.replace("verification:\n  mode: enforce\n  replan_budget: 1\n", "")


def _bundle_dir(root: Path, manifest: str, verification: str | None) -> Path:
    root.mkdir(exist_ok=True)
    (root / "skill.yaml").write_text(manifest)
    (root / "SKILL.md").write_text("# Skill\n")
    if verification is not None:
        (root / "verification.yaml").write_text(verification)
    return root


def test_verification_yaml_beside_the_manifest_is_the_contract(tmp_path: Path) -> None:
    bundle = _bundle_dir(tmp_path, MODERN, "mode: enforce\nsuccess_criteria: [cube in zone]\n")
    manifest = load_manifest(bundle)
    assert manifest.verification == {"mode": "enforce", "success_criteria": ["cube in zone"]}
    assert load_manifest(_bundle_dir(tmp_path / "none", MODERN, None)).verification is None


def test_the_deprecated_key_in_skill_yaml_still_reads_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="doraforge.skill_runtime.manifest"):
        manifest = load_manifest(_bundle_dir(tmp_path, LEGACY, None))
    assert manifest.verification == {"mode": "enforce", "replan_budget": 1}
    assert "deprecated" in caplog.text
    assert "verification.yaml" in caplog.text


def test_a_contract_in_both_places_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest(_bundle_dir(tmp_path, LEGACY, "mode: enforce\n"))
    assert caught.value.code == "SKILL_MANIFEST_INVALID"
    assert "delete `verification` from skill.yaml" in caught.value.message


@pytest.mark.parametrize(
    "text",
    [
        "- not a mapping\n",
        "mode: enforce\nmode: off\n",
        "when: 2025-01-01\n",
        "a: &x [1]\nb: *x\n",
        "x: " + "[" * 100 + "]" * 100 + "\n",
        "x: .nan\n",
    ],
)
def test_a_hostile_verification_yaml_is_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest(_bundle_dir(tmp_path, MODERN, text))
    assert caught.value.details["file"] == str(tmp_path / "verification.yaml")


def test_a_linked_verification_yaml_is_refused(tmp_path: Path) -> None:
    bundle = _bundle_dir(tmp_path, MODERN, None)
    (tmp_path / "elsewhere.yaml").write_text("mode: enforce\n")
    (bundle / "verification.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    with pytest.raises(ManifestError, match="not a regular file"):
        load_manifest(bundle)
