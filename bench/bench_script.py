"""Code mode against two models without it: context tokens, turns and per-call overhead.

One catalog of real servers for every task: mcp-server-git (a repository made for the run),
mcp-server-time, ``@modelcontextprotocol/server-memory``, ``server-filesystem`` (a folder of
notes and the repository), ``server-everything`` (tests/npm), an offline fetch-like fixture
(tests/fixtures/fetch_like_server.py) and the test fixture server, 69 tools. Each task is
done by a scripted model three ways, each way with its own adapter and memory file:

- **one call per turn**: the model calls ``mcp({tool, args})``, reads the result, decides the
  next call, and so on;
- **parallel calls**: the same model, but the independent calls of a step go out in one turn
  (several tool calls in one model response); one turn per dependent step;
- **one script**: the model sends one ``mcp_script`` that finds its tools, calls them and
  returns only the answer.

Every model starts knowing only the task, not the catalog's tool names. Discovery is counted:
the first two ways search first (``mcp({search})``, one search per tool it needs; the parallel
model sends them in one turn) and take the top hit, whose parameters the search result shows;
the script searches inside the sandbox (``await search(words)``) and calls what it found in
the same run. The script is written with the arguments and result keys the model knows these
servers to take; a wrong guess would fail the script with the right signature in the error
(one more turn), and the bench stops on any failed script: the first script must be right.
All three ways must reach the same answer, which is checked.

Tokens are o200k tokens (``pi-mcp tokens`` counts the same way) that pass through the model's
context: each model request reads the tool definitions, the task and the whole conversation
so far (every argument object or script the model wrote, every result it got), and writes its
next call(s) or its answer. Turns are the model's tool round trips (the final answer is one
more request either way).

The overhead row compares a script that makes N sequential calls of the fixture's ``echo``
(less the same script with no calls, the sandbox's fixed start) against N direct engine calls
(``McpAdapter.call``) on the same server, same run.

Exits 1 when answers differ, a known answer is wrong, or a task of four or more calls takes
less than 5x fewer context tokens as a script than one call per turn (the target).

Usage: .venv/bin/python bench/bench_script.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from pi_mcp_adapter.engine import McpAdapter, ToolResult
from pi_mcp_adapter.surface._proxy import ProxyTool
from pi_mcp_adapter.surface._sandbox import ScriptLimits
from pi_mcp_adapter.surface._script import ScriptTool
from pi_mcp_adapter.surface._tokens import count_tokens
from pi_mcp_adapter.surface._tokens_report import definition_tokens

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _summary import record

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
NPM = ROOT / "tests/npm/node_modules/@modelcontextprotocol"
MEMORY_JS = NPM / "server-memory/dist/index.js"
FILESYSTEM_JS = NPM / "server-filesystem/dist/index.js"
EVERYTHING_JS = NPM / "server-everything/dist/index.js"
TOKYO = "Asia/Tokyo"
WEATHER_CITIES = {  # server-everything's weather cities, and their time zones
    "New York": "America/New_York",
    "Chicago": "America/Chicago",
    "Los Angeles": "America/Los_Angeles",
}
PAGES = ["mcp-overview", "tool-search", "sandbox-limits", "gateway-setup"]
CITIES = ["Europe/London", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "Asia/Kolkata",
          "America/Los_Angeles"]  # fmt: skip
PEOPLE = [f"person-{i:02d}" for i in range(20)]
MEETINGS = {"standup": "08:30", "design-review": "13:00", "planning": "16:45", "retro": "22:15"}
TEAM = {  # name: (role, manager)
    "Ada": ("director", None),
    "Grace": ("lead", "Ada"),
    "Linus": ("lead", "Ada"),
    "Barbara": ("engineer", "Grace"),
    "Ken": ("engineer", "Grace"),
    "Dennis": ("engineer", "Grace"),
    "Margaret": ("engineer", "Linus"),
}


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

    def tool_turn(self, written: Sequence[str], results: Sequence[str]) -> None:
        """One model response with one or more tool calls, then their results."""
        self.request("\n".join(written))
        self.turns += 1
        self.history.extend(count_tokens(text) for text in results)

    def answer(self, final: Any) -> None:
        self.request(json.dumps(final))


class Model:
    """The ``mcp`` calls of a scripted model that calls one tool per turn, or (``parallel``)
    sends the independent calls of a step in one turn."""

    def __init__(self, proxy: ProxyTool, talk: Conversation, task: str, *, parallel: bool):
        self._proxy = proxy
        self._talk = talk
        self._task = task
        self.parallel = parallel

    async def _turns(self, steps: Sequence[dict[str, Any]]) -> list[ToolResult]:
        batches = [list(steps)] if self.parallel else [[step] for step in steps]
        results: list[ToolResult] = []
        for batch in batches:
            answered = [await self._proxy.execute(params) for params in batch]
            for params, result in zip(batch, answered, strict=True):
                if result.is_error:
                    raise RuntimeError(f"{self._task}: {params} failed: {result.text_content}")
            written = [json.dumps({"name": "mcp", "arguments": params}) for params in batch]
            self._talk.tool_turn(written, [result.text_content for result in answered])
            results += answered
        return results

    async def find(self, *queries: str) -> list[str]:
        """Searches the catalog once per tool the task needs; the top hit of each."""
        results = await self._turns([{"search": query} for query in queries])
        return [str(result.details["matches"][0]["name"]) for result in results]

    async def call(self, tool: str, args: dict[str, Any]) -> str:
        return (await self.calls([(tool, args)]))[0]

    async def calls(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
        """Calls that do not depend on each other: one turn for them all when parallel."""
        results = await self._turns([{"tool": tool, "args": args} for tool, args in calls])
        self._talk.calls += len(results)
        return [result.text_content for result in results]


@dataclass(frozen=True)
class Task:
    name: str
    prompt: str
    proxy: Callable[[Model], Awaitable[Any]]
    """The model's decisions through ``mcp``; returns the final answer."""
    script: str
    """The same work as one script (the model writes it in one go)."""
    expected: Any = None
    """The right answer, where the bench knows it from the data it made."""


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


def title_of(page: str) -> str:
    return next(line[2:] for line in page.splitlines() if line.startswith("# "))


def fields_of(note: str) -> dict[str, str]:
    """``Key: value`` lines of a note."""
    pairs = (line.split(": ", 1) for line in note.splitlines() if ": " in line)
    return {key.strip(): value.strip() for key, value in pairs}


# The words each model searches with for a tool, the same in both ways.
GIT_LOG = "git commit log of a repository"
GIT_SHOW = "show the contents of a git commit"
CONVERT = "convert a time between timezones"
NOW = "current time in a timezone"
FETCH = "fetch a web page"
LIST_DIR = "list the files in a directory"
READ_FILE = "read a text file"
REMEMBER = "create entities in the knowledge graph"
RELATE = "create relations between entities"
READ_GRAPH = "read the entire knowledge graph"
FIND_NODES = "search nodes in the knowledge graph"
WEATHER = "weather in a city"


def found(names: str, *queries: str) -> str:
    """A script's discovery: the top search hit for each tool it needs."""
    if len(queries) == 1:
        return f'{names} = (await search({queries[0]!r}))[0]["name"]'
    words = "".join(f"\n    {query!r}," for query in queries)
    return f'{names} = [(await search(w))[0]["name"] for w in ({words}\n)]'


def make_tasks(repo: str, notes: str) -> list[Task]:
    def tokyo_time(convert: str, hhmm: str) -> tuple[str, dict[str, Any]]:
        args = {"source_timezone": "UTC", "time": hhmm, "target_timezone": TOKYO}
        return convert, args

    async def readme_commits(m: Model) -> Any:
        log_tool, show_tool, convert = await m.find(GIT_LOG, GIT_SHOW, CONVERT)
        log = await m.call(log_tool, {"repo_path": repo, "max_count": 12})
        commits = commits_of(log)
        touched = []
        if m.parallel:  # no way to know which touched README before reading: all at once
            shows = await m.calls(
                [(show_tool, {"repo_path": repo, "revision": c}) for c, _ in commits]
            )
            touched = [
                pair for pair, shown in zip(commits, shows, strict=True) if "README.md" in shown
            ][:3]
        else:
            for commit, date in commits:
                shown = await m.call(show_tool, {"repo_path": repo, "revision": commit})
                if "README.md" in shown:
                    touched.append((commit, date))
                if len(touched) == 3:
                    break
        converted = await m.calls([tokyo_time(convert, date[11:16]) for _, date in touched])
        return [
            [commit[:8], json.loads(text)["target"]["datetime"][11:16]]
            for (commit, _), text in zip(touched, converted, strict=True)
        ]

    readme_script = f"""
{found("log_tool, show, convert", GIT_LOG, GIT_SHOW, CONVERT)}
commits, current = [], None
for line in (await call(log_tool, {{"repo_path": {repo!r}, "max_count": 12}})).splitlines():
    if line.startswith("Commit: "):
        current = line[8:].strip()
    elif line.startswith("Date: ") and current:
        commits.append((current, line[6:22]))
        current = None
touched = []
for commit, date in commits:
    if "README.md" in await call(show, {{"repo_path": {repo!r}, "revision": commit}}):
        touched.append((commit, date))
    if len(touched) == 3:
        break
answer = []
for commit, date in touched:
    t = await call(convert, {{"source_timezone": "UTC", "time": date[11:16],
                             "target_timezone": "{TOKYO}"}})
    answer.append([commit[:8], t["target"]["datetime"][11:16]])
answer
"""

    async def changed_files(m: Model) -> Any:
        log_tool, show_tool = await m.find(GIT_LOG, GIT_SHOW)
        commits = commits_of(await m.call(log_tool, {"repo_path": repo, "max_count": 5}))
        shows = await m.calls([(show_tool, {"repo_path": repo, "revision": c}) for c, _ in commits])
        return [
            [c[:8], sorted({ln[6:] for ln in shown.splitlines() if ln.startswith("+++ b/")})]
            for (c, _), shown in zip(commits, shows, strict=True)
        ]

    changed_script = f"""
{found("log_tool, show", GIT_LOG, GIT_SHOW)}
log = await call(log_tool, {{"repo_path": {repo!r}, "max_count": 5}})
answer = []
for c in [l[8:].strip() for l in log.splitlines() if l.startswith("Commit: ")]:
    shown = await call(show, {{"repo_path": {repo!r}, "revision": c}})
    answer.append([c[:8], sorted({{l[6:] for l in shown.splitlines() if l.startswith("+++ b/")}})])
answer
"""

    async def memory_twenty(m: Model) -> Any:
        remember, relate, read_graph = await m.find(REMEMBER, RELATE, READ_GRAPH)
        entities = [
            {"name": p, "entityType": "person", "observations": [f"joined in week {i}"]}
            for i, p in enumerate(PEOPLE)
        ]
        await m.call(remember, {"entities": entities})
        relations = [
            {"from": a, "to": b, "relationType": "mentors"} for a, b in itertools.pairwise(PEOPLE)
        ]
        await m.call(relate, {"relations": relations})
        graph = json.loads(await m.call(read_graph, {}))
        people = [e for e in graph["entities"] if e["entityType"] == "person"]
        return {"people": len(people), "relations": len(graph["relations"])}

    memory_script = f"""
{found("remember, relate, read", REMEMBER, RELATE, READ_GRAPH)}
people = {PEOPLE!r}
await call(remember, {{"entities": [{{"name": p, "entityType": "person",
    "observations": ["joined in week " + str(i)]}} for i, p in enumerate(people)]}})
await call(relate, {{"relations": [{{"from": a, "to": b, "relationType": "mentors"}}
    for a, b in zip(people, people[1:])]}})
graph = await call(read, {{}})
{{"people": len([e for e in graph["entities"] if e["entityType"] == "person"]),
 "relations": len(graph["relations"])}}
"""

    def page_args(fetch: str, slug: str) -> tuple[str, dict[str, Any]]:
        return fetch, {"url": f"https://docs.example.test/{slug}", "max_length": 8000}

    async def fetch_titles(m: Model) -> Any:
        (fetch,) = await m.find(FETCH)
        pages = await m.calls([page_args(fetch, slug) for slug in PAGES])
        answer = []
        for text in pages:
            words = next(line for line in text.splitlines() if line.startswith("*"))
            answer.append([title_of(text), int(words.split()[0][1:])])
        return answer

    fetch_script = f"""
{found("fetch", FETCH)}
answer = []
for slug in {PAGES!r}:
    text = await call(fetch, {{"url": "https://docs.example.test/" + slug, "max_length": 8000}})
    lines = text.splitlines()
    words = [l for l in lines if l.startswith("*")][0].split()[0][1:]
    answer.append([[l[2:] for l in lines if l.startswith("# ")][0], int(words)])
answer
"""

    async def world_clock(m: Model) -> Any:
        (now,) = await m.find(NOW)
        times = await m.calls([(now, {"timezone": city}) for city in CITIES])
        offsets = [
            [city, json.loads(text)["datetime"][-6:]]
            for city, text in zip(CITIES, times, strict=True)
        ]
        return sorted(offsets, key=lambda pair: pair[1])

    clock_script = f"""
{found("now", NOW)}
offsets = [[c, (await call(now, {{"timezone": c}}))["datetime"][-6:]] for c in {CITIES!r}]
sorted(offsets, key=lambda p: p[1])
"""

    async def pages_to_memory(m: Model) -> Any:
        fetch, remember, find_nodes = await m.find(FETCH, REMEMBER, FIND_NODES)
        pages = await m.calls([page_args(fetch, slug) for slug in PAGES[:3]])
        entities = [
            {"name": title_of(text), "entityType": "page", "observations": [slug]}
            for slug, text in zip(PAGES[:3], pages, strict=True)
        ]
        await m.call(remember, {"entities": entities})
        found = json.loads(await m.call(find_nodes, {"query": "page"}))
        return sorted(e["name"] for e in found["entities"] if e["entityType"] == "page")

    pages_script = f"""
{found("fetch, remember, find", FETCH, REMEMBER, FIND_NODES)}
entities = []
for slug in {PAGES[:3]!r}:
    text = await call(fetch, {{"url": "https://docs.example.test/" + slug, "max_length": 8000}})
    title = [l[2:] for l in text.splitlines() if l.startswith("# ")][0]
    entities.append({{"name": title, "entityType": "page", "observations": [slug]}})
await call(remember, {{"entities": entities}})
found = await call(find, {{"query": "page"}})
sorted(e["name"] for e in found["entities"] if e["entityType"] == "page")
"""

    meetings = f"{notes}/meetings"

    async def meeting_times(m: Model) -> Any:
        list_dir, read_file, convert = await m.find(LIST_DIR, READ_FILE, CONVERT)
        listing = await m.call(list_dir, {"path": meetings})
        names = sorted(line[7:] for line in listing.splitlines() if line.startswith("[FILE] "))
        texts = await m.calls([(read_file, {"path": f"{meetings}/{name}"}) for name in names])
        whens = [fields_of(text)["When"] for text in texts]
        converted = await m.calls([tokyo_time(convert, when[11:16]) for when in whens])
        return [
            [fields_of(text)["Title"], json.loads(done)["target"]["datetime"][11:16]]
            for text, done in zip(texts, converted, strict=True)
        ]

    meetings_script = f"""
{found("ls, read, convert", LIST_DIR, READ_FILE, CONVERT)}
answer = []
for line in sorted((await call(ls, {{"path": {meetings!r}}})).splitlines()):
    if line.startswith("[FILE] "):
        text = await call(read, {{"path": {meetings!r} + "/" + line[7:]}})
        note = dict(l.split(": ", 1) for l in text.splitlines() if ": " in l)
        t = await call(convert, {{"source_timezone": "UTC", "time": note["When"][11:16],
                                 "target_timezone": "{TOKYO}"}})
        answer.append([note["Title"], t["target"]["datetime"][11:16]])
answer
"""

    team = f"{notes}/team"

    async def team_to_memory(m: Model) -> Any:
        list_dir, read_file, remember, relate, find_nodes = await m.find(
            LIST_DIR, READ_FILE, REMEMBER, RELATE, FIND_NODES
        )
        listing = await m.call(list_dir, {"path": team})
        names = sorted(line[7:] for line in listing.splitlines() if line.startswith("[FILE] "))
        notes_read = await m.calls([(read_file, {"path": f"{team}/{name}"}) for name in names])
        people = [fields_of(text) for text in notes_read]
        await m.call(remember, {"entities": [
            {"name": p["Name"], "entityType": "teammate", "observations": [p["Role"]]}
            for p in people
        ]})  # fmt: skip
        await m.call(relate, {"relations": [
            {"from": p["Name"], "to": p["Reports to"], "relationType": "reports_to"}
            for p in people if p.get("Reports to")
        ]})  # fmt: skip
        found = json.loads(await m.call(find_nodes, {"query": "teammate"}))
        reports: dict[str, int] = {}
        for relation in found["relations"]:
            reports[relation["to"]] = reports.get(relation["to"], 0) + 1
        return sorted(reports.items(), key=lambda pair: (-pair[1], pair[0]))[0][0]

    team_script = f"""
{found("ls, read, remember, relate, find", LIST_DIR, READ_FILE, REMEMBER, RELATE, FIND_NODES)}
people = []
for line in sorted((await call(ls, {{"path": {team!r}}})).splitlines()):
    if line.startswith("[FILE] "):
        text = await call(read, {{"path": {team!r} + "/" + line[7:]}})
        people.append(dict(l.split(": ", 1) for l in text.splitlines() if ": " in l))
await call(remember, {{"entities": [{{"name": p["Name"], "entityType": "teammate",
    "observations": [p["Role"]]}} for p in people]}})
await call(relate, {{"relations": [{{"from": p["Name"], "to": p["Reports to"],
    "relationType": "reports_to"}} for p in people if p.get("Reports to")]}})
reports = {{}}
for r in (await call(find, {{"query": "teammate"}}))["relations"]:
    reports[r["to"]] = reports.get(r["to"], 0) + 1
sorted(reports.items(), key=lambda p: (-p[1], p[0]))[0][0]
"""

    async def latest_commit_lines(m: Model) -> Any:
        log_tool, show_tool, read_file = await m.find(GIT_LOG, GIT_SHOW, READ_FILE)
        ((commit, _),) = commits_of(await m.call(log_tool, {"repo_path": repo, "max_count": 1}))
        shown = await m.call(show_tool, {"repo_path": repo, "revision": commit})
        files = sorted({line[6:] for line in shown.splitlines() if line.startswith("+++ b/")})
        texts = await m.calls([(read_file, {"path": f"{repo}/{name}"}) for name in files])
        return [[name, len(text.splitlines())] for name, text in zip(files, texts, strict=True)]

    lines_script = f"""
{found("log_tool, show, read", GIT_LOG, GIT_SHOW, READ_FILE)}
log = await call(log_tool, {{"repo_path": {repo!r}, "max_count": 1}})
commit = log.split("Commit: ")[1].split()[0]
shown = await call(show, {{"repo_path": {repo!r}, "revision": commit}})
answer = []
for f in sorted({{l[6:] for l in shown.splitlines() if l.startswith("+++ b/")}}):
    answer.append([f, len((await call(read, {{"path": {repo!r} + "/" + f}})).splitlines())])
answer
"""

    async def warmest_city(m: Model) -> Any:
        weather, now = await m.find(WEATHER, NOW)
        reports = await m.calls([(weather, {"location": city}) for city in WEATHER_CITIES])
        temperatures = {
            city: json.loads(text)["temperature"]
            for city, text in zip(WEATHER_CITIES, reports, strict=True)
        }
        warmest = max(temperatures, key=lambda city: temperatures[city])
        local = json.loads(await m.call(now, {"timezone": WEATHER_CITIES[warmest]}))
        return [warmest, temperatures[warmest], local["datetime"][-6:]]

    warmest_script = f"""
{found("weather, now", WEATHER, NOW)}
zones = {WEATHER_CITIES!r}
temperatures = {{c: (await call(weather, {{"location": c}}))["temperature"] for c in zones}}
warmest = max(temperatures, key=lambda c: temperatures[c])
local = await call(now, {{"timezone": zones[warmest]}})
[warmest, temperatures[warmest], local["datetime"][-6:]]
"""

    return [
        Task("readme-commits-tokyo", "The three most recent commits that touched README.md, "
             f"with their commit times converted to Tokyo time. The repository: {repo}",
             readme_commits, readme_script),
        Task("changed-files", f"Which files did each of the last five commits of {repo} change?",
             changed_files, changed_script),
        Task("memory-twenty", "Create these twenty people in memory, each mentoring the next, "
             "and report how many people and relations exist.", memory_twenty, memory_script),
        Task("fetch-titles", "Fetch these four documentation pages and give each one's title "
             "and word count.", fetch_titles, fetch_script),
        Task("world-clock", "The UTC offset now in six cities, sorted by offset.",
             world_clock, clock_script),
        Task("pages-to-memory", "Fetch three pages, remember each page's title in memory, and "
             "list the pages memory knows.", pages_to_memory, pages_script),
        Task("meetings-in-tokyo", f"The meetings in my notes ({notes}), each with its time in "
             "Tokyo.", meeting_times, meetings_script,
             [["Design review", "22:00"], ["Planning", "01:45"], ["Retro", "07:15"],
              ["Standup", "17:30"]]),
        Task("team-into-memory", f"Put the team described in my notes ({notes}) into memory, "
             "each reporting to their manager, and tell me who has the most direct reports.",
             team_to_memory, team_script, "Grace"),
        Task("latest-commit-lines", f"How many lines does each file that the latest commit of "
             f"{repo} changed have now?", latest_commit_lines, lines_script,
             [["CHANGELOG.md", 12], ["src/module_12.py", 42]]),
        Task("warmest-city", "Which of New York, Chicago and Los Angeles is warmest now, how "
             "warm, and what is its UTC offset?", warmest_city, warmest_script),
    ]  # fmt: skip


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
        target.write_text("".join(f"line {i} of revision {n}\n" for i in range(30 + n)))
        (path / "CHANGELOG.md").write_text("".join(f"revision {k}\n" for k in range(1, n + 1)))
        git("add", "-A")
        git(
            "commit",
            "-q",
            "-m",
            f"revision {n}",
            date=f"2024-03-{n:02d}T{(n * 5) % 24:02d}:15:00+00:00",
        )
    return path


def make_notes(path: Path) -> Path:
    """A folder of notes: meetings with their UTC times, and a team, one person a file."""
    (path / "meetings").mkdir(parents=True)
    for day, (slug, hhmm) in enumerate(MEETINGS.items(), start=4):
        title = slug.replace("-", " ").capitalize()
        (path / "meetings" / f"{slug}.md").write_text(
            f"Title: {title}\nWhen: 2024-06-{day:02d} {hhmm} UTC\nRoom: 4.{day}\n\n"
            + "".join(f"- agenda point {i}\n" for i in range(6))
        )
    (path / "team").mkdir()
    for name, (role, manager) in TEAM.items():
        lines = [f"Name: {name}", f"Role: {role}"]
        if manager:
            lines.append(f"Reports to: {manager}")
        (path / "team" / f"{name.lower()}.md").write_text("\n".join(lines) + "\n")
    return path


def write_config(directory: Path, repo: Path, notes: Path) -> Path:
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
        "fs": {"command": "node", "args": [str(FILESYSTEM_JS), str(notes), str(repo)]},
        "everything": {"command": "node", "args": [str(EVERYTHING_JS)]},
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


WAYS = ("per turn", "parallel", "script")
TARGET_RATIO = 5
TARGET_MIN_CALLS = 4


async def run_model(adapter: McpAdapter, task: Task, definitions: int, *, parallel: bool) -> Way:
    talk = Conversation(definitions, count_tokens(task.prompt))
    model = Model(ProxyTool(adapter), talk, task.name, parallel=parallel)
    answer = await task.proxy(model)
    talk.answer(answer)
    return Way(talk.context_tokens, talk.turns, talk.calls, answer)


async def run_script(adapter: McpAdapter, task: Task, definitions: int) -> Way:
    talk = Conversation(definitions, count_tokens(task.prompt))
    params = {"code": task.script.strip()}
    result = await ScriptTool(adapter).execute(params)
    if result.is_error:
        raise RuntimeError(f"{task.name}: the first script failed: {result.text_content}")
    talk.tool_turn([json.dumps({"name": "mcp_script", "arguments": params})], [result.text_content])
    try:  # a value that is a string comes back as it is, anything else as JSON
        answer = json.loads(result.text_content)
    except ValueError:
        answer = result.text_content
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
    needed = [MEMORY_JS, FILESYSTEM_JS, EVERYTHING_JS]
    if not all(path.exists() for path in needed) or shutil.which("node") is None:
        sys.exit("the npm test servers are not installed: run `make npm` first")
    with tempfile.TemporaryDirectory(prefix="pi-mcp-bench-script-") as tmp:
        root = Path(tmp)
        repo = make_repo(root / "repo")
        notes = make_notes(root / "notes")
        tasks = make_tasks(str(repo), str(notes))
        ways: dict[str, dict[str, Way]] = {}
        overhead: tuple[float, float] | None = None
        for way in WAYS:
            agent = write_config(root / way.replace(" ", "-"), repo, notes)
            async with McpAdapter(agent_dir=agent, project_dir=agent.parent, home=root) as adapter:
                await adapter.ready()
                # The host offers both tools every way: the definitions cost the same.
                definitions = definition_tokens(ProxyTool(adapter).definition())
                definitions += definition_tokens(ScriptTool(adapter).definition())
                for task in tasks:
                    if way == "script":
                        done = await run_script(adapter, task, definitions)
                    else:
                        parallel = way == "parallel"
                        done = await run_model(adapter, task, definitions, parallel=parallel)
                    ways.setdefault(task.name, {})[way] = done
                if way == "script":
                    overhead = await call_overhead(adapter, calls, rounds)
    wrong = [
        f"{task.name} ({way}): {done.answer!r}, expected {task.expected!r}"
        for task in tasks
        if task.expected is not None
        for way, done in ways[task.name].items()
        if done.answer != task.expected
    ]
    report(ways, overhead, calls)
    if wrong:
        sys.exit("wrong answers:\n" + "\n".join(wrong))


def report(
    ways: dict[str, dict[str, Way]], overhead: tuple[float, float] | None, calls: int
) -> None:
    print(
        "| task | calls | context tokens, discovery included: per turn / parallel / script "
        "| script: fewer tokens than per turn / parallel "
        "| tool turns: per turn / parallel / script | same answer |"
    )
    print("|---|---|---|---|---|---|")
    for name, done in ways.items():
        turn, parallel, script = (done[way] for way in WAYS)
        same = turn.answer == parallel.answer == script.answer
        print(
            f"| {name} | {turn.calls} | {turn.tokens:,} / {parallel.tokens:,} / "
            f"{script.tokens:,} | {turn.tokens / script.tokens:.1f}x / "
            f"{parallel.tokens / script.tokens:.1f}x | {turn.turns} / {parallel.turns} / "
            f"{script.turns} | {'yes' if same else 'NO'} |"
        )
        if not same:
            for way in WAYS:
                print(f"  {way}: {done[way].answer}")
        # Turns against one call per turn are the calls and searches: only the parallel
        # model's turns say something the table does not.
        for label, baseline in (("one mcp call per turn", turn), ("parallel mcp calls", parallel)):
            record("script", f"context tokens with discovery, {name} ({turn.calls} calls)",
                   script.tokens, baseline.tokens, unit="tokens",
                   baseline_name=label)  # fmt: skip
        record("script", f"tool turns, {name}", script.turns, parallel.turns, unit="turns",
               baseline_name="parallel mcp calls")  # fmt: skip
    if overhead is not None:
        direct, scripted = overhead
        print(
            f"\nPer call over {calls} sequential calls of fixture echo: direct engine call "
            f"{direct:.3f} ms, from a script {scripted:.3f} ms, "
            f"overhead {scripted - direct:+.3f} ms"
        )
        record("script", "time per tool call from a script", scripted, direct, unit="ms",
               baseline_name="direct engine call")  # fmt: skip
    mismatched = [
        name
        for name, done in ways.items()
        if not done["per turn"].answer == done["parallel"].answer == done["script"].answer
    ]
    if mismatched:
        sys.exit(f"answers differ: {', '.join(mismatched)}")
    # The target of code mode: a task of four or more calls the other way costs at least 5x
    # fewer context tokens as a script, discovery included.
    missed = [
        f"{name} ({done['per turn'].tokens / done['script'].tokens:.2f}x)"
        for name, done in ways.items()
        if done["per turn"].calls >= TARGET_MIN_CALLS
        and done["per turn"].tokens < TARGET_RATIO * done["script"].tokens
    ]
    if missed:
        sys.exit(f"under {TARGET_RATIO}x fewer tokens than one call per turn: {', '.join(missed)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per overhead round")
    parser.add_argument("--rounds", type=int, default=3, help="overhead rounds (median)")
    options = parser.parse_args()
    anyio.run(main, options.calls, options.rounds)
