"""Benchmark: installing a ~50 MB skill bundle against the ``tar`` + ``sha256sum`` floor.

Measured in one run, on real files in a temporary directory:
  * a deterministic bundle (seeded): a valid ``skill.yaml``, ``SKILL.md``, 2,000 small
    files of 1-16 KiB and three 10 MiB files of mildly compressible data, packed with
    ``doraforge.skill_runtime.archive.pack``;
  * ``extract`` into a fresh directory: the install core (every member check, hashing
    while writing, the inventory match);
  * the floor, in the same run: ``tar -xzf`` into a fresh directory followed by
    ``sha256sum`` over every extracted file, as one shell pipeline;
  * rounds alternate between the two and medians are reported;
  * the full ``Installer.install`` of the packed file into a fresh PAOS home (cache
    copy, extraction, swap, receipt), informational.
  * the runtime start-to-ready time of the shipped ``skills/pick-place`` sim profile:
    packed, installed into a fresh PAOS home, then ``RuntimeManager.start`` (private Dora
    coordinator and daemon up, dataflow launched, every required tool ready) and ``stop``,
    ``--runtime-rounds`` times, informational.
The last line printed is one JSON object.

    python bench/install.py [--rounds 5] [--small-files 2000] [--large-mib 10]
                            [--runtime-rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from doraforge.paos.home import PaosHome
from doraforge.skill_runtime.archive import extract, pack
from doraforge.skill_runtime.dora_run import exit_on_sigterm, free_port
from doraforge.skill_runtime.installer import Installer
from doraforge.skill_runtime.runtime import RuntimeManager

SKILL_YAML = """\
manifest_version: 2
name: bench-skill
version: 1.0.0
description: a synthetic bundle for the install benchmark
gateway_url: http://127.0.0.1:9299
required_tools: [arm.home]
profiles:
  sim:
    dataflow: dataflow.yml
    startup_timeout_s: 30
"""
# Sixteen symbols: random bytes mapped onto them compress to about half, like typical
# model weights or meshes rather than zeros (too easy) or noise (incompressible).
_MILD = bytes.maketrans(bytes(range(256)), bytes(b"etaoinshrdlucmfw"[i % 16] for i in range(256)))
FLOOR = (
    "tar -xzf {archive} -C {dest} && find {dest} -type f -print0 | xargs -0 sha256sum >/dev/null"
)


def build_bundle(root: Path, small_files: int, large_mib: int, seed: int = 5) -> int:
    """Write the synthetic bundle; return its total file bytes."""
    rng = random.Random(seed)
    root.mkdir()
    (root / "skill.yaml").write_text(SKILL_YAML)
    (root / "SKILL.md").write_text("# Bench skill\n\nSynthetic.\n")
    (root / "dataflow.yml").write_text("nodes: []\n")
    total = 0
    for index in range(small_files):
        folder = root / "assets" / f"group{index % 40:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        data = rng.randbytes(rng.randint(1024, 16 * 1024)).translate(_MILD)
        (folder / f"part{index:05d}.dat").write_bytes(data)
        total += len(data)
    (root / "models").mkdir()
    for index in range(3):
        data = rng.randbytes(large_mib * 1024 * 1024).translate(_MILD)
        (root / "models" / f"weights{index}.bin").write_bytes(data)
        total += len(data)
    return total


def _timed(action: Callable[[], object]) -> float:
    # Flush the previous round's dirty pages first: otherwise writeback throttling of
    # earlier writes lands on whichever side happens to run next.
    os.sync()
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _floor(archive: Path, dest: Path) -> None:
    dest.mkdir()
    command = FLOOR.format(archive=archive, dest=dest)
    subprocess.run(["bash", "-c", command], check=True)


def _install(archive: Path, home_root: Path) -> float:
    installer = Installer(PaosHome(home_root))
    return _timed(lambda: installer.install(str(archive), yes=True))


def measure(archive: Path, workdir: Path, rounds: int) -> dict[str, Any]:
    """Alternate extract, floor and full-installer rounds; medians."""
    extract_s: list[float] = []
    floor_s: list[float] = []
    install_s: list[float] = []
    for index in range(rounds):
        target = workdir / f"extract{index}"
        extract_s.append(_timed(lambda target=target: extract(archive, target)))
        floor = workdir / f"floor{index}"
        floor_s.append(_timed(lambda floor=floor: _floor(archive, floor)))
        shutil.rmtree(target)
        shutil.rmtree(floor)
        home = workdir / f"home{index}"
        install_s.append(_install(archive, home))
        shutil.rmtree(home)
    figures: dict[str, Any] = {
        "rounds": rounds,
        "extract_median_s": round(statistics.median(extract_s), 4),
        "tar_sha256_floor_median_s": round(statistics.median(floor_s), 4),
        "extract_samples_s": [round(value, 4) for value in extract_s],
        "floor_samples_s": [round(value, 4) for value in floor_s],
    }
    figures["installer_median_s"] = round(statistics.median(install_s), 4)
    figures["install_over_tar_sha256"] = round(
        figures["extract_median_s"] / figures["tar_sha256_floor_median_s"], 3
    )
    return figures


def measure_runtime(workdir: Path, rounds: int) -> dict[str, Any]:
    """Install the sim skill once; time start-to-ready and stop ``rounds`` times."""

    source = Path(__file__).resolve().parents[1] / "skills" / "pick-place"
    home = PaosHome(workdir / "runtime-home")
    packed = pack(source, workdir / "pick-place.tar.gz")
    Installer(home).install(str(packed.path), yes=True)
    runtime = RuntimeManager(home)
    start_s: list[float] = []
    stop_s: list[float] = []
    try:
        for _ in range(rounds):
            # A free port: the skill's own 9201 may be taken by a demo or a started skill.
            start_s.append(_timed(lambda: runtime.start("pick-place", "sim", port=free_port())))
            stop_s.append(_timed(lambda: runtime.stop("pick-place")))
    finally:
        # Interrupted between a start and its stop: nothing of the run may outlive it.
        state = runtime.status("pick-place")
        if state is not None and state.live:
            runtime.stop("pick-place", force=True)
    return {
        "runtime_start_to_ready_s": round(statistics.median(start_s), 3),
        "runtime_stop_s": round(statistics.median(stop_s), 3),
        "runtime_start_samples_s": [round(value, 3) for value in start_s],
    }


def main() -> int:
    # Killed by `timeout` or a CI runner, a started skill runtime still stops.
    exit_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--small-files", type=int, default=2000)
    parser.add_argument("--large-mib", type=int, default=10)
    parser.add_argument("--runtime-rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="doraforge-bench-install-") as tmp:
        workdir = Path(tmp)
        print("building the bundle ...", flush=True)
        file_bytes = build_bundle(workdir / "bundle", args.small_files, args.large_mib)
        packed = pack(workdir / "bundle", workdir / "bundle.tar.gz")
        print(f"packed {len(packed.files)} files, {packed.size} bytes; timing ...", flush=True)
        figures = measure(packed.path, workdir, args.rounds)
        if args.runtime_rounds > 0:
            print("timing the sim skill runtime start-to-ready ...", flush=True)
            figures |= measure_runtime(workdir, args.runtime_rounds)
    report = {
        "benchmark": "install",
        "bundle": {
            "files": len(packed.files),
            "file_bytes": file_bytes,
            "archive_bytes": packed.size,
        },
        **figures,
        "targets": {
            "install_over_tar_sha256": {
                "value": figures["install_over_tar_sha256"],
                "limit": 1.3,
                "better": "lower",
            },
        },
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: what it started has been stopped
        sys.exit("interrupted; the benchmark stopped what it started")
