"""``pi-mcp`` as people use it: broken servers, pipes, large data, messages and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "mcp_fixture.py"
LONG_NAMES = "a_server_with_a_rather_long_name"


def pi_mcp(
    home: Path, *args: str, input: str | None = None, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / "agent")}
    env.pop("PI_MCP_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "pi_mcp_adapter", "--project", str(home / "project"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
    )


def make_home(tmp_path: Path, servers: dict[str, Any], settings: Any = None) -> Path:
    (tmp_path / "agent").mkdir()
    (tmp_path / "project").mkdir()
    config: dict[str, Any] = {"mcpServers": servers}
    if settings:
        config["settings"] = settings
    (tmp_path / "agent" / "mcp.json").write_text(json.dumps(config))
    return tmp_path


def fixture(*args: str, **fields: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(FIXTURE), *args], **fields}


def starts(home: Path, server: str) -> int:
    """How many times ``server`` was started (its log gets one line per start)."""
    log = home / "agent" / "logs" / f"{server}.log"
    return log.read_text().count("starting server") if log.exists() else 0


def test_a_hanging_server_costs_one_short_deadline_then_nothing(tmp_path: Path) -> None:
    # Its start-up time ends within the command's wait: the command saw it fail.
    hangs = fixture("--hang", startupTimeoutMs=5000)
    home = make_home(tmp_path, {"hangs": hangs, "fx": fixture()})
    # The healthy server's tools are known first: on a loaded machine its start alone can
    # outlast the command's deadline, which is not what this pins.
    connected = pi_mcp(home, "connect", "fx")
    assert connected.returncode == 0, connected.stderr
    started = time.monotonic()
    first = pi_mcp(home, "search", "echo")
    first_s = time.monotonic() - started
    assert first.returncode == 0, first.stderr
    assert "fx_echo" in first.stdout
    assert first_s < 25
    assert first.stderr.count("hangs") >= 1
    assert "could not list the tools of 1 server(s)" in first.stderr
    assert "`pi-mcp connect hangs`" in first.stderr
    assert "`pi-mcp reconnect`" in first.stderr
    assert starts(home, "hangs") == 1
    failures = json.loads((home / "agent" / "mcp-failures.json").read_text())
    assert failures["servers"]["hangs"]["attempts"] == 1

    # Later commands skip it until its backoff ends: nothing waits on it, nothing starts it.
    for args in (("search", "echo"), ("describe", "fx_echo"), ("tools",), ("status",)):
        started = time.monotonic()
        again = pi_mcp(home, *args)
        assert again.returncode == 0, again.stderr
        assert time.monotonic() - started < 8
    assert starts(home, "hangs") == 1
    status = json.loads(pi_mcp(home, "status", "--json").stdout)
    row = next(r for r in status["servers"] if r["name"] == "hangs")
    assert row["status"] == "failed"
    assert "did not finish connecting within 5 s" in row["error"]


def test_status_connects_nothing_not_even_eager_servers(tmp_path: Path) -> None:
    home = make_home(
        tmp_path,
        {"eager": fixture(lifecycle="eager"), "kept": fixture(lifecycle="keep-alive")},
    )
    out = pi_mcp(home, "status")
    assert out.returncode == 0, out.stderr
    assert starts(home, "eager") == 0
    assert starts(home, "kept") == 0
    assert "not known yet" in out.stdout
    assert "mcp({" not in out.stdout
    assert "`pi-mcp connect eager`" in out.stdout


def test_call_starts_only_the_server_of_the_tool(tmp_path: Path) -> None:
    home = make_home(tmp_path, {"one": fixture(), "two": fixture(lifecycle="eager")})
    assert pi_mcp(home, "tools").returncode == 0
    assert (starts(home, "one"), starts(home, "two")) == (1, 1)
    called = pi_mcp(home, "call", "one_echo", '{"message": "hi"}')
    assert called.stdout == "Echo: hi\n"
    assert (starts(home, "one"), starts(home, "two")) == (2, 1)


def test_tools_in_a_pipe_prints_whole_names_one_per_line(tmp_path: Path) -> None:
    home = make_home(tmp_path, {LONG_NAMES: fixture("--tools", "3")})
    out = pi_mcp(home, "tools")
    assert out.returncode == 0, out.stderr
    names = [line.split("\t")[0] for line in out.stdout.splitlines()]
    assert f"{LONG_NAMES}_tool_00002" in names
    assert f"{LONG_NAMES}_child_pid" in names
    assert all(len(line.split("\t")) == 3 for line in out.stdout.splitlines())


def test_arguments_come_from_stdin_or_a_file(tmp_path: Path) -> None:
    home = make_home(tmp_path, {"fx": fixture()})
    assert pi_mcp(home, "call", "fx_echo", "-", input='{"message": "piped"}').stdout == (
        "Echo: piped\n"
    )
    args_file = tmp_path / "args.json"
    args_file.write_text('{"message": "from a file"}')
    assert pi_mcp(home, "call", "fx_echo", f"@{args_file}").stdout == "Echo: from a file\n"
    missing = pi_mcp(home, "call", "fx_echo", f"@{tmp_path / 'nope.json'}")
    assert missing.returncode == 2
    assert missing.stderr.startswith("error: cannot read arguments from")


def test_arguments_as_key_value_words_are_typed_by_the_tools_schema(tmp_path: Path) -> None:
    home = make_home(tmp_path, {"fx": fixture()})
    # A string parameter keeps digits as text; a number parameter reads them as a number.
    assert pi_mcp(home, "call", "fx_echo", "message=007").stdout == "Echo: 007\n"
    assert pi_mcp(home, "call", "fx_echo", "message=a=b c").stdout == "Echo: a=b c\n"
    slept = pi_mcp(home, "call", "fx_slow", "seconds=0.01", "--json")
    assert slept.returncode == 0, slept.stderr
    assert json.loads(slept.stdout)["content"][0]["text"] == "slept 0.01"
    wrong = pi_mcp(home, "call", "fx_slow", "seconds=soon")
    assert wrong.returncode == 1
    assert "seconds: 'soon' is not of type 'number'" in wrong.stderr
    stray = pi_mcp(home, "call", "fx_echo", "hello")
    assert stray.returncode == 2
    assert stray.stderr.startswith("error: cannot read argument 'hello': pass key=value words")
    twice = pi_mcp(home, "call", "fx_echo", "message=a", "message=b")
    assert twice.returncode == 2
    assert "'message' is given twice" in twice.stderr


def test_full_and_output_get_the_whole_result_past_the_output_limit(tmp_path: Path) -> None:
    home = make_home(tmp_path, {"fx": fixture()}, settings={"outputLimitBytes": 20})
    message = "x" * 500
    cut = pi_mcp(home, "call", "fx_echo", json.dumps({"message": message}))
    assert cut.returncode == 0, cut.stderr
    assert "Output truncated" in cut.stdout
    whole = pi_mcp(home, "call", "fx_echo", json.dumps({"message": message}), "--full")
    assert whole.stdout == f"Echo: {message}\n"
    target = tmp_path / "result.txt"
    written = pi_mcp(
        home, "call", "fx_echo", json.dumps({"message": message}), "--output", str(target)
    )
    assert written.returncode == 0, written.stderr
    assert written.stdout == ""
    assert target.read_text() == f"Echo: {message}"


def test_an_output_limit_of_zero_means_no_limit_and_negative_is_a_config_error(
    tmp_path: Path,
) -> None:
    home = make_home(
        tmp_path, {"fx": fixture()}, settings={"outputLimitBytes": 0, "outputLimitLines": 0}
    )
    message = "y" * 100_000
    out = pi_mcp(home, "call", "fx_echo", json.dumps({"message": message}))
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"Echo: {message}\n"
    config = home / "agent" / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {}, "settings": {"outputLimitLines": -3}}))
    checked = pi_mcp(home, "config")
    assert checked.returncode == 1
    assert "'outputLimitLines' must be 0 (no limit) or a positive whole number, got -3" in (
        checked.stderr
    )


def test_deep_nesting_and_lone_surrogates_are_invalid_arguments(tmp_path: Path) -> None:
    home = make_home(tmp_path, {"fx": fixture()})
    deep = pi_mcp(home, "call", "fx_echo", '{"message": ' + "[" * 50_000 + "]" * 50_000 + "}")
    assert deep.returncode == 2
    assert "Traceback" not in deep.stderr
    assert "nested too deeply" in deep.stderr
    lone = pi_mcp(home, "call", "fx_echo", '{"message": "\\ud800"}')
    assert lone.returncode == 1
    assert "lone surrogate" in lone.stderr
    assert "Traceback" not in lone.stderr
    # The connection survived: the server was never sent the bad text.
    assert pi_mcp(home, "call", "fx_echo", '{"message": "ok"}').stdout == "Echo: ok\n"


def test_search_offset_past_the_end_says_how_many_matched(tmp_path: Path) -> None:
    home = make_home(tmp_path, {"fx": fixture()})
    out = pi_mcp(home, "search", "echo", "--offset", "500")
    assert out.returncode == 0, out.stderr
    assert "--offset 500 is past the end" in out.stdout
    assert "match" in out.stdout
    paged = pi_mcp(home, "search", ".", "--regex", "--limit", "1", "--no-schemas")
    assert "`--offset 1` for more" in paged.stdout
    assert "offset: 1" not in paged.stdout


def test_search_offset_past_the_end_names_the_highest_valid_offset(tmp_path: Path) -> None:
    home = make_home(tmp_path, {"fx": fixture()})
    listed = pi_mcp(home, "search", ".", "--regex", "--limit", "100", "--json")
    total = json.loads(listed.stdout)["details"]["count"]
    assert total > 2
    out = pi_mcp(home, "search", ".", "--regex", "--limit", "2", "--offset", "500")
    assert out.returncode == 0, out.stderr
    assert f"the highest valid offset is {total - 1}" in out.stdout
    assert f"(--offset {total - 2} shows the last page)" in out.stdout
    last = pi_mcp(home, "search", ".", "--regex", "--limit", "2", "--offset", str(total - 1))
    assert "past the end" not in last.stdout


def test_a_remembered_failure_is_reported_only_to_commands_it_concerns(tmp_path: Path) -> None:
    home = make_home(tmp_path, {"fx": fixture(), "broken": {"command": "/no/such/server"}})
    first = pi_mcp(home, "tools")
    assert "broken" in first.stderr  # the failure itself is reported when it happens
    assert (home / "agent" / "mcp-failures.json").exists()
    unrelated = [pi_mcp(home, "describe", "fx_echo"), pi_mcp(home, "tools", "fx")]
    for out in unrelated:
        assert out.returncode == 0, out.stderr
        assert out.stderr == ""
    # Where the failed server may matter, it is still said.
    assert "broken" in pi_mcp(home, "tools").stderr
    assert "broken" in pi_mcp(home, "tools", "broken").stderr
    assert "broken" in pi_mcp(home, "describe", "broken_tool").stderr


def test_json_output_uses_camel_case_keys_everywhere(tmp_path: Path) -> None:
    home = make_home(tmp_path, {"fx": fixture(), "off": {"command": "x", "disabled": True}})

    def keys(value: object) -> set[str]:
        if isinstance(value, dict):
            return {str(k) for k in value} | {k for v in value.values() for k in keys(v)}
        if isinstance(value, list):
            return {k for v in value for k in keys(v)}
        return set()

    outputs = {
        args: pi_mcp(home, *args, "--json")
        for args in (
            ("status",),
            ("tools",),
            ("search", "echo"),
            ("describe", "fx_echo"),
            ("call", "fx_echo", '{"message": "m"}'),
            ("tokens",),
            ("config",),
            ("auth", "fx"),
            ("connect", "fx"),
        )
    }
    for args, out in outputs.items():
        assert out.returncode == 0, (args, out.stderr)
        data = json.loads(out.stdout)
        snake = {k for k in keys(data) if "_" in k and k not in ("fx_echo",)}
        snake -= {k for k in snake if k.startswith(("fx_", "off"))}  # tool and server names
        assert not snake, (args, snake)


def test_auth_json_describes_the_server(tmp_path: Path) -> None:
    api = {"url": "https://api.example/mcp", "auth": "bearer", "bearerTokenEnv": "API_TOKEN"}
    home = make_home(tmp_path, {"fx": fixture(), "api": api})
    data = json.loads(pi_mcp(home, "auth", "api", "--json").stdout)
    assert data["server"] == "api"
    assert data["status"] == "not-oauth"
    assert "bearerTokenEnv" in data["message"]
    unknown = pi_mcp(home, "auth", "nope")
    assert unknown.returncode == 1
    assert unknown.stderr.count("nope") == 1


def test_each_failure_is_printed_once_on_stderr(tmp_path: Path) -> None:
    home = make_home(tmp_path, {"broken": fixture("--crash-at-start")})
    out = pi_mcp(home, "connect", "broken")
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.count("exited with code 3") == 1
    usage = pi_mcp(home, "tools", "nosuch")
    assert usage.returncode == 2
    assert usage.stderr.count("nosuch") == 1
    assert pi_mcp(home, "search").returncode == 2


def test_cache_problems_are_visible_warnings(tmp_path: Path) -> None:
    home = make_home(tmp_path, {"fx": fixture()})
    (home / "agent" / "mcp-cache.json").write_text("{broken")
    out = pi_mcp(home, "tools")
    assert out.returncode == 0, out.stderr
    assert "warning: metadata cache:" in out.stderr
    assert "moved to mcp-cache.json.corrupt-" in out.stderr
    # An agent dir that is a file: nothing can be written, the command still answers.
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "project").mkdir()
    (blocked / "agent").write_text("not a directory")
    config = blocked / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"fx": fixture()}}))
    out = pi_mcp(blocked, "--config", str(config), "search", "echo")
    assert "fx_echo" in out.stdout
    assert "warning: metadata cache: cannot write" in out.stderr


def test_init_dry_run_warns_about_an_unreadable_host_file(tmp_path: Path) -> None:
    home = make_home(tmp_path, {})
    claude = home / ".claude.json"
    claude.write_text('{"mcpServers": {"x": ')
    out = pi_mcp(home, "init", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "warning: cannot import" in out.stderr
    assert ".claude.json" in out.stderr


def test_version_and_help_text(tmp_path: Path) -> None:
    home = make_home(tmp_path, {})
    for flag in ("--version", "-V"):
        out = pi_mcp(home, flag)
        assert out.returncode == 0
        assert out.stdout.startswith("pi-mcp 0.")
    texts = [pi_mcp(home, "--help").stdout]
    for command in ("call", "search", "init", "tools", "eval-search", "describe", "config"):
        texts.append(pi_mcp(home, command, "--help").stdout)
    for text in texts:
        assert "``" not in text
        assert "<bool>" not in text
        assert "{" not in text.splitlines()[0]
    assert "Usage: pi-mcp call [OPTIONS] NAME [ARGS]" in texts[1]
