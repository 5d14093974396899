"""The console's page table matches the pages it ships: every page module, the shell's
route for it, the nav's label, and the sections the page really shows."""

from __future__ import annotations

import re

from doraforge.console.navigation import PAGES, entries
from doraforge.console.shell import static_files

FILES = static_files()
_IMPORT = re.compile(r'import \* as (\w+) from "\./pages/([\w-]+\.js)";')
_PAGES_BLOCK = re.compile(r"const PAGES = \{(.*?)\};", re.DOTALL)
_PAGE_ENTRY = re.compile(r'^\s*(?:"([\w-]+)":\s*(\w+)|(\w+)),?\s*$', re.MULTILINE)
_NAV_LINK = re.compile(r'<a href="#/([\w-]+)">([^<]+?)\s*(?:<|$)', re.MULTILINE)


def _shell_routes() -> dict[str, str]:
    """The route name -> page module table of ``app.js``'s ``PAGES``."""
    app = FILES["js/app.js"].decode()
    modules = dict(_IMPORT.findall(app))
    block = _PAGES_BLOCK.search(app)
    assert block is not None, "app.js no longer has a PAGES table"
    routes = {}
    for quoted, identifier, bare in _PAGE_ENTRY.findall(block.group(1)):
        routes[quoted or bare] = modules[identifier or bare]
    return routes


def test_every_page_module_the_console_ships_is_in_the_table() -> None:
    shipped = {name.removeprefix("js/pages/") for name in FILES if name.startswith("js/pages/")}
    assert shipped == {page.module for page in PAGES}
    assert len(PAGES) == len({page.name for page in PAGES})


def test_each_page_has_the_route_the_shell_gives_its_module() -> None:
    assert _shell_routes() == {page.name: page.module for page in PAGES}


def test_each_page_has_the_label_the_nav_shows() -> None:
    nav = dict(_NAV_LINK.findall(FILES["index.html"].decode()))
    assert nav == {page.name: page.label for page in PAGES}


def test_each_listed_section_is_a_heading_its_page_renders() -> None:
    for page in PAGES:
        source = FILES[f"js/pages/{page.module}"].decode()
        for section in page.sections:
            assert re.search(rf'h\("h[23]", \{{[^}}]*\}}, [`"]{re.escape(section)}', source), (
                f"{page.module} renders no {section!r} heading"
            )


def test_the_entries_route_into_the_console_shell() -> None:
    pages = entries()
    assert [entry.route for entry in pages] == [f"/console/#/{page.name}" for page in PAGES]
    assert {entry.kind for entry in pages} == {"page"}
    assert all(entry.aliases and entry.description for entry in pages)
