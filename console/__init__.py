"""The operator's web console, served by ``doraforge serve`` beside the registry.

Hand-written static pages (HTML, CSS and vanilla ES modules shipped as package data, no
build step, nothing fetched from elsewhere) and small JSON routes under ``/console/api``.
The pages are served without a token (they hold no data); every JSON route is behind the
registry's transport guard and its bearer token. The browser never names a URL or holds a
Gateway token: the console server dials the installed skill's recorded Gateway itself.

Public names: :class:`Console` (what the routes read, as ``app.state.console``),
:data:`ROUTES` (the JSON route table), :class:`ShellMiddleware` (the static shell) and
:func:`mount`, which serves all of it on a registry app.
"""

from __future__ import annotations

from doraforge.console.routes import ROUTES, mount
from doraforge.console.shell import ShellMiddleware
from doraforge.console.state import Console

__all__ = ["ROUTES", "Console", "ShellMiddleware", "mount"]
