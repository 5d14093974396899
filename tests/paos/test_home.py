from pathlib import Path

from paos.home import PaosHome, open_service


def test_the_home_comes_from_the_environment_or_the_user_data_dir(tmp_path: Path):
    assert PaosHome.from_environment({"DORAFORGE_PAOS_HOME": str(tmp_path)}).root == tmp_path
    default = PaosHome.from_environment({"XDG_DATA_HOME": str(tmp_path / "data")})
    assert default.root == tmp_path / "data" / "doraforge" / "paos"
    assert default.store_path.name == "paos.db"


def test_open_service_creates_the_store_and_workspace(tmp_path: Path):
    service = open_service(PaosHome(tmp_path / "home"))
    try:
        assert service.store.path.exists()
        assert service.workspace.is_dir()
        assert service.store.active_task() is None
    finally:
        service.store.close()
