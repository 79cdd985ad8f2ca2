"""Code mode against one call per turn: context tokens, turns and per-call overhead.

Real servers: mcp-server-git (a repository made for the run), mcp-server-time,
``@modelcontextprotocol/server-memory`` (tests/npm) and an offline fetch-like fixture
(tests/fixtures/fetch_like_server.py). Each task is done by a scripted model two ways, each with
its own adapter and memory file:

- **one call per turn** (the baseline): the model calls ``mcp({tool, args})``, reads the result,
  decides the next call, and so on;
- **one script**: the model sends one ``mcp_script`` whose code does the same calls.

Both ways start from the tool names and must reach the same final answer, which is checked.
Discovery is counted: one call per turn first describes each tool it will call, one
``mcp({describe})`` per turn, as such a model reads a tool's parameters before calling it; a
script is preceded by one ``mcp({describe: "a,b,..."})`` turn that gives the same tools as one
signature line each (``name(params) -> result``), then the script. Tokens are o200k tokens
(``pi-mcp tokens`` counts the same way) that pass through the model's context: each model
request reads the tool definitions, the task and the whole conversation so far (every
argument object or script the model wrote, every result it got), and writes its next call or
its answer. Turns are the model's tool round
trips (the final answer is one more request either way).

The overhead row compares a script that makes N sequential calls of the fixture's ``echo``
(less the same script with no calls, the sandbox's fixed start) against N direct engine calls
(``McpAdapter.call``) on the same server, same run.

Usage: .venv/bin/python bench/bench_script.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from pi_mcp_adapter.engine import McpAdapter
from pi_mcp_adapter.surface._proxy import ProxyTool
from pi_mcp_adapter.surface._sandbox import ScriptLimits
from pi_mcp_adapter.surface._script import ScriptTool
from pi_mcp_adapter.surface._tokens import count_tokens
from pi_mcp_adapter.surface._tokens_report import definition_tokens

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _summary import record

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
MEMORY_JS = ROOT / "tests/npm/node_modules/@modelcontextprotocol/server-memory/dist/index.js"
TOKYO = "Asia/Tokyo"
PAGES = ["mcp-overview", "tool-search", "sandbox-limits", "gateway-setup"]
CITIES = ["Europe/London", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "Asia/Kolkata",
          "America/Los_Angeles"]  # fmt: skip
PEOPLE = [f"person-{i:02d}" for i in range(20)]


# ---------------------------------------------------------------------- the conversation


@dataclass
class Conversation:
    """What one scripted model reads and writes while it does one task one way."""

    definitions: int
    prompt: int
    history: list[int] = field(default_factory=list)
    context_tokens: int = 0
    turns: int = 0
    calls: int = 0

    def request(self, written: str) -> None:
        """One model request: it reads everything so far and writes ``written``."""
        self.context_tokens += self.definitions + self.prompt + sum(self.history)
        size = count_tokens(written)
        self.context_tokens += size
        self.history.append(size)

    def tool_turn(self, written: str, result_text: str) -> None:
        self.request(written)
        self.turns += 1
        self.history.append(count_tokens(result_text))

    def answer(self, final: Any) -> None:
        self.request(json.dumps(final))


ProxyCall = Callable[[str, dict[str, Any]], Awaitable[str]]


@dataclass(frozen=True)
class Task:
    name: str
    prompt: str
    proxy: Callable[[ProxyCall], Awaitable[Any]]
    """The model's decisions, one ``mcp`` call at a time; returns the final answer."""
    script: str
    """The same work as one script (the model writes it in one go)."""


# ---------------------------------------------------------------------- the tasks


def commits_of(log: str) -> list[tuple[str, str]]:
    """(hash, "YYYY-MM-DD HH:MM") of each commit in a ``git_log`` answer, newest first."""
    found, current = [], None
    for line in log.splitlines():
        if line.startswith("Commit: "):
            current = line[8:].strip()
        elif line.startswith("Date: ") and current:
            found.append((current, line[6:22]))
            current = None
    return found


def make_tasks(repo: str) -> list[Task]:
    async def readme_commits(mcp: ProxyCall) -> Any:
        log = await mcp("git_log", {"repo_path": repo, "max_count": 12})
        touched = []
        for commit, date in commits_of(log):
            shown = await mcp("git_show", {"repo_path": repo, "revision": commit})
            if "README.md" in shown:
                touched.append((commit, date))
            if len(touched) == 3:
                break
        answer = []
        for commit, date in touched:
            args = {"source_timezone": "UTC", "time": date[11:16], "target_timezone": TOKYO}
            converted = json.loads(await mcp("time_convert_time", args))
            answer.append([commit[:8], converted["target"]["datetime"][11:16]])
        return answer

    readme_script = f"""
log = await call("git_log", {{"repo_path": {repo!r}, "max_count": 12}})
commits, current = [], None
for line in log.splitlines():
    if line.startswith("Commit: "):
        current = line[8:].strip()
    elif line.startswith("Date: ") and current:
        commits.append((current, line[6:22]))
        current = None
touched = []
for commit, date in commits:
    shown = await call("git_show", {{"repo_path": {repo!r}, "revision": commit}})
    if "README.md" in shown:
        touched.append((commit, date))
    if len(touched) == 3:
        break
answer = []
for commit, date in touched:
    converted = await call("time_convert_time", {{"source_timezone": "UTC",
        "time": date[11:16], "target_timezone": "{TOKYO}"}})
    answer.append([commit[:8], converted["target"]["datetime"][11:16]])
answer
"""

    async def changed_files(mcp: ProxyCall) -> Any:
        log = await mcp("git_log", {"repo_path": repo, "max_count": 5})
        answer = []
        for commit, _ in commits_of(log):
            shown = await mcp("git_show", {"repo_path": repo, "revision": commit})
            files = sorted({line[6:] for line in shown.splitlines() if line.startswith("+++ b/")})
            answer.append([commit[:8], files])
        return answer

    changed_script = f"""
log = await call("git_log", {{"repo_path": {repo!r}, "max_count": 5}})
answer = []
for line in log.splitlines():
    if line.startswith("Commit: "):
        commit = line[8:].strip()
        shown = await call("git_show", {{"repo_path": {repo!r}, "revision": commit}})
        files = sorted({{l[6:] for l in shown.splitlines() if l.startswith("+++ b/")}})
        answer.append([commit[:8], files])
answer
"""

    async def memory_twenty(mcp: ProxyCall) -> Any:
        entities = [
            {"name": p, "entityType": "person", "observations": [f"joined in week {i}"]}
            for i, p in enumerate(PEOPLE)
        ]
        await mcp("memory_create_entities", {"entities": entities})
        relations = [
            {"from": a, "to": b, "relationType": "mentors"} for a, b in itertools.pairwise(PEOPLE)
        ]
        await mcp("memory_create_relations", {"relations": relations})
        graph = json.loads(await mcp("memory_read_graph", {}))
        people = [e for e in graph["entities"] if e["entityType"] == "person"]
        return {"people": len(people), "relations": len(graph["relations"])}

    memory_script = f"""
people = {PEOPLE!r}
await call("memory_create_entities", {{"entities": [
    {{"name": p, "entityType": "person", "observations": ["joined in week " + str(i)]}}
    for i, p in enumerate(people)]}})
await call("memory_create_relations", {{"relations": [
    {{"from": a, "to": b, "relationType": "mentors"}} for a, b in zip(people, people[1:])]}})
graph = await call("memory_read_graph", {{}})
{{"people": len([e for e in graph["entities"] if e["entityType"] == "person"]),
 "relations": len(graph["relations"])}}
"""

    async def fetch_titles(mcp: ProxyCall) -> Any:
        answer = []
        for slug in PAGES:
            text = await mcp(
                "fetch_fetch", {"url": f"https://docs.example.test/{slug}", "max_length": 8000}
            )
            lines = text.splitlines()
            title = next(line[2:] for line in lines if line.startswith("# "))
            words = int(next(line for line in lines if line.startswith("*")).split()[0][1:])
            answer.append([title, words])
        return answer

    fetch_script = f"""
answer = []
for slug in {PAGES!r}:
    text = await call("fetch_fetch", {{"url": "https://docs.example.test/" + slug,
                                       "max_length": 8000}})
    lines = text.splitlines()
    title = [l[2:] for l in lines if l.startswith("# ")][0]
    words = int([l for l in lines if l.startswith("*")][0].split()[0][1:])
    answer.append([title, words])
answer
"""

    async def world_clock(mcp: ProxyCall) -> Any:
        offsets = []
        for city in CITIES:
            now = json.loads(await mcp("time_get_current_time", {"timezone": city}))
            offsets.append([city, now["datetime"][-6:]])
        return sorted(offsets, key=lambda pair: pair[1])

    clock_script = f"""
offsets = []
for city in {CITIES!r}:
    now = await call("time_get_current_time", {{"timezone": city}})
    offsets.append([city, now["datetime"][-6:]])
sorted(offsets, key=lambda pair: pair[1])
"""

    async def pages_to_memory(mcp: ProxyCall) -> Any:
        entities = []
        for slug in PAGES[:3]:
            text = await mcp(
                "fetch_fetch", {"url": f"https://docs.example.test/{slug}", "max_length": 8000}
            )
            title = next(line[2:] for line in text.splitlines() if line.startswith("# "))
            entities.append({"name": title, "entityType": "page", "observations": [slug]})
        await mcp("memory_create_entities", {"entities": entities})
        found = json.loads(await mcp("memory_search_nodes", {"query": "page"}))
        return sorted(e["name"] for e in found["entities"] if e["entityType"] == "page")

    pages_script = f"""
entities = []
for slug in {PAGES[:3]!r}:
    text = await call("fetch_fetch", {{"url": "https://docs.example.test/" + slug,
                                       "max_length": 8000}})
    title = [l[2:] for l in text.splitlines() if l.startswith("# ")][0]
    entities.append({{"name": title, "entityType": "page", "observations": [slug]}})
await call("memory_create_entities", {{"entities": entities}})
found = await call("memory_search_nodes", {{"query": "page"}})
sorted(e["name"] for e in found["entities"] if e["entityType"] == "page")
"""

    return [
        Task(
            "readme-commits-tokyo",
            "The three most recent commits that touched README.md, with their commit times "
            "converted to Tokyo time.",
            readme_commits,
            readme_script,
        ),
        Task(
            "changed-files",
            "Which files did each of the last five commits change?",
            changed_files,
            changed_script,
        ),
        Task(
            "memory-twenty",
            "Create these twenty people in memory, each mentoring the next, and report how "
            "many people and relations exist.",
            memory_twenty,
            memory_script,
        ),
        Task(
            "fetch-titles",
            "Fetch these four documentation pages and give each one's title and word count.",
            fetch_titles,
            fetch_script,
        ),
        Task(
            "world-clock",
            "The UTC offset now in six cities, sorted by offset.",
            world_clock,
            clock_script,
        ),
        Task(
            "pages-to-memory",
            "Fetch three pages, remember each page's title in memory, and list the pages "
            "memory knows.",
            pages_to_memory,
            pages_script,
        ),
    ]


# ---------------------------------------------------------------------- the servers


def make_repo(path: Path) -> Path:
    """Twelve commits, a day apart at varied hours; odd ones touch README.md."""
    path.mkdir(parents=True)
    env = {
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_SYSTEM": "/dev/null",
        "PATH": "/usr/bin:/bin",
    }

    def git(*args: str, date: str | None = None) -> None:
        extra = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else {}
        subprocess.run(
            ["git", "-c", "user.name=Bench", "-c", "user.email=bench@example.test", *args],
            cwd=path, env={**env, **extra}, check=True, capture_output=True,
        )  # fmt: skip

    git("init", "-q")
    for n in range(1, 13):
        name = "README.md" if n % 2 else f"src/module_{n}.py"
        target = path / name
        target.parent.mkdir(exist_ok=True)
        target.write_text("".join(f"line {i} of revision {n}\n" for i in range(30)))
        (path / "CHANGELOG.md").write_text(f"revision {n}\n")
        git("add", "-A")
        git(
            "commit",
            "-q",
            "-m",
            f"revision {n}",
            date=f"2024-03-{n:02d}T{(n * 5) % 24:02d}:15:00+00:00",
        )
    return path


def write_config(directory: Path, repo: Path) -> Path:
    servers: dict[str, Any] = {
        "git": {
            "command": sys.executable,
            "args": ["-m", "mcp_server_git", "--repository", str(repo)],
        },
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
        "fetch": {"command": sys.executable, "args": [str(FIXTURES / "fetch_like_server.py")]},
        "memory": {
            "command": "node",
            "args": [str(MEMORY_JS)],
            "env": {"MEMORY_FILE_PATH": str(directory / "memory.jsonl")},
        },
        "fixture": {"command": sys.executable, "args": [str(FIXTURES / "mcp_fixture.py")]},
    }  # fmt: skip
    agent = directory / "agent"
    agent.mkdir(parents=True)
    (agent / "mcp.json").write_text(
        json.dumps({"mcpServers": servers, "settings": {"idleTimeout": 0}})
    )
    return agent


# ---------------------------------------------------------------------- running


@dataclass
class Way:
    tokens: int
    turns: int
    calls: int
    answer: Any


_CALLED = re.compile(r"""\bcall\(\s*["']([\w.-]+)["']""")


def tools_of(task: Task) -> list[str]:
    """The tools a task calls, in order of first use (read from its script)."""
    return list(dict.fromkeys(_CALLED.findall(task.script)))


async def discover(proxy: ProxyTool, talk: Conversation, params: dict[str, Any]) -> None:
    result = await proxy.execute(params)
    if result.is_error:
        raise RuntimeError(f"discovery {params} failed: {result.text_content}")
    talk.tool_turn(json.dumps({"name": "mcp", "arguments": params}), result.text_content)


async def run_proxy(adapter: McpAdapter, task: Task, definitions: int) -> Way:
    proxy = ProxyTool(adapter)
    talk = Conversation(definitions, count_tokens(task.prompt))
    for name in tools_of(task):
        await discover(proxy, talk, {"describe": name})

    async def mcp(tool: str, args: dict[str, Any]) -> str:
        params = {"tool": tool, "args": args}
        result = await proxy.execute(params)
        if result.is_error:
            raise RuntimeError(f"{task.name}: {tool} failed: {result.text_content}")
        talk.tool_turn(json.dumps({"name": "mcp", "arguments": params}), result.text_content)
        talk.calls += 1
        return result.text_content

    answer = await task.proxy(mcp)
    talk.answer(answer)
    return Way(talk.context_tokens, talk.turns, talk.calls, answer)


async def run_script(adapter: McpAdapter, task: Task, definitions: int) -> Way:
    tool = ScriptTool(adapter)
    talk = Conversation(definitions, count_tokens(task.prompt))
    await discover(ProxyTool(adapter), talk, {"describe": ",".join(tools_of(task))})
    params = {"code": task.script.strip()}
    result = await tool.execute(params)
    if result.is_error:
        raise RuntimeError(f"{task.name}: the script failed: {result.text_content}")
    talk.tool_turn(json.dumps({"name": "mcp_script", "arguments": params}), result.text_content)
    answer = json.loads(result.text_content)
    talk.answer(answer)
    return Way(talk.context_tokens, talk.turns, int(result.details["calls"]), answer)


async def call_overhead(adapter: McpAdapter, calls: int, rounds: int) -> tuple[float, float]:
    """(direct engine call, script per-call cost) in ms, medians over ``rounds``."""
    tool = ScriptTool(adapter, limits=ScriptLimits(max_calls=calls + 10))
    loop = f'for i in range({calls}):\n    await call("fixture_echo", {{"message": "x"}})'
    direct, scripted = [], []
    await adapter.call("fixture_echo", {"message": "warm"})
    await tool.execute({"code": loop})
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            await adapter.call("fixture_echo", {"message": "x"})
        direct.append((time.perf_counter() - started) * 1000 / calls)
        started = time.perf_counter()
        await tool.execute({"code": "pass"})
        empty = time.perf_counter() - started
        started = time.perf_counter()
        result = await tool.execute({"code": loop})
        assert not result.is_error, result.text_content
        scripted.append((time.perf_counter() - started - empty) * 1000 / calls)
    return statistics.median(direct), statistics.median(scripted)


async def main(calls: int, rounds: int) -> None:
    if not MEMORY_JS.exists() or shutil.which("node") is None:
        sys.exit("server-memory is not installed: run `make npm` first")
    with tempfile.TemporaryDirectory(prefix="pi-mcp-bench-script-") as tmp:
        root = Path(tmp)
        repo = make_repo(root / "repo")
        tasks = make_tasks(str(repo))
        ways: dict[str, dict[str, Way]] = {}
        overhead: tuple[float, float] | None = None
        for way in ("proxy", "script"):
            agent = write_config(root / way, repo)
            async with McpAdapter(agent_dir=agent, project_dir=root / way, home=root) as adapter:
                await adapter.ready()
                proxy_def = ProxyTool(adapter).definition()
                script_def = ScriptTool(adapter).definition()
                # The host offers both tools either way: the definitions cost the same.
                definitions = definition_tokens(proxy_def) + definition_tokens(script_def)
                for task in tasks:
                    runner = run_proxy if way == "proxy" else run_script
                    ways.setdefault(task.name, {})[way] = await runner(adapter, task, definitions)
                if way == "script":
                    overhead = await call_overhead(adapter, calls, rounds)
    report(ways, overhead, calls)


def report(
    ways: dict[str, dict[str, Way]], overhead: tuple[float, float] | None, calls: int
) -> None:
    print(
        "| task | calls | context tokens, discovery included: per turn / script | ratio "
        "| tool turns: per turn / script | ratio | same answer |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, both in ways.items():
        proxy, script = both["proxy"], both["script"]
        same = proxy.answer == script.answer
        print(
            f"| {name} | {proxy.calls} | {proxy.tokens:,} / {script.tokens:,} "
            f"| {proxy.tokens / script.tokens:.1f}x fewer | {proxy.turns} / {script.turns} "
            f"| {proxy.turns / script.turns:.0f}x fewer | {'yes' if same else 'NO'} |"
        )
        if not same:
            print(f"  per turn: {proxy.answer}\n  script:   {script.answer}")
        record("script", f"context tokens with discovery, {name} ({proxy.calls} calls)",
               script.tokens, proxy.tokens, unit="tokens",
               baseline_name="one mcp call per turn")  # fmt: skip
        record("script", f"tool turns, {name}", script.turns, proxy.turns, unit="turns",
               baseline_name="one mcp call per turn")  # fmt: skip
    if overhead is not None:
        direct, scripted = overhead
        print(
            f"\nPer call over {calls} sequential calls of fixture echo: direct engine call "
            f"{direct:.3f} ms, from a script {scripted:.3f} ms, "
            f"overhead {scripted - direct:+.3f} ms"
        )
        record("script", "time per tool call from a script", scripted, direct, unit="ms",
               baseline_name="direct engine call")  # fmt: skip
    mismatched = [n for n, both in ways.items() if both["proxy"].answer != both["script"].answer]
    if mismatched:
        sys.exit(f"answers differ: {', '.join(mismatched)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per overhead round")
    parser.add_argument("--rounds", type=int, default=3, help="overhead rounds (median)")
    options = parser.parse_args()
    anyio.run(main, options.calls, options.rounds)
