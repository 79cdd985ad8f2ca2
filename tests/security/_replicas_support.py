"""What the replica and Redis-restart attack tests share: the ledger server's entry, reading
its ledger, and one raw Streamable HTTP request as a load balancer would replay it."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
LEDGER_SERVER = REPO / "tests" / "fixtures" / "ledger_server.py"
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-11-25",
}


def ledger_entry(ledger: Path, *, hold: Path | None = None, **extra: Any) -> dict[str, Any]:
    args = [str(LEDGER_SERVER), str(ledger)]
    if hold is not None:
        args += ["--hold", str(hold)]
    return {"command": sys.executable, "args": args, "directTools": True, **extra}


def executions(ledger: Path) -> Counter[tuple[str, str]]:
    """How many times each ``(tool, tag)`` started upstream."""
    if not ledger.exists():
        return Counter()
    return Counter(
        (parts[0], parts[1])
        for parts in (line.split() for line in ledger.read_text().splitlines())
        if len(parts) == 3
    )


def ledger_pids(ledger: Path) -> list[int]:
    """The process id of the server that started each call, in order."""
    if not ledger.exists():
        return []
    return [
        int(line.split()[2]) for line in ledger.read_text().splitlines() if line.count(" ") == 2
    ]


def tool_call_body(tool: str, tag: str, request_id: int = 1) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {"tag": tag}},
    }
    return json.dumps(message).encode()


async def post_call(
    http: httpx.AsyncClient, url: str, body: bytes, *, proxy_request_id: str | None
) -> dict[str, Any]:
    """POST one JSON-RPC request as the balancer forwards it; the JSON-RPC result."""
    headers = dict(MCP_HEADERS)
    if proxy_request_id is not None:
        headers["X-Request-Id"] = proxy_request_id
    response = await http.post(url, content=body, headers=headers)
    assert response.status_code == 200, response.text
    for line in response.text.splitlines():
        if line.startswith("data: "):
            message: dict[str, Any] = json.loads(line[len("data: ") :])
            return message["result"]  # type: ignore[no-any-return]
    message = response.json()
    return message["result"]  # type: ignore[no-any-return]


def result_text(result: dict[str, Any]) -> str:
    return "\n".join(str(block.get("text", "")) for block in result.get("content", []))
