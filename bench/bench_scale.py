"""A catalog of 100,000 tools: what each request costs at 2,375, 23,750 and 95,000 tools.

The catalog is the development set's (491 servers, 2,375 tools, from
``../shared/eval/etom-dev/etom_dev.json``; a generated one of the same shape when that file is
absent), copied under renamed servers (``<server>-c<k>``) to 10x and 40x. Each size gets its
own agent dir: a config with every copied server (lazy, never started: their tools come from
the metadata cache, written once before timing) plus the fixture server
(``tests/fixtures/mcp_fixture.py``, eager, ``echo`` as a direct tool).

Per size, in a fresh process each (so memory is that size's own):

- API start to first search: ``McpAdapter`` opened on the agent dir, plus its first search as
  a host makes it (``ready_to_search``, then ``search``), in the first process ever (it
  builds the search index, embeds every tool and stores both) and in the next one (which
  opens what the first stored);
- first search, longest stall of another client: a gateway client calling ``echo`` in a
  loop while that first search runs, in both processes; its slowest call;
- RSS after the first search (the process's resident memory), in both, and the first
  process's peak RSS (the kernel's high-water mark of its own memory, ``VmHWM``: what
  building the index took);
- gateway ``tools/list`` and proxy call p50: a real SDK client to ``McpGateway`` in-process,
  ``CALLS`` of each after a warm-up;
- relisting one server, longest stall of another client: while the client calls ``echo`` in a
  loop, one cached server's listing is published three times (as a relisting does); the
  client's slowest call;
- metadata store: opening it, storing one server until its row is durable, and the
  ``mcp-cache.json`` export after it (see ``cache_figures``);
- CLI ``pi-mcp search`` and ``pi-mcp status`` (``--json``), a fresh process each
  (``PI_MCP_WARM=0``), wall time, the median of three after one unmeasured; both as the
  first after an edit of the configuration file (which loads it, and a search builds the
  catalog; the others show what the last status kept of it, ``engine/_status_facts.py``, or
  open the stored index by what the last search kept, ``engine/_search_facts.py``);
  ``status`` again with one server's failed connect recorded, and as text (its time and
  output size); both again in the agent dir's warm process;
- a team gateway replica (``sharedState`` on a real ``redis-server``, whose metadata table
  holds every server's record as replicas publish them): API start to first search and RSS,
  joining with an empty agent dir, then starting again on that agent dir (left out, said so,
  where ``redis-server`` is not installed).

Ratios are against the 2,375-tool row of the same run (the issue's targets: list and call
within 1.5x, a stall of at most 50 ms at 95,000 tools).

Usage: .venv/bin/python bench/bench_scale.py [--copies 1,10,40] [--calls N]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _summary import record

REPO = Path(__file__).resolve().parents[1]
DEV_SET = REPO.parent / "shared" / "eval" / "etom-dev" / "etom_dev.json"
FIXTURE = REPO / "tests" / "fixtures" / "mcp_fixture.py"
PI_MCP = Path(sys.executable).parent / "pi-mcp"
QUERY = "create an issue in a github repository"
RELISTINGS = 3


def base_catalog() -> dict[str, list[dict[str, Any]]]:
    if DEV_SET.exists():
        data = json.loads(DEV_SET.read_text(encoding="utf-8"))
        tools: dict[str, list[dict[str, Any]]] = {}
        for tool in data["tools"]:
            tools.setdefault(tool["server"], []).append(
                {
                    "name": tool["name"],
                    "description": tool.get("description") or "",
                    "inputSchema": tool.get("input_schema") or {"type": "object"},
                }
            )
        return tools
    schema = {"type": "object", "properties": {"query": {"type": "string"}}}
    return {
        f"server-{s:03d}": [
            {"name": f"tool_{t}", "description": f"Tool {t} of server {s}.", "inputSchema": schema}
            for t in range(5)
        ]
        for s in range(491)
    }


def write_workspace(root: Path, copies: int) -> int:
    """The agent dir and config for ``copies`` copies of the catalog; returns the tool count.

    The cache is written as one ``mcp-cache.json`` (the TypeScript reference's format) and
    imported into the store in one transaction, as a first run after the reference does:
    storing server by server would export the file after every write, which at 40 copies
    takes longer than the whole measurement."""
    from pi_mcp_adapter.catalog import MetadataCache, config_hash
    from pi_mcp_adapter.config import ServerEntry

    agent_dir = root / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    servers: dict[str, Any] = {
        "fixture": {
            "command": sys.executable,
            "args": [str(FIXTURE)],
            "lifecycle": "eager",
            "directTools": ["echo"],
        }
    }
    cached: dict[str, Any] = {}
    now_ms = int(time.time() * 1000)
    tools = 0
    catalog = base_catalog()
    for copy in range(copies):
        for server, listed in catalog.items():
            name = server if copy == 0 else f"{server}-c{copy}"
            servers[name] = {"command": "/bin/false", "args": [name]}
            entry = ServerEntry(command="/bin/false", args=(name,))
            cached[name] = {
                "configHash": config_hash(entry),
                "tools": listed,
                "resources": [],
                "prompts": [],
                "cachedAt": now_ms,
            }
            tools += len(listed)
    document = {"version": 1, "servers": cached}
    (agent_dir / "mcp-cache.json").write_text(json.dumps(document), encoding="utf-8")
    MetadataCache(agent_dir / "mcp-cache.json").load()  # imports the file into the store
    (root / "mcp.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return tools


def peak_rss_mb() -> float:
    """The kernel's high-water mark of this process's own resident memory: ``VmHWM``, kept
    per address space. Not ``ru_maxrss``: Linux carries that over ``exec`` from the process
    that started this one (the bench, holding the 95,000-tool catalog it wrote: 506 MB were
    reported for a first start that peaked at 386 MB)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**10
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # no /proc: bytes on macOS
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


async def first_start(root: Path, agent_dir: Path | None = None) -> dict[str, float]:
    """API start to first search in the first process ever to open the workspace: nothing of
    the search index is stored yet (it builds the index, embeds every tool and stores both),
    the longest stall of a gateway client meanwhile, and resident memory then. ``agent_dir``
    instead of the workspace's own (a replica). What is imported before the clock starts is
    what :func:`measure_process` imports."""
    from mcp import Client

    from pi_mcp_adapter.engine import McpAdapter
    from pi_mcp_adapter.hosts._gateway import McpGateway

    started = time.perf_counter()
    async with McpAdapter(
        agent_dir=agent_dir or root / "agent",
        project_dir=root,
        config_path=root / "mcp.json",
        background_listing=True,
        use_pool=False,
    ) as adapter:
        opened_s = time.perf_counter() - started
        gateway = McpGateway(adapter)
        async with gateway.running(), Client(gateway.server) as client:
            await client.call_tool("fixture_echo", {"message": "warm"})
            searched_s, stall_s = await first_search_beside(adapter, client)
        return {
            "first_start_to_search_s": opened_s + searched_s,
            "first_search_stall_ms": 1000 * stall_s,
            "first_rss_mb": psutil.Process().memory_info().rss / 2**20,
            # The build's peak, with nothing sampling it (a sampler's own allocations during
            # the build change what the build leaves resident).
            "first_peak_rss_mb": peak_rss_mb(),
        }


@contextlib.asynccontextmanager
async def calling_in_a_loop(client: Any) -> AsyncIterator[list[float]]:
    """A gateway client calling ``echo`` in a loop for the length of the block; yields the
    seconds of each call, complete once the block ends."""
    latencies: list[float] = []
    done = anyio.Event()

    async def call_in_a_loop() -> None:
        while not done.is_set():
            mark = time.perf_counter()
            await client.call_tool("fixture_echo", {"message": "x"})
            latencies.append(time.perf_counter() - mark)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call_in_a_loop)
        try:
            yield latencies
        finally:
            done.set()


async def first_search_beside(adapter: Any, client: Any) -> tuple[float, float]:
    """The seconds of a process's first search, made as a host makes it (the index made off
    the event loop, then the query), and the slowest call meanwhile of a gateway client
    calling ``echo`` in a loop."""
    async with calling_in_a_loop(client) as latencies:
        await anyio.sleep(0.1)
        mark = time.perf_counter()
        await adapter.ready_to_search()
        adapter.search(QUERY)
        searched_s = time.perf_counter() - mark
    return searched_s, max(latencies)


async def measure_process(root: Path, calls: int) -> dict[str, float]:
    """Every in-process figure for the workspace at ``root`` (run in a fresh process)."""
    from mcp import Client

    from pi_mcp_adapter.engine import McpAdapter
    from pi_mcp_adapter.hosts._gateway import McpGateway

    figures: dict[str, float] = {}
    started = time.perf_counter()
    async with McpAdapter(
        agent_dir=root / "agent",
        project_dir=root,
        config_path=root / "mcp.json",
        background_listing=True,
        relay_server_requests=True,
        use_pool=False,
    ) as adapter:
        opened_s = time.perf_counter() - started
        gateway = McpGateway(adapter)
        async with gateway.running(), Client(gateway.server) as client:
            await client.list_tools()
            await client.call_tool("fixture_echo", {"message": "warm"})
            searched_s, stall_s = await first_search_beside(adapter, client)
            figures["start_to_search_s"] = opened_s + searched_s
            figures["search_stall_ms"] = 1000 * stall_s
            figures["rss_mb"] = psutil.Process().memory_info().rss / 2**20
            listed: list[float] = []
            called: list[float] = []
            for _ in range(calls):
                mark = time.perf_counter()
                await client.list_tools()
                listed.append(time.perf_counter() - mark)
                mark = time.perf_counter()
                await client.call_tool("fixture_echo", {"message": "x"})
                called.append(time.perf_counter() - mark)
            figures["list_p50_ms"] = 1000 * statistics.median(listed)
            figures["call_p50_ms"] = 1000 * statistics.median(called)
            figures["stall_ms"] = 1000 * await relisting_stall(adapter, client)
    figures.update(await anyio.to_thread.run_sync(cache_figures, root))
    return figures


def cache_figures(root: Path) -> dict[str, float]:
    """The metadata store's rows, off the event loop as a CLI command runs them: opening it
    (names and summaries), storing one server until its row is durable in ``mcp-cache.db``
    (a store after a quiet spell commits before it returns), and the ``mcp-cache.json``
    export that follows (``flush``: written at once up to 8 MiB, by a background thread
    above, skipped above 32 MiB)."""
    from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
    from pi_mcp_adapter.config import ServerEntry

    figures: dict[str, float] = {}
    cache = MetadataCache(root / "agent" / "mcp-cache.json")
    mark = time.perf_counter()
    cache.load()
    figures["cache_load_s"] = time.perf_counter() - mark
    name = next(s for s in cache.servers if s != "fixture")
    entry = ServerEntry(command="/bin/false", args=(name,))
    mark = time.perf_counter()
    cache.store(name, entry, ServerMetadata(tools=({"name": "fresh", "inputSchema": {}},)))
    figures["store_one_ms"] = 1000 * (time.perf_counter() - mark)
    mark = time.perf_counter()
    cache.flush()
    figures["json_export_s"] = time.perf_counter() - mark
    return figures


async def relisting_stall(adapter: Any, client: Any) -> float:
    """The slowest call of a client calling in a loop while one server is relisted."""
    names = [n for n in adapter.servers if n != "fixture"]
    server = names[len(names) // 2]
    metadata = adapter.metadata(server)  # whole: a listing read from the store lacks schemas
    async with calling_in_a_loop(client) as latencies:
        await anyio.sleep(0.2)
        for version in range(RELISTINGS):
            tools = tuple(
                {**t, "description": f"{t.get('description', '')} (v{version})"}
                for t in metadata.tools
            )
            adapter.state.begin_listing([server])
            await anyio.sleep(0.05)
            adapter.state.publish(server, dataclasses.replace(metadata, tools=tools))
            adapter.state.end_listing(server)
            await adapter.ready([server])  # the relisting is indexed
            await anyio.sleep(0.2)
    return max(latencies)


def cli_command(root: Path, *args: str) -> list[str]:
    return [
        str(PI_MCP),
        "--config",
        str(root / "mcp.json"),
        "--agent-dir",
        str(root / "agent"),
        "--project",
        str(root),
        *args,
    ]


def cli_run(root: Path, *args: str, warm: bool = False) -> tuple[float, int]:
    """Wall seconds and output bytes of one ``pi-mcp`` command: a fresh process (no warm
    process, what a CI job or a first command pays), or with ``warm`` in the agent dir's warm
    process (see :func:`warm_process`)."""
    environ = {**os.environ, "PI_MCP_WARM": "1" if warm else "0"}
    mark = time.perf_counter()
    done = subprocess.run(
        cli_command(root, *args), check=True, capture_output=True, timeout=1800, env=environ
    )
    return time.perf_counter() - mark, len(done.stdout)


def cli_seconds(root: Path, *args: str) -> float:
    """The median wall seconds of three runs of ``pi-mcp *args --json`` in a fresh process
    each, after one unmeasured: what running it again costs (the first run after a change
    keeps what a status or a search reads, see ``cli_changed_seconds``)."""
    cli_run(root, *args, "--json")
    return statistics.median(cli_run(root, *args, "--json")[0] for _ in range(3))


def cli_changed_seconds(root: Path, *args: str) -> float:
    """The median of three ``pi-mcp *args --json``, each the first after an edit of the
    configuration file (a blank line more: the same servers): a status or a search then
    loads the configuration (a search builds the catalog too) and keeps what it read for
    the next."""
    config = root / "mcp.json"
    original = config.read_bytes()
    seconds: list[float] = []
    try:
        for edit in range(1, 4):
            config.write_bytes(original + b"\n" * edit)
            seconds.append(cli_run(root, *args, "--json")[0])
    finally:
        config.write_bytes(original)
    return statistics.median(seconds)


@contextlib.contextmanager
def warm_process(root: Path) -> Iterator[bool]:
    """The agent dir's warm process, started by a first command as on a person's machine
    (``PI_MCP_WARM=1``: ``CI`` keeps one from starting by itself), and stopped afterwards;
    False when none started within a minute."""
    socket_path = root / "agent" / "pool" / "cli.sock"
    try:
        cli_run(root, "status", warm=True)  # runs by itself and starts the warm process
        deadline = time.monotonic() + 60
        while not socket_path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield socket_path.exists()
    finally:
        subprocess.run(
            cli_command(root, "serve", "--stop"),
            capture_output=True,
            timeout=60,
            env={**os.environ, "PI_MCP_WARM": "0"},
        )


def warm_cli_figures(root: Path) -> dict[str, float]:
    """``search`` and ``status`` run in the warm process: the median of three after one
    unmeasured run each."""
    figures: dict[str, float] = {}
    with warm_process(root) as started:
        if not started:
            print("no warm process started: the warm-process rows are left out", flush=True)
            return figures
        for key, args in (
            ("warm_search_s", ("search", QUERY, "--json")),
            ("warm_status_s", ("status", "--json")),
        ):
            cli_run(root, *args, warm=True)
            figures[key] = statistics.median(cli_run(root, *args, warm=True)[0] for _ in range(3))
    return figures


@contextlib.contextmanager
def team_redis(scratch: Path) -> Iterator[str | None]:
    """A ``redis-server`` on loopback, keeping nothing on disk; None when not installed."""
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    scratch.mkdir(parents=True, exist_ok=True)
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    server = subprocess.Popen(
        [*command, "--appendonly", "no", "--dir", str(scratch)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(timeout=10)


def publish_catalog(root: Path, url: str) -> None:
    """Every stored server's record and its digest in the team's metadata table, as the
    replicas that listed them publish them."""
    import redis

    from pi_mcp_adapter._shared_state import DIGESTS_SUFFIX, KEY_PREFIX, text_digest
    from pi_mcp_adapter.catalog._store import CatalogStore

    store = CatalogStore(root / "agent" / "mcp-cache.db")
    client = redis.Redis.from_url(url)
    try:
        pipe = client.pipeline(transaction=False)
        for count, (name, text) in enumerate(store.entries(), start=1):
            pipe.hset(KEY_PREFIX + "cache", name, text)
            pipe.hset(KEY_PREFIX + "cache" + DIGESTS_SUFFIX, name, text_digest(text))
            if count % 1000 == 0:
                pipe.execute()
        pipe.execute()
    finally:
        client.close()
        store.close()


def replica_figures(root: Path) -> dict[str, float]:
    """A replica's start to first search and RSS, joining with an empty agent dir and starting
    again on it; nothing when ``redis-server`` is not installed."""
    with team_redis(root / "redis") as url:
        if url is None:
            print("no redis-server: the replica rows are left out", flush=True)
            return {}
        publish_catalog(root, url)
        figures: dict[str, float] = {}
        environ = {**os.environ, "PI_MCP_SHARED_STATE": url}
        for prefix in ("replica_join", "replica_next"):
            done = subprocess.run(
                [sys.executable, __file__, "--first-start", str(root), "--agent", "replica"],
                check=True,
                capture_output=True,
                text=True,
                timeout=3600,
                env=environ,
            )
            started = json.loads(done.stdout.strip().splitlines()[-1])
            figures[f"{prefix}_s"] = started["first_start_to_search_s"]
            figures[f"{prefix}_rss_mb"] = started["first_rss_mb"]
        return figures


def measure(root: Path, calls: int) -> dict[str, float]:
    first = subprocess.run(
        [sys.executable, __file__, "--first-start", str(root)],
        check=True,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    # The CLI rows before the in-process ones: the relisting measured there stores one
    # server's listing under the sampling and elicitation a relaying gateway offers, which a
    # CLI process lacks, so the CLI would list that server itself (``/bin/false``, which
    # fails) and time that instead.
    cli_search_s = cli_seconds(root, "search", QUERY)
    cli_search_changed_s = cli_changed_seconds(root, "search", QUERY)
    cli_status_changed_s = cli_changed_seconds(root, "status")
    cli_status_s = cli_seconds(root, "status")
    cli_run(root, "status")
    cli_status_text_s, status_text_bytes = cli_run(root, "status")
    warm = warm_cli_figures(root)
    with one_failed_server(root):
        cli_status_failed_s = cli_seconds(root, "status")
    done = subprocess.run(
        [sys.executable, __file__, "--measure", str(root), "--calls", str(calls)],
        check=True,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    figures.update(json.loads(first.stdout.strip().splitlines()[-1]))
    figures["cli_search_s"] = cli_search_s
    figures["cli_search_changed_s"] = cli_search_changed_s
    figures["cli_status_s"] = cli_status_s
    figures["cli_status_changed_s"] = cli_status_changed_s
    figures["cli_status_failed_s"] = cli_status_failed_s
    figures["cli_status_text_s"] = cli_status_text_s
    figures["status_text_kb"] = status_text_bytes / 1024
    figures.update(warm)
    figures.update(replica_figures(root))
    return figures


@contextlib.contextmanager
def one_failed_server(root: Path) -> Iterator[None]:
    """A failed connect of one cached server recorded, as a catalog of thousands of servers
    nearly always holds one: the status shows its backoff and error."""
    from pi_mcp_adapter.config import ServerEntry
    from pi_mcp_adapter.servers import FAILURES_FILE_NAME, FailureMemory

    path = root / "agent" / FAILURES_FILE_NAME
    name = next(iter(base_catalog()))
    FailureMemory(path).record(name, ServerEntry(command="/bin/false", args=(name,)), "refused")
    try:
        yield
    finally:
        path.unlink()


ROWS = [
    ("gateway tools/list p50", "list_p50_ms", "ms"),
    ("gateway proxy call p50", "call_p50_ms", "ms"),
    ("relisting one server: longest stall of another client", "stall_ms", "ms"),
    ("first search: longest stall of another client", "search_stall_ms", "ms"),
    ("first search, first start: longest stall of another client", "first_search_stall_ms", "ms"),
    ("API start to first search, first start (nothing stored)", "first_start_to_search_s", "s"),
    ("RSS after the first search, first start", "first_rss_mb", "MB"),
    ("peak RSS of that first start (building the index)", "first_peak_rss_mb", "MB"),
    ("API start to first search", "start_to_search_s", "s"),
    ("RSS after the first search", "rss_mb", "MB"),
    ("metadata cache load", "cache_load_s", "s"),
    ("store one server, durable in mcp-cache.db", "store_one_ms", "ms"),
    ("mcp-cache.json export after it (none above 32 MiB)", "json_export_s", "s"),
    ("`pi-mcp search`, fresh process", "cli_search_s", "s"),
    ("`pi-mcp search`, fresh process, configuration edited since", "cli_search_changed_s", "s"),
    ("`pi-mcp status`, fresh process", "cli_status_s", "s"),
    ("`pi-mcp status`, fresh process, configuration edited since", "cli_status_changed_s", "s"),
    ("`pi-mcp status`, one server failed, fresh process", "cli_status_failed_s", "s"),
    ("`pi-mcp status` (text), fresh process", "cli_status_text_s", "s"),
    ("`pi-mcp status` (text) output", "status_text_kb", "KB"),
    ("`pi-mcp search`, warm process", "warm_search_s", "s"),
    ("`pi-mcp status`, warm process", "warm_status_s", "s"),
    (
        "replica with shared state: API start to first search, empty agent dir",
        "replica_join_s",
        "s",
    ),
    ("RSS of that replica after its first search", "replica_join_rss_mb", "MB"),
    ("replica with shared state: API start to first search, next start", "replica_next_s", "s"),
    ("RSS of that replica after its first search, next start", "replica_next_rss_mb", "MB"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", default="1,10,40", help="catalog copies, comma-separated")
    parser.add_argument("--calls", type=int, default=30, help="list and call requests per size")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--first-start", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--agent", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.first_start is not None:
        root: Path = options.first_start
        agent_dir = root / options.agent if options.agent else None
        print(json.dumps(anyio.run(first_start, root, agent_dir)))
        return
    if options.measure is not None:
        print(json.dumps(anyio.run(measure_process, options.measure, options.calls)))
        return
    copies = [int(c) for c in options.copies.split(",")]
    results: list[tuple[int, dict[str, float]]] = []
    with tempfile.TemporaryDirectory(prefix="pi-mcp-bench-scale-") as scratch:
        for count in copies:
            root = Path(scratch) / f"x{count}"
            tools = write_workspace(root, count)
            print(f"{tools:,} tools: measuring", flush=True)
            results.append((tools, measure(root, options.calls)))
    header = " | ".join(f"{tools:,} tools" for tools, _ in results)
    print(f"\n| | {header} |")
    print("|---" * (len(results) + 1) + "|")
    for label, key, unit in ROWS:
        if any(key in figures for _, figures in results):
            cells = " | ".join(
                f"{figures[key]:.3g} {unit}" if key in figures else "-" for _, figures in results
            )
            print(f"| {label} | {cells} |")
    (base_tools, base), (top_tools, top) = results[0], results[-1]
    for label, key, unit in ROWS:
        if key not in top or key not in base:
            continue
        record(
            "scale",
            f"{label} at {top_tools:,} tools",
            top[key],
            base[key],
            unit=unit,
            baseline_name=f"same at {base_tools:,} tools",
        )
    print(f"\nTarget: at {top_tools:,} tools list and call within 1.5x of {base_tools:,} tools, ")
    print("a relisting stall of at most 50 ms.")


if __name__ == "__main__":
    main()
