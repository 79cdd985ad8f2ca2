"""The CLI answers in a blink: help, version and cache-only commands never import the MCP SDK,
which alone costs most of a second, nor anything else they do not use: no event loop, no
tokenizer, no regex engine, no TOML parser (``bench/bench_cli_start.py`` measures the time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pi_mcp_adapter.catalog._search_rankings import RANKINGS
from pi_mcp_adapter.cli._eval_cmds import RANKING_NAMES

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_fixture.py"
SDK = ("mcp", "mcp_types", "httpx2", "jsonschema")
# What a cache-only command has no use for: each costs from a few to tens of milliseconds.
UNUSED = ("asyncio", "ssl", "tokenizers", "safetensors", "regex", "tomllib", "rich")
PROBE = """
import atexit, sys
def report():
    heavy = sorted(m for m in sys.modules if m in HEAVY or m.startswith(("mcp.", "mcp_types.")))
    sys.stderr.write("IMPORTED " + json.dumps(heavy) + "\\n")
import json
HEAVY = set(sys.argv.pop(1).split(","))
atexit.register(report)
from pi_mcp_adapter.cli import main
main(sys.argv[1:])
"""


def heavy_imports(home: Path, *args: str) -> list[str]:
    env = {**os.environ, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / "agent")}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            ",".join(SDK + UNUSED),
            "--project",
            str(home / "project"),
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = next(x for x in out.stderr.splitlines() if x.startswith("IMPORTED "))
    imported: list[str] = json.loads(line.removeprefix("IMPORTED "))
    return imported


@pytest.mark.slow
def test_help_version_and_cache_only_commands_import_nothing_they_do_not_use(
    tmp_path: Path,
) -> None:
    (tmp_path / "agent").mkdir()
    (tmp_path / "project").mkdir()
    config = {"mcpServers": {"fx": {"command": sys.executable, "args": [str(FIXTURE)]}}}
    (tmp_path / "agent" / "mcp.json").write_text(json.dumps(config))
    assert heavy_imports(tmp_path, "--help") == []
    assert heavy_imports(tmp_path, "--version") == []
    # The first run lists the server (that needs the SDK); later ones answer from the cache.
    assert "mcp" in heavy_imports(tmp_path, "tools")
    # The first search embeds the tools (with the tokenizer) and keeps their vectors.
    heavy_imports(tmp_path, "search", "anything")
    for args in (
        ("search", "echo"),
        ("search", "echo the message back"),
        ("describe", "fx_echo"),
        ("status",),
        ("tools",),
        ("tools", "fx"),
        ("search", "--help"),
    ):
        # A warm search embeds its query with the memory-mapped table alone: the words of
        # the catalog's tools have their token ids in the tool-vector file.
        assert heavy_imports(tmp_path, *args) == [], args
    assert heavy_imports(tmp_path, "search", "--regex", "ech.") == ["regex"]
    assert "mcp" in heavy_imports(tmp_path, "call", "fx_echo", '{"message": "x"}')


def test_the_rankings_listed_in_help_are_the_catalogs() -> None:
    assert sorted(RANKING_NAMES) == sorted(RANKINGS)


FORKS = """
import json, os, sys
from pi_mcp_adapter._warm import _server
_server._command = _server.preload()
for args in json.loads(sys.argv[1]):
    pid = os.fork()
    if pid == 0:  # as the warm process runs each command
        before = set(sys.modules)
        sys.stdout = open(os.devnull, "w")
        code = _server._run_command(args)
        new = sorted(set(sys.modules) - before)
        sys.stderr.write("IMPORTED " + json.dumps([args, code, new]) + "\\n")
        sys.stderr.flush()
        os._exit(0)
    os.waitpid(pid, 0)
"""


@pytest.mark.slow
def test_a_warm_process_has_imported_everything_a_cached_command_uses(tmp_path: Path) -> None:
    # Each command the warm process forks for would otherwise import (and, without bytecode
    # files, compile) what it lacks, every time: the search index's modules were a quarter of
    # a warm search of 2,375 tools.
    (tmp_path / "agent").mkdir()
    (tmp_path / "project").mkdir()
    config = {"mcpServers": {"fx": {"command": sys.executable, "args": [str(FIXTURE)]}}}
    (tmp_path / "agent" / "mcp.json").write_text(json.dumps(config))
    heavy_imports(tmp_path, "tools")  # lists the server into the cache
    heavy_imports(tmp_path, "search", "anything")  # embeds its tools
    commands = [
        ["search", "echo the message back"],
        ["search", "--json", "echo"],
        ["search", "--regex", "ech."],
        ["describe", "fx_echo"],
        ["status"],
        ["status", "--json"],
        ["tools"],
        ["tools", "fx"],
    ]
    project = ["--project", str(tmp_path / "project")]
    env = {**os.environ, "HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    out = subprocess.run(
        [sys.executable, "-c", FORKS, json.dumps([[*project, *c] for c in commands])],
        env={**env, "PI_MCP_WARM": "0"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    reports = [
        json.loads(line.removeprefix("IMPORTED "))
        for line in out.stderr.splitlines()
        if line.startswith("IMPORTED ")
    ]
    assert len(reports) == len(commands), out.stderr
    for args, code, imported in reports:
        assert code == 0, (args, out.stderr)
        assert imported == [], args


COPIED = """
import gc, os, sys
import psutil
from pi_mcp_adapter._warm import _server
_server.preload()
read, write = os.pipe()
pid = os.fork()
if pid == 0:  # a command's fork, collecting everything
    own = psutil.Process()
    before = own.memory_full_info().uss
    gc.collect()
    grown = own.memory_full_info().uss - before
    os.write(write, str(grown).encode())
    os._exit(0)
os.waitpid(pid, 0)
print(os.read(read, 64).decode())
"""


@pytest.mark.slow
def test_a_fork_of_the_warm_process_collecting_garbage_copies_nothing_it_inherited() -> None:
    # Memory a fork shares with the warm process stays shared until the fork writes to it; a
    # collection that walked the inherited objects wrote to every page holding one.
    out = subprocess.run(
        [sys.executable, "-c", COPIED], capture_output=True, text=True, timeout=120, check=True
    )
    grown = int(out.stdout.strip().splitlines()[-1])
    assert grown < 8 * 2**20, f"the collection made {grown / 2**20:.1f} MB private"
