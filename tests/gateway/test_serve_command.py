"""``pi-mcp serve`` options: ``--print-config`` entries, unsafe options, and a gateway that
would start itself."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter.cli import app
from pi_mcp_adapter.config import load_config
from pi_mcp_adapter.hosts._gateway_serve import (
    BearerTokenGuard,
    GatewayOptions,
    is_loopback,
    without_gateway_itself,
)

runner = CliRunner()
TOKEN = "s3cret-token-value"


def _print_config(
    tmp_path: Path, *extra: str, env: dict[str, str] | None = None, global_options: bool = False
) -> Any:
    """``serve --print-config *extra``; with ``global_options``, ``extra[0]`` is a global
    option given before ``serve``."""
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {}}')
    before = list(extra[:1]) if global_options else []
    after = list(extra[1:] if global_options else extra)
    return runner.invoke(
        app,
        ["--config", str(config), *before, "serve", "--print-config", *after],
        env=env,
    )


@pytest.mark.parametrize(
    ("client", "path"),
    [
        pytest.param("claude-code", ("mcpServers", "pi-mcp"), id="claude-code"),
        pytest.param("cursor", ("mcpServers", "pi-mcp"), id="cursor"),
        pytest.param("claude-desktop", ("mcpServers", "pi-mcp"), id="claude-desktop"),
        pytest.param("vscode", ("servers", "pi-mcp"), id="vscode"),
    ],
)
def test_stdio_entries_run_serve_with_the_same_config(
    tmp_path: Path, client: str, path: tuple[str, str]
) -> None:
    result = _print_config(tmp_path, client, "--surface", "toolsearch")
    assert result.exit_code == 0, result.output
    entry = json.loads(result.stdout)[path[0]][path[1]]
    assert Path(entry["command"]).name == "pi-mcp"
    assert entry["args"] == [
        "--config",
        str((tmp_path / "mcp.json").resolve()),
        "serve",
        "--surface",
        "toolsearch",
    ]


def test_an_entry_keeps_the_exclusive_flag(tmp_path: Path) -> None:
    result = _print_config(tmp_path, "--exclusive", "claude-code", global_options=True)
    assert result.exit_code == 0, result.output
    args = json.loads(result.stdout)["mcpServers"]["pi-mcp"]["args"]
    assert args[:3] == ["--config", str((tmp_path / "mcp.json").resolve()), "--exclusive"]


def test_codex_and_opencode_entries_are_in_their_own_formats(tmp_path: Path) -> None:
    codex = tomllib.loads(_print_config(tmp_path, "codex").stdout)
    assert codex["mcp_servers"]["pi-mcp"]["args"][-1] == "serve"
    opencode = json.loads(_print_config(tmp_path, "opencode").stdout)
    command = opencode["mcp"]["pi-mcp"]["command"]
    assert Path(command[0]).name == "pi-mcp"
    assert command[-1] == "serve"


@pytest.mark.parametrize("client", ["claude-code", "cursor", "vscode", "codex", "opencode"])
def test_http_entries_point_at_the_url_and_never_print_the_token(
    tmp_path: Path, client: str
) -> None:
    result = _print_config(
        tmp_path, client, "--transport", "http", "--port", "9911", "--auth-token", TOKEN
    )
    assert result.exit_code == 0, result.output
    assert "http://127.0.0.1:9911/mcp" in result.stdout
    assert "PI_MCP_GATEWAY_TOKEN" in result.stdout
    assert TOKEN not in result.stdout


def test_an_unknown_client_is_refused(tmp_path: Path) -> None:
    result = _print_config(tmp_path, "notepad")
    assert result.exit_code == 2
    assert "claude-code" in result.stderr


def test_a_public_address_needs_a_token_and_loopback_does_not() -> None:
    with pytest.raises(UsageError, match="without a token"):
        GatewayOptions(transport="http", host="0.0.0.0")
    assert GatewayOptions(transport="http", host="0.0.0.0", auth_token=TOKEN).auth_token
    assert GatewayOptions(transport="http", host="localhost").auth_token is None
    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "10.0.0.1", "::")] == [
        True,
        True,
        True,
        False,
        False,
    ]


def test_servers_that_start_the_gateway_itself_are_skipped(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "loop": {"command": "/usr/local/bin/pi-mcp", "args": ["serve"]},
                    "loop-module": {
                        "command": "python",
                        "args": ["-m", "pi_mcp_adapter.cli", "--config", "x", "serve"],
                    },
                    "tools": {"command": "pi-mcp-tools", "args": ["serve"]},
                    "time": {"command": "mcp-server-time"},
                }
            }
        )
    )
    loaded = load_config(agent_dir=tmp_path, project_dir=tmp_path, config_path=config, environ={})
    kept, skipped = without_gateway_itself(loaded)
    assert sorted(skipped) == ["loop", "loop-module"]
    assert sorted(kept.servers) == ["time", "tools"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("header", "status"),
    [
        pytest.param(None, 401, id="missing"),
        pytest.param(b"Bearer wrong", 401, id="wrong"),
        pytest.param(b"Basic " + TOKEN.encode(), 401, id="other-scheme"),
        pytest.param(b"Bearer " + TOKEN.encode(), 200, id="right"),
        pytest.param(b"bearer " + TOKEN.encode(), 200, id="scheme-case"),
    ],
)
async def test_the_token_guard(header: bytes | None, status: int) -> None:
    sent: list[dict[str, Any]] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    headers = [(b"authorization", header)] if header is not None else []
    guard = BearerTokenGuard(inner, TOKEN)
    await guard({"type": "http", "headers": headers}, receive, send)
    assert sent[0]["status"] == status


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
