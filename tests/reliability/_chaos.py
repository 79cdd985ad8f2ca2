"""Chaos under load: concurrent callers through ``McpAdapter`` while servers fail on purpose.

Six servers, each with one role:

==========  ================================  ==========  =========================================
server      what runs                         lifecycle   what the chaos task does to it
==========  ================================  ==========  =========================================
time        ``mcp-server-time`` (PyPI)        lazy        SIGKILL; the next call restarts it
everything  npm ``server-everything``         keep-alive  SIGKILL; the health check restarts it
memory      npm ``server-memory``             lazy        nothing: the healthy control
stalled     our fixture (stdio)               lazy        SIGSTOP for a while (hangs), then SIGCONT
flaky       our fixture (Streamable HTTP)     lazy        answers every request with 503 for a while
mute        our fixture (stdio)               lazy        SIGUSR1: closes its stdout, keeps running
==========  ================================  ==========  =========================================

Callers pick a server at random and call one of its tools, each call bounded by a deadline; a
monitor samples this process's memory and descriptors and which server processes exist. The
run ends with a settle period without faults, so that every fault has a chance to heal before
the checks. :func:`run_chaos` returns a :class:`ChaosReport`; the reliability test asserts on
it and ``bench/bench_reliability.py`` runs it for longer.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
import psutil
from mcp import Client

from pi_mcp_adapter._errors import McpAdapterError
from pi_mcp_adapter.engine import CallOutcome, McpAdapter

from ._gateway import Gateway, start_gateway

TESTS_DIR = Path(__file__).resolve().parents[1]
FIXTURES_DIR = TESTS_DIR / "fixtures"
MCP_FIXTURE = FIXTURES_DIR / "mcp_fixture.py"
NPM_MODULES = TESTS_DIR / "npm" / "node_modules" / "@modelcontextprotocol"
EVERYTHING_JS = NPM_MODULES / "server-everything" / "dist" / "index.js"
MEMORY_JS = NPM_MODULES / "server-memory" / "dist" / "index.js"
TIME_SERVER = Path(sys.executable).with_name("mcp-server-time")

REQUEST_TIMEOUT_MS = 3_000
STARTUP_TIMEOUT_MS = 20_000
HEALTH_CHECK_INTERVAL_MS = 1_000
START_TIME_SLACK_S = 1.0
"""How early ``psutil``'s start time of a process may read (see ``_Run.connected``)."""
CALL_DEADLINE_S = (REQUEST_TIMEOUT_MS + STARTUP_TIMEOUT_MS) / 1000 + 5
"""A call may have to start its server and then wait out a request timeout; beyond both (plus
slack for a loaded machine) it has hung."""

RSS_GROWTH_BOUND_BYTES = 48 * 1024 * 1024
"""Allowed growth of this process's resident memory from the warmed-up start to the end. The
Python heap keeps some growth after warm-up (allocator arenas, caches); a leak of even a few
kilobytes per call exceeds this over a run of thousands of calls."""

FD_GROWTH_BOUND = 12
"""Allowed growth of open descriptors between two quiet moments (every server connected): a
connection in the middle of a restart holds a few pipes and sockets, a leak grows without end."""

HEALTHY = ("memory",)
"""Servers the chaos task never touches: every call to them must succeed."""

MARKERS = {
    "time": "mcp-server-time",
    "everything": "server-everything",
    "memory": "server-memory",
    "stalled": "--name stalled",
    "flaky": "--name flaky",
    "mute": "--name mute",
}
"""A substring of each server process's command line."""


@dataclass(frozen=True, slots=True)
class Workload:
    """The call a caller makes to one server, and how to check the answer."""

    tool: str
    arguments: Callable[[int], dict[str, Any]]
    expected_text: Callable[[int], str | None]
    """The exact text of a good answer, or None to accept any non-error answer."""


def _echo() -> Workload:
    return Workload("echo", lambda n: {"message": f"call {n}"}, lambda n: f"Echo: call {n}")


WORKLOADS: dict[str, Workload] = {
    "time": Workload("get_current_time", lambda n: {"timezone": "UTC"}, lambda n: None),
    "everything": _echo(),
    "memory": Workload("read_graph", lambda n: {}, lambda n: None),
    "stalled": _echo(),
    "flaky": _echo(),
    "mute": _echo(),
}


@dataclass(frozen=True, slots=True)
class CallRecord:
    server: str
    caller: str
    started: float
    latency_s: float
    kind: str
    """``ok``, or the kind of error (see :func:`classify`)."""
    message: str = ""


@dataclass(frozen=True, slots=True)
class FaultRecord:
    server: str
    action: str
    """``kill``, ``hang``, ``503`` or ``close-stdout``."""
    started: float
    ended: float
    recovered_after_s: float | None = None
    """For kills and closed stdouts: how long until the server answered again."""


@dataclass(slots=True)
class Sample:
    at: float
    rss: int
    fds: int


@dataclass(slots=True)
class ChaosReport:
    duration_s: float
    calls: list[CallRecord] = field(default_factory=list)
    faults: list[FaultRecord] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    pids: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    violations: list[str] = field(default_factory=list)
    """Broken promises seen during the run (a hung call, a wrong answer, an unclear error)."""
    fds_after_warmup: int = 0
    fds_at_end: int = 0
    rss_after_warmup: int = 0
    rss_at_end: int = 0
    leftover_processes: list[str] = field(default_factory=list)
    gateway_samples: list[Sample] = field(default_factory=list)
    """The gateway process (``pi-mcp serve``), when the run has one."""
    gateway_exit_code: int | None = None

    @property
    def peak_rss(self) -> int:
        return max((s.rss for s in self.samples), default=0)

    @property
    def peak_fds(self) -> int:
        return max((s.fds for s in self.samples), default=0)

    def calls_to(self, server: str) -> list[CallRecord]:
        return [c for c in self.calls if c.server == server]

    def restarts(self, server: str) -> int:
        return max(0, len(self.pids.get(server, ())) - 1)

    def table(self) -> str:
        """The summary: per server calls, errors by kind, latency, faults and restarts."""
        header = (
            f"{'server':<14}{'calls':>7}{'ok':>7}  {'errors by kind':<44}"
            f"{'p50 ms':>8}{'p99 ms':>9}{'faults':>8}{'restarts':>9}"
        )
        lines = [header, "-" * len(header)]
        for server in sorted({c.server for c in self.calls}):
            calls = self.calls_to(server)
            lines.append(self._row(server, calls))
        lines.append(self._row("all", self.calls))
        lines.append("")
        lines.append(
            f"duration {self.duration_s:.0f} s, {len(self.calls)} calls "
            f"({len(self.calls) / max(self.duration_s, 1e-9):.0f}/s); "
            f"faults: {dict(Counter(f.action for f in self.faults))}"
        )
        lines.append(
            f"RSS after warm-up {self.rss_after_warmup / 2**20:.1f} MiB, at end "
            f"{self.rss_at_end / 2**20:.1f} MiB, peak {self.peak_rss / 2**20:.1f} MiB "
            f"(bound +{RSS_GROWTH_BOUND_BYTES / 2**20:.0f} MiB); open fds after warm-up "
            f"{self.fds_after_warmup}, at end {self.fds_at_end}, peak {self.peak_fds} "
            f"(bound +{FD_GROWTH_BOUND})"
        )
        if self.gateway_samples:
            first, last = self.gateway_samples[0], self.gateway_samples[-1]
            lines.append(
                f"gateway: RSS {first.rss / 2**20:.1f} -> {last.rss / 2**20:.1f} MiB (peak "
                f"{max(s.rss for s in self.gateway_samples) / 2**20:.1f}), open fds {first.fds}"
                f" -> {last.fds}; exit code on SIGTERM {self.gateway_exit_code}"
            )
        recoveries = [f.recovered_after_s for f in self.faults if f.recovered_after_s is not None]
        if recoveries:
            lines.append(
                f"recovery after kill/close: median {statistics.median(recoveries):.2f} s, "
                f"max {max(recoveries):.2f} s"
            )
        lines.append(
            f"violations: {len(self.violations)}; processes left: {len(self.leftover_processes)}"
        )
        return "\n".join(lines)

    def _row(self, name: str, calls: list[CallRecord]) -> str:
        kinds = Counter(c.kind for c in calls if c.kind != "ok")
        errors = ", ".join(f"{k} {n}" for k, n in kinds.most_common()) or "-"
        latencies = sorted(c.latency_s * 1000 for c in calls if c.kind == "ok")
        p50 = _percentile(latencies, 0.50)
        p99 = _percentile(latencies, 0.99)
        faults = (
            sum(1 for f in self.faults if f.server == name) if name != "all" else len(self.faults)
        )
        restarts = (
            self.restarts(name) if name != "all" else sum(self.restarts(s) for s in self.pids)
        )
        ok = sum(1 for c in calls if c.kind == "ok")
        return (
            f"{name:<14}{len(calls):>7}{ok:>7}  {errors:<44.44}"
            f"{p50:>8.1f}{p99:>9.1f}{faults:>8}{restarts:>9}"
        )


def _percentile(ordered: list[float], fraction: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def classify(outcome: CallOutcome) -> str:
    """A short name for what a call came to: ``ok`` or the kind of error."""
    if not outcome.is_error:
        return "ok"
    kind = outcome.error_kind
    if kind is None:
        return "error_result"
    if kind == "server_error":
        return "timeout" if outcome.error_code == -32001 else "server_error"
    if kind == "server_unavailable":
        message = outcome.message
        if "not available (last failed" in message:
            return "backoff"
        if "connection lost" in message or "closed" in message or "exited" in message:
            return "connection_lost"
        if "HTTP" in message:
            return "http_status"
        return "unavailable"
    return kind


def write_config(agent_dir: Path, flaky_url: str) -> Path:
    """The configuration of the six servers, as a user would write it."""

    def fixture(name: str) -> dict[str, Any]:
        return {"command": sys.executable, "args": [str(MCP_FIXTURE), "--name", name]}

    timeouts = {"requestTimeoutMs": REQUEST_TIMEOUT_MS, "startupTimeoutMs": STARTUP_TIMEOUT_MS}
    servers: dict[str, dict[str, Any]] = {
        "time": {"command": str(TIME_SERVER), "args": ["--local-timezone", "UTC"]},
        "everything": {"command": "node", "args": [str(EVERYTHING_JS)], "lifecycle": "keep-alive"},
        "memory": {
            "command": "node",
            "args": [str(MEMORY_JS)],
            "env": {"MEMORY_FILE_PATH": str(agent_dir / "memory.jsonl")},
        },
        "stalled": fixture("stalled"),
        "flaky": {"url": flaky_url},
        "mute": fixture("mute"),
    }
    config = {
        "settings": {"healthCheckIntervalMs": HEALTH_CHECK_INTERVAL_MS, "idleTimeout": 0},
        "mcpServers": {name: {**entry, **timeouts} for name, entry in servers.items()},
    }
    path = agent_dir / "mcp.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def server_processes() -> dict[str, list[psutil.Process]]:
    """Live server processes among this process's descendants, by server."""
    found: dict[str, list[psutil.Process]] = defaultdict(list)
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
            command = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "_reaper.py" in command:
            continue  # the supervisor a stdio server runs under, not the server
        for server, marker in MARKERS.items():
            if marker in command:
                found[server].append(child)
    return found


def owner_of(process: psutil.Process) -> int:
    """The pid of the adapter that runs ``process``: its parent, or its grandparent when the
    server runs under the supervisor that makes it die with the adapter."""
    parent = process.parent()
    if parent is not None and "_reaper.py" in " ".join(parent.cmdline()):
        return parent.ppid()
    return process.ppid()


def live_descendants(exclude: set[int]) -> list[psutil.Process]:
    alive = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.pid not in exclude and child.status() != psutil.STATUS_ZOMBIE:
                alive.append(child)
        except psutil.Error:
            continue
    return alive


GATEWAY_PREFIX = "gw:"
"""Targets (servers as one owner runs them) of the gateway carry this prefix: ``gw:time`` is the
gateway's own ``mcp-server-time`` process, ``time`` the in-process adapter's."""


def _split(target: str) -> tuple[bool, str]:
    """(whether the gateway owns it, the server name)."""
    if target.startswith(GATEWAY_PREFIX):
        return True, target[len(GATEWAY_PREFIX) :]
    return False, target


@dataclass
class _Run:
    adapter: McpAdapter
    report: ChaosReport
    rng: random.Random
    fault_file: Path
    started: float
    ends_at: float
    faults_end_at: float
    gateway: Gateway | None = None
    quiet: set[str] = field(default_factory=set)
    """Targets callers leave alone: a killed keep-alive server must come back by itself."""
    busy: set[str] = field(default_factory=set)
    """Targets with a fault in progress."""
    last_success: dict[str, float] = field(default_factory=dict)
    last_success_wall: dict[str, float] = field(default_factory=dict)
    """When the last successful call began, in seconds since the epoch: comparable with a
    process's start time (a call that began after a process started was not answered by the
    one before it, while one that merely ended after it may have been)."""
    last_error: dict[str, str] = field(default_factory=dict)
    """The last error each target answered: what a violation quotes."""
    call_number: int = 0

    def now(self) -> float:
        return time.monotonic() - self.started

    def calling(self) -> bool:
        """Whether callers go on: until the end, and after it while a fault's recovery is
        still watched (a kill just before the faults stop must still see its next call; on a
        loaded machine that call may come after the run's nominal end)."""
        return time.monotonic() < self.ends_at or bool(self.busy)

    def owner_pid(self, target: str) -> int:
        via_gateway, _server = _split(target)
        if via_gateway:
            assert self.gateway is not None
            return self.gateway.process.pid
        return os.getpid()

    def connected(self, target: str) -> bool:
        via_gateway, server = _split(target)
        if via_gateway:
            # The gateway's state is its own. From outside: one live process, which has served
            # a call begun since it started (so it is past its handshake). A process's start
            # time is read as the boot time, whole seconds on Linux, plus its ticks since: it
            # may read up to a second early, so the call must have begun a second after it.
            # Otherwise a call that began before a restart could pass for one the new process
            # served, and the kill would land in its handshake: a failed start, which the
            # backoff answers on purpose.
            process = _pid_of(self, target)
            if process is None:
                return False
            with contextlib.suppress(psutil.Error):
                began = self.last_success_wall.get(target, 0.0)
                return began > process.create_time() + START_TIME_SLACK_S
            return False
        return self.adapter.server_status(server).status == "connected"


async def _caller(run: _Run, name: str, servers: list[str]) -> None:
    while run.calling():
        choices = [s for s in servers if s not in run.quiet]
        server = run.rng.choice(choices)
        workload = WORKLOADS[server]
        run.call_number += 1
        number = run.call_number
        started = time.monotonic()
        outcome: CallOutcome | None = None
        with anyio.move_on_after(CALL_DEADLINE_S):
            outcome = await run.adapter.call(
                f"{server}_{workload.tool}", workload.arguments(number)
            )
        latency = time.monotonic() - started
        if outcome is None:
            run.report.violations.append(
                f"{name}: call to {server} returned nothing within {CALL_DEADLINE_S:.0f} s"
            )
            kind, message = "hung", ""
        else:
            kind, message = classify(outcome), outcome.message
            _check_outcome(run, server, number, outcome, kind)
        if kind == "ok":
            run.last_success[server] = time.monotonic()
        else:
            run.last_error[server] = f"{kind}: {message[:200]}"
        run.report.calls.append(
            CallRecord(server, name, started - run.started, latency, kind, message)
        )
        # Callers think between calls, as agents do; without it eight callers on two cores
        # measure the scheduler, not the adapter.
        await anyio.sleep(run.rng.uniform(0.0, 0.04))


async def _gateway_caller(run: _Run, name: str, servers: list[str]) -> None:
    """Like :func:`_caller`, through the gateway's ``mcp`` tool over HTTP, in its own session."""
    assert run.gateway is not None
    async with Client(run.gateway.url) as client:
        while run.calling():
            choices = [s for s in servers if GATEWAY_PREFIX + s not in run.quiet]
            server = run.rng.choice(choices)
            target = GATEWAY_PREFIX + server
            workload = WORKLOADS[server]
            run.call_number += 1
            number = run.call_number
            started, started_wall = time.monotonic(), time.time()
            result: types.CallToolResult | None = None
            params = {"tool": f"{server}_{workload.tool}", "args": workload.arguments(number)}
            with anyio.move_on_after(CALL_DEADLINE_S):
                result = await client.call_tool("mcp", params)
            latency = time.monotonic() - started
            if result is None:
                run.report.violations.append(
                    f"{name}: call to {target} returned nothing within {CALL_DEADLINE_S:.0f} s"
                )
                kind, text = "hung", ""
            else:
                text = "".join(getattr(block, "text", "") for block in result.content)
                kind = _classify_text(text) if result.is_error else "ok"
                _check_text(run, target, number, kind, text)
            if kind == "ok":
                run.last_success[target] = time.monotonic()
                run.last_success_wall[target] = started_wall
            else:
                run.last_error[target] = f"{kind}: {text[:200]}"
            run.report.calls.append(
                CallRecord(target, name, started - run.started, latency, kind, text[:200])
            )
            await anyio.sleep(run.rng.uniform(0.0, 0.04))


def _classify_text(text: str) -> str:
    """The kind of error a gateway client read (the same kinds as :func:`classify`)."""
    if "timed out" in text:
        return "timeout"
    if "not available (last failed" in text:
        return "backoff"
    if "connection lost" in text or "closed" in text or "exited" in text:
        return "connection_lost"
    if "rejected" in text:
        return "server_error"
    return "error_result"


def _check_text(run: _Run, target: str, number: int, kind: str, text: str) -> None:
    _via_gateway, server = _split(target)
    if kind == "ok":
        expected = WORKLOADS[server].expected_text(number)
        if expected is not None and expected not in text:
            run.report.violations.append(f"{target}: call {number} got {text!r}")
    elif server not in text:
        run.report.violations.append(f"{target}: unclear error for call {number}: {text!r}")


def _check_outcome(run: _Run, server: str, number: int, outcome: CallOutcome, kind: str) -> None:
    if kind == "ok":
        expected = WORKLOADS[server].expected_text(number)
        result = outcome.result
        text = getattr(result.content[0], "text", None) if result and result.content else None
        if expected is not None and text != expected:  # type: ignore[union-attr]
            run.report.violations.append(f"{server}: call {number} got {text!r}, not {expected!r}")
        return
    message = outcome.message
    if not message.strip() or server not in message:
        run.report.violations.append(
            f"{server}: unclear error for call {number} ({kind}): {message!r}"
        )


async def _monitor(run: _Run) -> None:
    me = psutil.Process()
    gateway = psutil.Process(run.gateway.process.pid) if run.gateway is not None else None
    while True:
        run.report.samples.append(Sample(run.now(), me.memory_info().rss, me.num_fds()))
        if gateway is not None:
            with contextlib.suppress(psutil.Error):
                sample = Sample(run.now(), gateway.memory_info().rss, gateway.num_fds())
                run.report.gateway_samples.append(sample)
        for server, processes in server_processes().items():
            for process in processes:
                with contextlib.suppress(psutil.Error):
                    owned_by_gateway = gateway is not None and owner_of(process) == gateway.pid
                    prefix = GATEWAY_PREFIX if owned_by_gateway else ""
                    run.report.pids[prefix + server].add(process.pid)
        await anyio.sleep(0.25)


def _pid_of(run: _Run, target: str) -> psutil.Process | None:
    """The one live process of ``target``, or None (not running, or two during a restart)."""
    _via_gateway, server = _split(target)
    owner = run.owner_pid(target)
    processes = []
    for process in server_processes().get(server, []):
        with contextlib.suppress(psutil.Error):
            if owner_of(process) == owner:
                processes.append(process)
    return processes[0] if len(processes) == 1 else None


async def _wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    with anyio.move_on_after(timeout_s):
        while not condition():
            await anyio.sleep(0.05)
        return True
    return False


async def _kill(run: _Run, target: str) -> None:
    process = _pid_of(run, target)
    if process is None:
        return
    server = target
    _via_gateway, name = _split(target)
    started = run.now()
    keep_alive = run.adapter.servers[name].lifecycle == "keep-alive"
    if not keep_alive and not run.connected(target):
        # A kill while it is still starting is a failed start, which the backoff answers on
        # purpose; this fault is about a running server, so it waits for the next turn.
        return
    if keep_alive:
        run.quiet.add(server)
    process.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    try:
        if keep_alive:
            # Nobody calls it now: only the health check can bring it back.
            # (The gateway's server counts as back once its new process runs: nobody calls it.)
            back = await _wait_until(
                lambda: (
                    (new := _pid_of(run, server)) is not None
                    and new.pid != process.pid
                    and (_via_gateway or run.connected(server))
                ),
                timeout_s=STARTUP_TIMEOUT_MS / 1000 + 3 * HEALTH_CHECK_INTERVAL_MS / 1000,
            )
        else:
            back = await _wait_until(
                lambda: run.last_success.get(server, 0.0) > killed_at,
                timeout_s=CALL_DEADLINE_S,
            )
    finally:
        run.quiet.discard(server)
    recovered = time.monotonic() - killed_at if back else None
    if not back:
        how = "the health check" if keep_alive else "the next call"
        last_error = run.last_error.get(server, "none")
        run.report.violations.append(
            f"{server}: not back after SIGKILL through {how} "
            f"(killed at {killed_at - run.started:.1f} s; last error: {last_error})"
        )
    run.report.faults.append(FaultRecord(server, "kill", started, run.now(), recovered))


async def _close_stdout(run: _Run, server: str) -> None:
    process = _pid_of(run, server)
    if process is None:
        return
    started = run.now()
    process.send_signal(signal.SIGUSR1)
    closed_at = time.monotonic()
    back = await _wait_until(
        lambda: run.last_success.get(server, 0.0) > closed_at, timeout_s=CALL_DEADLINE_S
    )
    if not back:
        run.report.violations.append(f"{server}: not back after it closed its stdout")
    recovered = time.monotonic() - closed_at if back else None
    run.report.faults.append(FaultRecord(server, "close-stdout", started, run.now(), recovered))


async def _hang(run: _Run, server: str) -> None:
    process = _pid_of(run, server)
    if process is None:
        return
    started = run.now()
    process.send_signal(signal.SIGSTOP)
    try:
        await anyio.sleep(run.rng.uniform(2.0, 5.0))
    finally:
        process.send_signal(signal.SIGCONT)
    run.report.faults.append(FaultRecord(server, "hang", started, run.now()))


async def _answer_503(run: _Run, server: str) -> None:
    started = run.now()
    run.fault_file.write_text("503")
    try:
        await anyio.sleep(run.rng.uniform(2.0, 5.0))
    finally:
        run.fault_file.unlink(missing_ok=True)
    run.report.faults.append(FaultRecord(server, "503", started, run.now()))


FAULTS: dict[str, Callable[[_Run, str], Awaitable[None]]] = {
    "time": _kill,
    "everything": _kill,
    "stalled": _hang,
    "flaky": _answer_503,
    "mute": _close_stdout,
}


async def _chaos(run: _Run) -> None:
    async def one(target: str) -> None:
        try:
            await FAULTS[_split(target)[1]](run, target)
        finally:
            run.busy.discard(target)

    targets = list(FAULTS)
    if run.gateway is not None:
        # The 503 fixture is shared; the other faults also hit the gateway's own processes,
        # except the keep-alive kill: the gateway's health-check recovery cannot be observed
        # from outside as precisely (a kill that lands in its restart means a 30 s retry).
        targets += [GATEWAY_PREFIX + s for s in FAULTS if s not in ("flaky", "everything")]
    async with anyio.create_task_group() as tg:
        while time.monotonic() < run.faults_end_at:
            await anyio.sleep(run.rng.uniform(0.5, 2.0))
            ready = [s for s in targets if s not in run.busy and (s == "flaky" or run.connected(s))]
            if not ready or time.monotonic() >= run.faults_end_at:
                continue
            server = run.rng.choice(ready)
            run.busy.add(server)
            tg.start_soon(one, server)


async def _connect_all(adapter: McpAdapter, *, strict: bool) -> None:
    """Connect every server; with ``strict`` a failure propagates, else it is left be."""

    async def connect(server: str) -> None:
        try:
            await adapter.connect(server)
        except McpAdapterError:
            if strict:
                raise

    async with anyio.create_task_group() as tg:
        for server in WORKLOADS:
            tg.start_soon(connect, server)


async def run_chaos(
    agent_dir: Path,
    flaky_url: str,
    fault_file: Path,
    *,
    duration_s: float,
    callers: int = 8,
    gateway_callers: int = 0,
    settle_s: float = 10.0,
    seed: int | None = None,
) -> ChaosReport:
    """Run the chaos scenario for ``duration_s`` and report what happened.

    ``flaky_url`` is the Streamable HTTP fixture started with ``--fault-file fault_file``. With
    ``gateway_callers``, ``pi-mcp serve`` runs the same configuration over HTTP and that many
    more callers go through it, while the faults hit its server processes too; it is stopped
    with SIGTERM at the end. Faults stop ``settle_s`` before the end. The report's
    ``leftover_processes`` is filled after everything closed; the caller stops the HTTP fixture.
    """
    config_path = write_config(agent_dir, flaky_url)
    report = ChaosReport(duration_s)
    rng = random.Random(seed)
    # The adapter owns its servers, as the gateway owns its own: the scenario kills each
    # owner's processes and watches that owner recover (not the pool's sharing).
    adapter = McpAdapter(
        agent_dir=agent_dir, project_dir=agent_dir, config_path=config_path, use_pool=False
    )
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    gateway = start_gateway(agent_dir, agent_dir) if gateway_callers else None
    gateway_tree: list[psutil.Process] = []
    try:
        async with adapter:
            with anyio.fail_after(STARTUP_TIMEOUT_MS / 1000 * 2):
                await _connect_all(adapter, strict=True)
                if gateway is not None:
                    await _connect_all_through(gateway)
            me = psutil.Process()
            report.fds_after_warmup = me.num_fds()
            report.rss_after_warmup = me.memory_info().rss
            started = time.monotonic()
            run = _Run(
                adapter,
                report,
                rng,
                fault_file,
                started=started,
                ends_at=started + duration_s,
                faults_end_at=started + max(0.0, duration_s - settle_s),
                gateway=gateway,
            )
            servers = list(WORKLOADS)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_monitor, run)
                tg.start_soon(_chaos, run)
                async with anyio.create_task_group() as callers_group:
                    for index in range(callers):
                        callers_group.start_soon(_caller, run, f"caller-{index}", servers)
                    for index in range(gateway_callers):
                        callers_group.start_soon(
                            _gateway_caller, run, f"gateway-caller-{index}", servers
                        )
                tg.cancel_scope.cancel()
            # Quiet moment: every server that can be connected is, as after the warm-up.
            with anyio.move_on_after(STARTUP_TIMEOUT_MS / 1000):
                await _connect_all(adapter, strict=False)
            report.fds_at_end = me.num_fds()
            report.rss_at_end = me.memory_info().rss
    finally:
        if gateway is not None:
            with contextlib.suppress(psutil.Error):
                gateway_tree = psutil.Process(gateway.process.pid).children(recursive=True)
            gateway.process.send_signal(signal.SIGTERM)
            try:
                report.gateway_exit_code = await anyio.to_thread.run_sync(
                    lambda: gateway.process.wait(timeout=CALL_DEADLINE_S)
                )
            finally:
                gateway.stop()
    flaky_pids = report.pids.get("flaky", set())
    survivors = live_descendants(before | flaky_pids) + [p for p in gateway_tree if _is_live(p)]
    _gone, alive = psutil.wait_procs(survivors, timeout=10)
    report.leftover_processes = [f"{p.pid} {' '.join(_cmdline(p))}" for p in alive]
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    return report


async def _connect_all_through(gateway: Gateway) -> None:
    """Have the gateway connect every server (it listens before its first run listed them)."""
    async with Client(gateway.url) as client:
        for server in WORKLOADS:
            result = await client.call_tool("mcp", {"connect": server})
            if result.is_error:
                raise RuntimeError(f"the gateway could not connect {server}: {result.content}")


def _is_live(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def failures(report: ChaosReport) -> list[str]:
    """Every broken pass criterion, as readable lines (empty when the run passed)."""
    problems = list(report.violations)
    for server in HEALTHY:
        failed = [c for c in report.calls_to(server) if c.kind != "ok"]
        if failed:
            problems.append(f"{len(failed)} calls to the healthy server {server} failed")
    growth = report.rss_at_end - report.rss_after_warmup
    if growth > RSS_GROWTH_BOUND_BYTES:
        problems.append(f"RSS grew by {growth / 2**20:.1f} MiB")
    if report.fds_at_end - report.fds_after_warmup > FD_GROWTH_BOUND:
        problems.append(f"open fds grew from {report.fds_after_warmup} to {report.fds_at_end}")
    problems.extend(f"left running: {p}" for p in report.leftover_processes)
    for server in HEALTHY:
        failed = [c for c in report.calls_to(GATEWAY_PREFIX + server) if c.kind != "ok"]
        if failed:
            problems.append(f"{len(failed)} gateway calls to the healthy server {server} failed")
    if report.gateway_samples:
        first, last = report.gateway_samples[0], report.gateway_samples[-1]
        if last.rss - first.rss > RSS_GROWTH_BOUND_BYTES:
            problems.append(f"the gateway's RSS grew by {(last.rss - first.rss) / 2**20:.1f} MiB")
        if last.fds - first.fds > FD_GROWTH_BOUND:
            problems.append(f"the gateway's open fds grew from {first.fds} to {last.fds}")
        if report.gateway_exit_code not in (0, 143):
            problems.append(f"the gateway exited with {report.gateway_exit_code} on SIGTERM")
    return problems


def chaos_minutes_from_env(default_s: float) -> float:
    """``PI_MCP_CHAOS_MINUTES`` selects the long mode (e.g. 10); CI runs ``default_s``."""
    minutes = os.environ.get("PI_MCP_CHAOS_MINUTES")
    return float(minutes) * 60 if minutes else default_s
