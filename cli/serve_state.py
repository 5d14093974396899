"""Where this home's ``doraforge serve`` listens: ``<home>/serve.json`` (address, pid, start),
written once it listens and removed when it ends; read as running only while that process
lives, so a crashed serve's leftover reads as nothing running."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from doraforge.paos.home import PaosHome
from doraforge.wire.files import atomic_write_text

FILE_NAME = "serve.json"


@dataclass(frozen=True)
class ServeRecord:
    """A running serve: the URL a client dials, its process id and when it started."""

    url: str
    pid: int
    started_at: str


def path(home: PaosHome) -> Path:
    """``<home>/serve.json``."""
    return home.root / FILE_NAME


def dial_url(host: str, port: int) -> str:
    """The URL a local client dials for a server bound to ``host``: a wildcard bind is
    reached on loopback."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def write(home: PaosHome, url: str, pid: int | None = None) -> ServeRecord:
    """Record that this process (or ``pid``) serves ``home`` at ``url``."""
    record = ServeRecord(url, os.getpid() if pid is None else pid, datetime.now(UTC).isoformat())
    home.root.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path(home), json.dumps(record.__dict__, indent=2) + "\n")
    return record


def remove(home: PaosHome, pid: int | None = None) -> None:
    """Remove the record when it is this process's (or ``pid``'s): a later serve of the
    same home that replaced it keeps its own."""
    record = read(home)
    if record is not None and record.pid == (os.getpid() if pid is None else pid):
        with contextlib.suppress(FileNotFoundError):
            path(home).unlink()


def read(home: PaosHome) -> ServeRecord | None:
    """The recorded serve of ``home``, alive or not (``None``: no readable record)."""
    try:
        document = json.loads(path(home).read_text(encoding="utf-8"))
        return ServeRecord(str(document["url"]), int(document["pid"]), str(document["started_at"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def running(home: PaosHome) -> ServeRecord | None:
    """The serve of ``home`` whose process still lives, or ``None``."""
    record = read(home)
    return record if record is not None and _alive(record.pid) else None


def _alive(pid: int) -> bool:
    if pid <= 0:  # kill(0 or -n) would signal a whole process group
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True
