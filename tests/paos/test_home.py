from pathlib import Path

from paos.home import PaosHome, open_service


def test_the_home_comes_from_the_flag_the_environment_or_the_default(tmp_path: Path):
    env = {"DORAFORGE_HOME": str(tmp_path / "env"), "HOME": str(tmp_path)}
    assert PaosHome.from_environment(env).root == tmp_path / "env"
    assert PaosHome.from_environment(env, explicit=tmp_path / "flag").root == tmp_path / "flag"
    default = PaosHome.from_environment({"HOME": str(tmp_path)})
    assert default.root == tmp_path / ".doraforge"
    assert default.store_path.name == "paos.db"


def test_open_service_creates_the_store_and_workspace(tmp_path: Path):
    service = open_service(PaosHome(tmp_path / "home"))
    try:
        assert service.store.path.exists()
        assert service.workspace.is_dir()
        assert service.store.active_task() is None
    finally:
        service.store.close()
