"""Driving ``pi-mcp`` on a pseudo-terminal, as a person at a terminal would.

The command's stdin and stderr are the slave side of a pty (questions go to stderr, answers come
from stdin); stdout stays a pipe so the result can be read apart from the questions. A script
is a list of ``(marker, keys)``: wait until ``marker`` is on the terminal, then type ``keys``.

Also runnable as a program, for the conformance suite's client mode (which appends the URL of
its test server): ``python tests/cli/terminal.py TOOL URL`` calls TOOL of that server through
``pi-mcp call`` on a pty and presses Enter at every prompt, accepting every default.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

Script = Sequence[tuple[bytes, bytes]]

TIMEOUT_S = 90.0
"""A whole run: a server start, a connect and a few prompts (the slow part is Python's start)."""


def pi_mcp(home: Path, *args: str) -> tuple[list[str], dict[str, str]]:
    """``pi-mcp`` with ``home/agent`` as agent dir and ``home/project`` as project."""
    env = {**os.environ, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / "agent")}
    argv = [sys.executable, "-m", "pi_mcp_adapter", "--project", str(home / "project"), *args]
    return argv, env


def _read(fd: int, deadline: float) -> bytes | None:
    """The next output, or None once the program closed the terminal."""
    remaining = deadline - time.monotonic()
    assert remaining > 0, "the program neither asked nor ended in time"
    if not select.select([fd], [], [], remaining)[0]:
        return b""
    try:
        return os.read(fd, 4096) or None
    except OSError:  # the slave side closed: the program ended
        return None


def run_on_terminal(
    argv: list[str], env: dict[str, str], script: Script, *, answer_rest: bytes | None = None
) -> tuple[subprocess.CompletedProcess[str], bytes]:
    """Run ``argv`` on a pty following ``script``; the result and everything shown.

    With ``answer_rest``, every further prompt (a line ending in ``": "``) gets those keys.
    """
    master, slave = pty.openpty()
    process = subprocess.Popen(
        argv, stdin=slave, stdout=subprocess.PIPE, stderr=slave, env=env, text=True
    )
    os.close(slave)
    deadline = time.monotonic() + TIMEOUT_S
    shown = b""
    steps = list(script)
    answered = 0
    try:
        while True:
            if steps and steps[0][0] in shown[answered:]:
                marker, keys = steps.pop(0)
                answered = shown.index(marker, answered) + len(marker)
                os.write(master, keys)
                continue
            if not steps and answer_rest is not None and shown[answered:].endswith(b": "):
                answered = len(shown)
                os.write(master, answer_rest)
                continue
            chunk = _read(master, deadline)
            if chunk is None:
                break
            shown += chunk
        stdout, _ = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        os.close(master)
    assert not steps, f"never saw {steps[0][0]!r}; the terminal showed {shown[-800:]!r}"
    return subprocess.CompletedProcess(argv, process.returncode, stdout, ""), shown


def _conformance_client(tool: str, url: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "project").mkdir()
        (home / "agent").mkdir()
        config = {"mcpServers": {"conformance": {"url": url}}}
        (home / "agent" / "mcp.json").write_text(json.dumps(config))
        argv, env = pi_mcp(home, "call", tool, "{}")
        result, shown = run_on_terminal(argv, env, [], answer_rest=b"\n")
        sys.stderr.write(shown.decode(errors="replace"))
        sys.stdout.write(result.stdout)
        return result.returncode


if __name__ == "__main__":
    raise SystemExit(_conformance_client(sys.argv[1], sys.argv[-1]))
