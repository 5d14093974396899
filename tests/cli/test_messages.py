"""Every operator-facing failure is one line with a code and what to do, and an exit code.

Run through the CLI's entry point on a real home (real SQLite store, real packed and
installed skill); nothing here needs Dora: each refusal happens before anything starts.
"""

from __future__ import annotations

import gzip
import json
import shutil
import socket
from pathlib import Path

import pytest

from doraforge.cli import main
from doraforge.paos.home import PaosHome
from doraforge.skill_runtime.dora import DoraControl
from doraforge.skill_runtime.runtime_state import RuntimeState, utc_now, write_state
from doraforge.skills import source as skill_source

SKILL = "pick-place"


def run(capsys: pytest.CaptureFixture[str], home: Path, *argv: str) -> tuple[int, str, str]:
    code = main(["--home", str(home), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(err: str) -> str:
    """The single stderr line of a failure (the assertion fails on any other shape)."""
    assert err.endswith("\n")
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    return err.rstrip("\n")


@pytest.fixture
def installed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A home with the shipped pick-place skill packed and installed (never started)."""
    home = tmp_path / "home"
    archive = tmp_path / f"{SKILL}.tar.gz"
    assert run(capsys, home, "skill", "pack", SKILL, "--output", str(archive))[0] == 0
    assert run(capsys, home, "skill", "install", str(archive), "--yes")[0] == 0
    return home


def test_task_get_of_an_unknown_id_names_it_and_where_the_ids_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, tmp_path, "task", "get", "task_nope")
    assert (code, out) == (1, "")
    assert one_line(err) == (
        "doraforge: PAOS_NOT_FOUND: no task 'task_nope' in this home; "
        "`doraforge task list` shows the tasks"
    )


def test_task_cancel_of_an_unknown_id_says_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, tmp_path, "task", "cancel", "task_nope")
    assert code == 1
    assert one_line(err).startswith("doraforge: PAOS_NOT_FOUND: no task 'task_nope' in this home")


def test_tools_list_for_a_skill_not_installed_lists_the_installed_ones(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, installed, "tools", "list", "--skill", "typo")
    assert code == 1
    assert one_line(err) == (
        "doraforge: SKILL_NOT_INSTALLED: skill 'typo' is not installed (installed: pick-place); "
        "install one with `doraforge skill install ARCHIVE`"
    )


def test_a_misspelled_skill_offers_the_closest_installed_name(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, installed, "skill", "start", "pick-plac")
    assert code == 1
    assert one_line(err) == (
        "doraforge: SKILL_NOT_INSTALLED: skill 'pick-plac' is not installed (installed: "
        "pick-place); did you mean 'pick-place'?; install one with "
        "`doraforge skill install ARCHIVE`"
    )


def test_tools_of_a_skill_never_started_are_refused_not_dialled_at_its_manifests_port(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, installed, "tools", "list", "--skill", SKILL)
    assert code == 1
    assert one_line(err) == (
        "doraforge: SKILL_NOT_RUNNING: skill 'pick-place' has never been started; start it "
        "with `doraforge skill start pick-place`, or name a Gateway with --gateway URL"
    )


def test_a_skill_not_installed_in_an_empty_home_says_none_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, tmp_path, "tools", "list", "--skill", "typo")
    assert code == 1
    assert "(no skill is installed)" in one_line(err)


def test_installing_a_folder_says_pack_it_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = skill_source(SKILL)
    code, _, err = run(capsys, tmp_path, "skill", "install", str(folder), "--yes")
    assert code == 1
    assert one_line(err) == (
        f"doraforge: SKILL_SOURCE_IS_DIRECTORY: {folder} is a directory, not a bundle "
        f"archive: pack it first with `doraforge skill pack {folder}` and install the "
        ".tar.gz it writes"
    )


def test_a_corrupt_archive_is_named_by_the_users_path_not_the_cache_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(gzip.compress(b"this is not a tar archive at all" * 40))
    code, _, err = run(capsys, tmp_path / "home", "skill", "install", str(bad), "--yes")
    line = one_line(err)
    assert code == 1
    assert line.startswith(f"doraforge: ARCHIVE_CORRUPT: {bad.resolve()} is not a valid tar")
    assert line.endswith("download it again or re-pack its folder with `doraforge skill pack DIR`")
    assert "cache" not in line


def test_a_file_that_is_not_gzip_is_named_by_the_users_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "notes.tar.gz"
    bad.write_text("hello", encoding="utf-8")
    code, _, err = run(capsys, tmp_path / "home", "skill", "install", str(bad), "--yes")
    assert code == 1
    assert one_line(err).startswith(
        f"doraforge: ARCHIVE_CORRUPT: {bad.resolve()} is not a gzip file; download it again"
    )


def test_start_without_a_profile_lists_the_profiles(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, installed, "skill", "start", SKILL)
    assert code == 1
    assert one_line(err) == (
        "doraforge: SKILL_PROFILE_REQUIRED: pick-place has several profiles: choose one with "
        "--profile (hardware, sim, sim-openarm, sim-split)"
    )


def test_start_with_an_unknown_profile_lists_the_profiles(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, installed, "skill", "start", SKILL, "--profile", "simm")
    assert code == 1
    assert one_line(err) == (
        "doraforge: SKILL_PROFILE_UNKNOWN: pick-place has no profile 'simm' "
        "(its profiles: hardware, sim, sim-openarm, sim-split)"
    )


def test_status_of_a_skill_not_installed_fails(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, installed, "skill", "status", "typo")
    assert (code, out) == (1, "")
    assert one_line(err).startswith("doraforge: SKILL_NOT_INSTALLED: skill 'typo' is not installed")


def test_status_of_an_installed_skill_never_started_says_so(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, installed, "--json", "skill", "status", SKILL)
    assert code == 0
    assert [(s["name"], s["state"]) for s in json.loads(out)] == [(SKILL, "never started")]


def test_task_run_on_a_skill_never_started_is_one_line_saying_how_to_start_it(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, installed, "task", "run", SKILL, "--out", str(installed / "out"))
    assert code == 1
    assert one_line(err) == (
        "doraforge: SKILL_NOT_RUNNING: forge_task_create: skill 'pick-place' has never been "
        "started; start it with `doraforge skill start pick-place`"
    )


def test_pack_prints_the_archive_path_size_and_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "p.tar.gz"
    code, out, _ = run(capsys, tmp_path, "skill", "pack", SKILL, "--output", str(archive))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("packed ")
    assert lines[0].endswith(f" files into {archive}")
    size, digest = lines[1].split(" · ")
    assert size == f"size {archive.stat().st_size} bytes"
    assert len(digest.removeprefix("sha256 ")) == 64
    assert "ArchiveFile" not in out


def test_pack_json_is_one_object(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = tmp_path / "p.tar.gz"
    code, out, _ = run(capsys, tmp_path, "--json", "skill", "pack", SKILL, "--output", str(archive))
    assert code == 0
    assert set(json.loads(out)) == {"path", "sha256", "size"}


def test_installing_a_local_file_does_not_say_downloading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "p.tar.gz"
    run(capsys, tmp_path, "skill", "pack", SKILL, "--output", str(archive))
    code, out, err = run(capsys, tmp_path / "home", "skill", "install", str(archive), "--yes")
    assert code == 0
    assert "downloading" not in err + out
    assert out.startswith("installed pick-place 1.0.0 into ")


def test_installing_lists_the_hook_and_node_commands_the_skill_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "p.tar.gz"
    run(capsys, tmp_path, "skill", "pack", SKILL, "--output", str(archive))
    code, out, _ = run(capsys, tmp_path / "home", "skill", "install", str(archive), "--yes")
    assert code == 0
    lines = out.splitlines()
    assert lines[1:3] == ["`skill start` runs, as your user:", "  hook (bundle): bash start.sh"]
    assert "  sim/world (path): python -m doraforge.nodes.world" in lines
    assert "  hardware/world (path): robot-adapter" in lines


def test_a_bundle_running_bin_bash_installs_only_with_allow_external_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "shell"
    shutil.copytree(skill_source(SKILL), bundle)
    dataflow = bundle / "profiles" / "sim" / "dataflow.yml"
    dataflow.write_text(
        dataflow.read_text()
        .replace("args: -m doraforge.nodes.camera", "args: -c id")
        .replace("path: python\n    args: -c id", "path: /bin/bash\n    args: -c id")
    )
    archive = tmp_path / "shell.tar.gz"
    run(capsys, tmp_path, "skill", "pack", str(bundle), "--output", str(archive))
    home = tmp_path / "home"

    code, out, err = run(capsys, home, "skill", "install", str(archive), "--yes")
    assert (code, out) == (1, "")
    assert one_line(err).startswith(
        "doraforge: SKILL_INSTALL_EXTERNAL_COMMAND: the bundle runs commands from outside "
        "itself (sim/camera runs /bin/bash)"
    )
    assert "--allow-external-commands" in err

    argv = ("skill", "install", str(archive), "--yes", "--allow-external-commands")
    code, out, _ = run(capsys, home, *argv)
    assert code == 0
    assert "  sim/camera (external): /bin/bash -c id" in out.splitlines()


def test_serve_on_a_busy_port_names_the_port_and_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        code, _, err = run(capsys, tmp_path, "serve", "--port", str(port))
    assert code == 1
    assert one_line(err) == (
        f"doraforge: REGISTRY_PORT_BUSY: port {port} on 127.0.0.1 is in use; pass --port N "
        "(0 picks a free one) or stop what holds it"
    )


def test_logs_of_a_skill_not_installed_fail_naming_the_installed_ones(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, installed, "skill", "logs", "typo")
    assert code == 1
    assert one_line(err).startswith(
        "doraforge: SKILL_NOT_INSTALLED: skill 'typo' is not installed (installed: pick-place)"
    )


def test_logs_of_a_skill_never_started_say_how_to_start_it(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, installed, "skill", "logs", SKILL, "--node", "gateway")
    assert code == 1
    assert one_line(err) == (
        "doraforge: SKILL_NOT_RUNNING: skill 'pick-place' has never been started, so it has "
        "no logs yet; start it with `doraforge skill start pick-place`"
    )


def _stopped_with_logs(home: Path) -> None:
    """Record ``pick-place`` as stopped after a run of its sim profile (no Dora needed:
    the node check reads the launch dataflow before ``dora logs`` is asked)."""
    now = utc_now()
    dataflow = home / "skills" / SKILL / "current" / "profiles" / "sim" / "dataflow.yml"
    assert dataflow.is_file()
    state = RuntimeState(
        name=SKILL,
        version="1.0.0",
        profile="sim",
        state="stopped",
        runtime_instance_id="rt-0123",
        dataflow_name=SKILL,
        dataflow_uuid="01a2534f-5b12-75e5-80fc-f3e90b398c57",
        coordinator_port=40001,
        gateway_url="http://127.0.0.1:9201",
        launch_dataflow=str(dataflow),
        started_at=now,
        updated_at=now,
    )
    write_state(PaosHome(home).runtime_dir, state)


@pytest.mark.parametrize("follow", [[], ["--follow"]])
def test_logs_of_a_misspelled_node_offer_the_closest_and_list_the_nodes(
    installed: Path, capsys: pytest.CaptureFixture[str], follow: list[str]
) -> None:
    _stopped_with_logs(installed)
    code, out, err = run(capsys, installed, "skill", "logs", SKILL, "--node", "gatway", *follow)
    assert (code, out) == (1, "")
    assert one_line(err) == (
        "doraforge: SKILL_NODE_NOT_FOUND: skill 'pick-place' has no node 'gatway'; did you "
        "mean 'gateway'?; its nodes: gateway, world, arm, gripper, camera"
    )


def test_hidden_diagnostics_of_one_node_name_the_command_showing_that_nodes(
    installed: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _stopped_with_logs(installed)
    diagnostic = {"node_id": "world", "target": "dora_node_api::x", "message": "queue full"}
    own = {"node_id": "world", "target": "world", "message": "scene ready"}
    lines = "".join(json.dumps(line) + "\n" for line in (diagnostic, own))
    monkeypatch.setattr(DoraControl, "logs", lambda *_a, **_k: lines)
    code, out, _ = run(capsys, installed, "skill", "logs", SKILL, "--node", "world")
    assert code == 0
    assert "world: scene ready" in out
    assert (
        "(1 lines of Dora's own diagnostics hidden; "
        "`doraforge skill logs pick-place --node world --all` shows them)"
    ) in out.splitlines()


def test_an_install_nobody_can_confirm_shows_what_it_would_run_then_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / f"{SKILL}.tar.gz"
    assert run(capsys, tmp_path / "home", "skill", "pack", SKILL, "--output", str(archive))[0] == 0
    code, out, err = run(capsys, tmp_path / "home", "skill", "install", str(archive))
    assert code == 1
    assert one_line(err) == (
        "doraforge: SKILL_INSTALL_NOT_CONFIRMED: installation of pick-place 1.0.0 was not "
        "confirmed (use --yes)"
    )
    assert out.startswith("pick-place 1.0.0 runs, as your user:\n  hook (bundle): bash start.sh\n")
    assert "  sim/world (path): python -m doraforge.nodes.world\n" in out
    assert "Install skill" not in out


def test_a_name_that_is_no_skill_name_says_what_names_are(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, installed, "tools", "list", "--skill", "Typo")
    assert code == 1
    assert one_line(err) == (
        "doraforge: SKILL_NAME_INVALID: 'Typo' is not a skill name: names are lowercase "
        "letters, digits, '.', '_' and '-' (installed: pick-place)"
    )


def test_a_second_active_task_names_the_one_that_holds_the_slot(tmp_path: Path) -> None:
    from doraforge.paos.store import AgentTaskStore, TaskSlotTaken

    store = AgentTaskStore(tmp_path / "paos.db")
    store.put_binding("bind_1", "0" * 64, {"skill": SKILL})
    held = store.create_task(
        task_id="task_1", revision_id="rev_1", binding_id="bind_1", goal="g", contract={}
    )
    with pytest.raises(TaskSlotTaken) as caught:
        store.create_task(
            task_id="task_2", revision_id="rev_2", binding_id="bind_1", goal="g", contract={}
        )
    store.close()
    assert caught.value.message == (
        f"AgentTask {held.task_id} is still active; finalize it or cancel it first "
        f"(`doraforge task cancel {held.task_id}`)"
    )
