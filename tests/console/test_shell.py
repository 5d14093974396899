"""The console's static shell: served without the token, under a strict CSP, only the
shipped files, and still behind the Host and Origin checks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from doraforge.console.shell import CONTENT_SECURITY_POLICY, static_files
from doraforge.paos.home import PaosHome
from doraforge.registry.settings import ServerSettings
from tests.console.support import TOKEN, serving_console


@pytest.fixture
def base(tmp_path: Path) -> Iterator[httpx.Client]:
    settings = ServerSettings(token=TOKEN)
    home = PaosHome(tmp_path / "home")
    with serving_console(home, settings) as url, httpx.Client(base_url=url) as client:
        yield client


def test_the_shell_loads_without_the_token_under_a_strict_csp(base: httpx.Client) -> None:
    page = base.get("/console/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self';" in CONTENT_SECURITY_POLICY
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
    assert page.headers["x-frame-options"] == "DENY"
    scripts = re.findall(r"<script\b[^>]*>", page.text)
    assert scripts
    assert all("src=" in tag for tag in scripts)
    assert "http://" not in page.text
    assert "https://" not in page.text


def test_every_shipped_file_is_served_with_its_type_and_nothing_from_elsewhere(
    base: httpx.Client,
) -> None:
    shipped = static_files()
    assert {"index.html", "console.css", "js/app.js", "js/pages/approvals.js"} <= set(shipped)
    for name, body in shipped.items():
        answer = base.get(f"/console/static/{name}")
        assert answer.status_code == 200, name
        assert answer.content == body
        if name.endswith(".js"):
            assert answer.headers["content-type"].startswith("text/javascript")
            # Every import is relative: the pages load nothing from another origin.
            for spec in re.findall(r'from "([^"]+)"', body.decode()):
                assert spec.startswith("."), (name, spec)


@pytest.mark.parametrize(
    "path", ["/console/static/%2e%2e/routes.py", "/console/static/js/nope.js", "/console/static/"]
)
def test_a_path_outside_the_shipped_files_is_a_structured_404(
    base: httpx.Client, path: str
) -> None:
    answer = base.get(path)
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "NOT_FOUND"


def test_a_path_beside_the_shell_is_not_the_shell_and_needs_the_token(base: httpx.Client) -> None:
    answer = base.get("/console/routes.py")
    assert answer.status_code == 401


def test_the_shell_is_read_only_and_the_bare_prefix_redirects(base: httpx.Client) -> None:
    posted = base.post("/console/", json={})
    assert posted.status_code == 405
    assert posted.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
    bare = base.get("/console", follow_redirects=False)
    assert bare.status_code == 308
    assert bare.headers["location"] == "/console/"


def test_the_shell_still_refuses_a_foreign_origin_and_a_rebinding_host(base: httpx.Client) -> None:
    foreign = base.get("/console/", headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403
    assert foreign.json()["error"]["code"] == "ORIGIN_NOT_ALLOWED"
    rebound = base.get("/console/", headers={"Host": "evil.example"})
    assert rebound.status_code == 403
    assert rebound.json()["error"]["code"] == "HOST_NOT_ALLOWED"
