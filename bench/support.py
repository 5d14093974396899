"""Shared pieces of the benchmarks: percentiles, latency loops, node processes, floor and
subject measured in alternating rounds, and stopping what a benchmark started."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import aiohttp
import httpx
import psutil

from doraforge.skill_runtime.dora_run import exit_on_sigterm


def summary(samples_s: list[float]) -> dict[str, float]:
    """p50/p99/mean of latencies given in seconds, reported in milliseconds."""
    ordered = sorted(samples_s)
    return {
        "n": len(ordered),
        "p50_ms": round(ordered[len(ordered) // 2] * 1000, 4),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 4),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 4),
    }


def sequential_latencies(
    client: httpx.Client, url: str, body: dict[str, Any], n: int
) -> list[float]:
    """Time ``n`` sequential POSTs; every answer must be 200 or the run is void."""
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        response = client.post(url, json=body)
        samples.append(time.perf_counter() - started)
        if response.status_code != 200:
            raise RuntimeError(f"benchmark request failed: {response.status_code} {response.text}")
    return samples


async def concurrent_throughput(
    base_url: str,
    path: str,
    body: dict[str, Any],
    clients: int,
    per_client: int,
    *,
    headers: Mapping[str, str] | None = None,
) -> dict[str, float]:
    """Requests per second with ``clients`` concurrent keep-alive clients, each request
    also carrying ``headers`` (the Gateway's ``Authorization``).

    The load generator is aiohttp (C-accelerated HTTP parsing): on 2 shared cores an
    httpx client spent ~850 us of CPU per request, more than the Gateway itself, and
    would have measured the client rather than the server.
    """
    payload = json.dumps(body).encode()
    json_type = {"content-type": "application/json"}
    failures = 0

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal failures
        for _ in range(per_client):
            async with session.post(path, data=payload, headers=json_type) as response:
                await response.read()
                failures += response.status != 200

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(
        base_url, connector=connector, headers=dict(headers or {})
    ) as session:
        await asyncio.gather(*(worker_warmup(session, path, payload) for _ in range(clients)))
        started = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(clients)))
        elapsed = time.perf_counter() - started
    total = clients * per_client
    return {
        "requests": total,
        "failures": failures,
        "seconds": round(elapsed, 3),
        "qps": round(total / elapsed, 1),
    }


async def worker_warmup(session: aiohttp.ClientSession, path: str, payload: bytes) -> None:
    """Open a keep-alive connection before timing."""
    headers = {"content-type": "application/json"}
    async with session.post(path, data=payload, headers=headers) as response:
        await response.read()


def wait_http(
    url: str,
    timeout_s: float,
    label: str,
    *,
    headers: Mapping[str, str] | None = None,
    log: Path | None = None,
    running: Callable[[], bool] | None = None,
) -> None:
    """Wait (bounded, with a progress line) until ``url`` answers 200 to ``headers``; a
    timeout names the last answer and ends with the tail of ``log`` (the run's output).
    ``running`` says whether what should answer is still alive: once it is not, stop
    waiting at once."""
    started = time.monotonic()
    last = "no answer"
    while time.monotonic() - started < timeout_s:
        if running is not None and not running():
            last += "; it stopped running"
            break
        try:
            status = httpx.get(url, headers=headers, timeout=1).status_code
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
        else:
            if status == 200:
                print(f"  {label}: up", flush=True)
                return
            last = f"HTTP {status}"
        time.sleep(0.1)
    tail = ""
    if log is not None and log.exists():
        tail = "; the run's log ends:\n" + log.read_text(errors="replace")[-3000:]
    waited = time.monotonic() - started
    raise TimeoutError(f"{label} did not answer {url} in {waited:.0f} s (last: {last}){tail}")


def wait_json(fetch: Callable[[], Any], accept: Callable[[Any], bool], timeout_s: float) -> Any:
    """Poll ``fetch`` until ``accept`` holds, within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = fetch()
        if accept(value):
            return value
        time.sleep(0.05)
    raise TimeoutError("condition not reached in time")


def find_node(root_pid: int, marker: str) -> psutil.Process:
    """The descendant process of ``root_pid`` whose command line contains ``marker``."""
    for child in psutil.Process(root_pid).children(recursive=True):
        try:
            if marker in " ".join(child.cmdline()):
                return child
        except psutil.NoSuchProcess:
            continue
    raise LookupError(f"no node process with {marker!r} under pid {root_pid}")


def run(coroutine: Awaitable[Any]) -> Any:
    """Run a coroutine on a fresh loop."""
    return asyncio.run(coroutine)  # type: ignore[arg-type]


async def concurrent_calls(
    base_url: str,
    path: str,
    body: Callable[[int, int], dict[str, Any]],
    clients: int,
    seconds: float,
    *,
    headers: Mapping[str, str] | None = None,
    accept: Callable[[Any], bool] = lambda _answer: True,
    max_per_client: int = 100_000,
) -> dict[str, Any]:
    """Requests per second and each request's latency with ``clients`` concurrent
    keep-alive clients sending for ``seconds`` (each at most ``max_per_client`` times).

    Unlike :func:`concurrent_throughput` every request may differ: client ``c``'s ``i``-th
    sends ``body(c, i)`` (``i = -1``: its untimed warm-up), as a registry call's
    ``requestId`` is its idempotency key (the same body twice is answered from the
    retained result, not run). A request fails unless it answers 200 with a JSON body that
    ``accept`` holds for. Bounded in time, so a slow subject costs the same wall time as a
    fast one and only shows fewer requests."""
    json_type = {"content-type": "application/json"}
    latencies: list[float] = []
    failures = 0

    async def send(session: aiohttp.ClientSession, client: int, index: int) -> None:
        nonlocal failures
        payload = json.dumps(body(client, index)).encode()
        started = time.perf_counter()
        async with session.post(path, data=payload, headers=json_type) as response:
            raw = await response.read()
        if index >= 0:
            latencies.append(time.perf_counter() - started)
            failures += response.status != 200 or not accept(json.loads(raw))

    async def worker(session: aiohttp.ClientSession, client: int, deadline: float) -> None:
        for index in range(max_per_client):
            if time.perf_counter() >= deadline:
                return
            await send(session, client, index)

    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(
        base_url, connector=connector, headers=dict(headers or {}), timeout=timeout
    ) as session:
        await asyncio.gather(*(send(session, client, -1) for client in range(clients)))
        started = time.perf_counter()
        deadline = started + seconds
        await asyncio.gather(*(worker(session, client, deadline) for client in range(clients)))
        elapsed = time.perf_counter() - started
    return {
        "requests": len(latencies),
        "failures": failures,
        "seconds": round(elapsed, 3),
        "qps": round(len(latencies) / elapsed, 2),
        "latencies_s": latencies,
    }


def sweep_processes(root: Path) -> list[str]:
    """SIGKILL every process (not this one or its ancestors) whose command line or working
    directory lies under ``root``, a benchmark's private folder; returns their command lines.

    The last line of a benchmark's cleanup: daemons a Skill Runtime started are not its
    children, so a stop that failed half-way would otherwise leave them running."""
    mine = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    marker = str(root.resolve())
    killed = []
    for process in psutil.process_iter(["pid", "cmdline", "cwd"]):
        info = process.info
        if info["pid"] in mine:
            continue
        command = " ".join(info["cmdline"] or [])
        if marker in command or (info["cwd"] or "").startswith(marker):
            with contextlib.suppress(psutil.Error):
                process.kill()
                killed.append(command)
    return killed


# ---------------------------------------------------------------- interleaved rounds

#: One round of a floor or a subject: given the round's index, its figure (a cost: seconds
#: for the round's work, or per unit of it). An async benchmark may return an awaitable.
type RoundFn = Callable[[int], float]
type AsyncRoundFn = Callable[[int], float | Awaitable[float]]


@dataclass(frozen=True)
class Rounds:
    """The figures of a floor and its subject over the same rounds, measured alternately
    (floor, subject, floor, subject ...), so both sides see the same moments of the machine."""

    floor: tuple[float, ...]
    subject: tuple[float, ...]

    @property
    def ratios(self) -> tuple[float, ...]:
        """Subject ÷ floor of each round."""
        return tuple(s / f for f, s in zip(self.floor, self.subject, strict=True))

    @property
    def ratio(self) -> float:
        """The median of the per-round ratios: a noisy moment (another process, a disk
        flush) spoils the one round it falls in, never the figure."""
        return float(statistics.median(self.ratios))

    def median(self, side: str) -> float:
        """The median figure of ``"floor"`` or ``"subject"``."""
        return float(statistics.median(getattr(self, side)))

    def figures(
        self, floor: str, subject: str, *, scale: float = 1.0, digits: int = 3
    ) -> dict[str, Any]:
        """Per-round figures as ``{floor}_rounds`` and ``{subject}_rounds`` (times
        ``scale``), the per-round ratios and their median, for a benchmark's JSON line."""
        return {
            f"{floor}_rounds": [round(value * scale, digits) for value in self.floor],
            f"{subject}_rounds": [round(value * scale, digits) for value in self.subject],
            "ratio_rounds": [round(value, 3) for value in self.ratios],
            "ratio_median": round(self.ratio, 3),
        }


def interleave(
    floor: RoundFn,
    subject: RoundFn,
    rounds: int,
    *,
    show: Callable[[int, float, float], None] | None = None,
) -> Rounds:
    """Run ``rounds`` rounds of ``floor`` then ``subject``; ``show(index, floor, subject)``
    after each (a progress line)."""
    floors: list[float] = []
    subjects: list[float] = []
    for index in range(rounds):
        floors.append(floor(index))
        subjects.append(subject(index))
        if show is not None:
            show(index, floors[-1], subjects[-1])
    return Rounds(tuple(floors), tuple(subjects))


def rotations[K, V](
    configurations: Sequence[K],
    rounds: int,
    measure: Callable[[K, int], V],
    *,
    show: Callable[[int, K, V], None] | None = None,
) -> list[dict[K, V]]:
    """:func:`interleave` over any number of configurations: ``rounds`` rounds, each
    measuring every configuration once (``measure(configuration, index)``), the order
    rotated by one per round so each configuration takes every place in turn (none always
    runs first, on a machine still warm or cold from setup); ``show(index, configuration,
    figure)`` after each. Returns each round's figures by configuration; a :class:`Rounds`
    of two of them gives per-round ratios."""
    if not configurations:
        raise ValueError("rotations needs at least one configuration")
    measured: list[dict[K, V]] = []
    for index in range(rounds):
        shift = index % len(configurations)
        figures: dict[K, V] = {}
        for configuration in [*configurations[shift:], *configurations[:shift]]:
            figures[configuration] = measure(configuration, index)
            if show is not None:
                show(index, configuration, figures[configuration])
        measured.append(figures)
    return measured


async def interleave_async(
    floor: AsyncRoundFn,
    subject: AsyncRoundFn,
    rounds: int,
    *,
    show: Callable[[int, float, float], None] | None = None,
) -> Rounds:
    """:func:`interleave` where either side may be a coroutine function."""
    floors: list[float] = []
    subjects: list[float] = []
    for index in range(rounds):
        floors.append(await _figure(floor(index)))
        subjects.append(await _figure(subject(index)))
        if show is not None:
            show(index, floors[-1], subjects[-1])
    return Rounds(tuple(floors), tuple(subjects))


async def _figure(value: float | Awaitable[float]) -> float:
    return float(await value) if inspect.isawaitable(value) else float(value)


# ---------------------------------------------------------------- processes a benchmark starts


def run_group(command: Sequence[str], **popen: Any) -> None:
    """Run ``command`` in a process group of its own and wait for it; raise
    :class:`subprocess.CalledProcessError` if it fails.

    Interrupted while waiting (Ctrl-C, or SIGTERM under :func:`benchmark_main`), the whole
    group is killed before the interruption goes on: a shell pipeline's ``tar``, ``gzip``
    and ``sha256sum`` die with it, where ``subprocess.run`` would kill only the shell."""
    process = subprocess.Popen(list(command), start_new_session=True, **popen)
    try:
        code = process.wait()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
    if code != 0:
        raise subprocess.CalledProcessError(code, list(command))


def stop_children(grace_s: float = 3.0) -> list[str]:
    """SIGTERM every process still below this one, SIGKILL what is left after ``grace_s``;
    returns their command lines. A benchmark's last safety net: its own cleanup (a
    dataflow's stop, an MCP session's close) has already run, and anything found here is
    what that cleanup missed."""
    children = psutil.Process().children(recursive=True)
    commands = []
    for child in children:
        with contextlib.suppress(psutil.Error):
            commands.append(" ".join(child.cmdline()))
            child.terminate()
    _, alive = psutil.wait_procs(children, timeout=grace_s)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(alive, timeout=grace_s)
    return commands


def benchmark_main(main: Callable[[], int | None]) -> NoReturn:
    """Run a benchmark's ``main`` and exit with its status.

    SIGTERM (``timeout``, a CI runner, ``kill``) unwinds ``main`` as Ctrl-C does
    (:func:`~doraforge.skill_runtime.dora_run.exit_on_sigterm`), so every ``with`` and
    ``finally`` that stops a dataflow, a server or an MCP session runs; then
    :func:`stop_children` ends whatever is still below this process. An interrupted run
    ends with one line and no traceback."""
    exit_on_sigterm()
    try:
        status: int | str | None = main()
    except KeyboardInterrupt:
        status = "interrupted; the benchmark stopped what it started"
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut this short
        left = stop_children()
        if left:
            print(f"stopped {len(left)} leftover process(es): {left}", file=sys.stderr)
    sys.exit(status)
