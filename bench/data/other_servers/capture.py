"""Capture the tool lists of the held-out second catalog from real MCP servers.

The catalog is servers that nothing else in the project uses, so search was never tuned on
their tools. They are not dependencies of the project; install them anywhere and point this
script at their executables::

    npm install --ignore-scripts --prefix /tmp/other @modelcontextprotocol/server-github \
        @modelcontextprotocol/server-puppeteer @modelcontextprotocol/server-slack \
        @modelcontextprotocol/server-brave-search @modelcontextprotocol/server-google-maps \
        @modelcontextprotocol/server-sequential-thinking
    python -m venv /tmp/other/py && /tmp/other/py/bin/pip install mcp-server-sqlite \
        arxiv-mcp-server excel-mcp-server mcp-server-sentry
    .venv/bin/python bench/data/other_servers/capture.py /tmp/other/node_modules/.bin \
        /tmp/other/py/bin

Listing tools needs no network and no real credential: the servers that want a token get a
placeholder. Each server's ``tools/list`` is written to ``<server>.json`` beside this script.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import StdioServerParameters

HERE = Path(__file__).resolve().parent
# The test fixtures' capture script lists a server's tools the same way.
sys.path.insert(0, str(HERE.parents[2] / "tests" / "catalog" / "data"))
from refresh import dump_tools  # noqa: E402

PLACEHOLDER = "placeholder-not-a-credential"


def servers(npm_bin: Path, py_bin: Path, scratch: Path) -> dict[str, StdioServerParameters]:
    def npm(name: str, *args: str, **env: str) -> StdioServerParameters:
        return StdioServerParameters(command=str(npm_bin / name), args=list(args), env=env)

    def py(name: str, *args: str) -> StdioServerParameters:
        return StdioServerParameters(command=str(py_bin / name), args=list(args))

    return {
        "github": npm("mcp-server-github", GITHUB_PERSONAL_ACCESS_TOKEN=PLACEHOLDER),
        "puppeteer": npm("mcp-server-puppeteer"),
        "slack": npm("mcp-server-slack", SLACK_BOT_TOKEN=PLACEHOLDER, SLACK_TEAM_ID="T0"),
        "brave-search": npm("mcp-server-brave-search", BRAVE_API_KEY=PLACEHOLDER),
        "google-maps": npm("mcp-server-google-maps", GOOGLE_MAPS_API_KEY=PLACEHOLDER),
        "sequential-thinking": npm("mcp-server-sequential-thinking"),
        "sqlite": py("mcp-server-sqlite", "--db-path", str(scratch / "db.sqlite")),
        "arxiv": py("arxiv-mcp-server", "--storage-path", str(scratch / "papers")),
        "excel": py("excel-mcp-server", "stdio"),
        "sentry": py("mcp-server-sentry", "--auth-token", PLACEHOLDER),
    }


async def main(npm_bin: Path, py_bin: Path) -> int:
    failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        for name, params in servers(npm_bin, py_bin, Path(scratch)).items():
            try:
                tools = await dump_tools(params)
            except Exception as exc:  # report and go on with the others
                print(f"{name}: {exc!r}", file=sys.stderr)
                failed += 1
                continue
            (HERE / f"{name}.json").write_text(json.dumps({"tools": tools}, indent=1) + "\n")
            print(f"{name}: {len(tools)} tools")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, Path(sys.argv[1]), Path(sys.argv[2])))
