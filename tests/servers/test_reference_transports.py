"""Transport features the TypeScript adapter's users rely on, against real fixture servers.

Unix sockets, HTTP session recovery, ``!command`` values, ``requestHeadersCommand`` and
``caFile``: each test starts the MCP fixture server (``tests/fixtures/mcp_fixture.py``) as a
real process and talks to it through a real manager.
"""

from __future__ import annotations

import base64
import json
import shlex
import sys
import tempfile
from pathlib import Path

import anyio
import pytest
import trustme

from pi_mcp_adapter._errors import ServerUnavailableError
from pi_mcp_adapter.config._models import RequestHeadersCommand, ServerEntry

from ._support import MCP_FIXTURE, HttpFixtures, ManagerFactory, fixture_entry, text_of

pytestmark = pytest.mark.slow

PYTHON = shlex.quote(sys.executable)


async def test_a_socket_entry_speaks_json_lines_over_a_unix_socket(
    make_manager: ManagerFactory, http_fixtures: HttpFixtures
) -> None:
    # AF_UNIX paths are limited to about 100 bytes: pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="pimcp") as directory:
        path = str(Path(directory) / "s.sock")
        http_fixtures.start(MCP_FIXTURE, "--transport", "unix", "--socket", path)
        async with make_manager({"mux": ServerEntry(socket=path)}) as manager:
            result = await manager.call_tool("mux", "echo", {"message": "over a socket"})
            assert text_of(result) == "Echo: over a socket"
            assert manager.state("mux").transport == "socket"


async def test_a_socket_that_nobody_listens_on_is_a_clear_connect_error(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    entry = ServerEntry(socket=str(tmp_path / "absent.sock"))
    async with make_manager({"mux": entry}) as manager:
        with pytest.raises(ServerUnavailableError, match=r"absent\.sock"):
            await manager.connect("mux")


async def test_a_forgotten_http_session_is_recovered_and_the_call_retried_once(
    make_manager: ManagerFactory, http_fixtures: HttpFixtures
) -> None:
    url = http_fixtures.mcp("streamable-http", "--forgetful-sessions")
    reconnected = anyio.Event()
    async with make_manager({"remote": ServerEntry(url=url)}) as manager:
        manager.on_reconnect(lambda name, metadata: reconnected.set())
        first = await manager.connect("remote")
        await manager.call_tool("remote", "forget_session")
        result = await manager.call_tool("remote", "echo", {"message": "after restart"})
        assert text_of(result) == "Echo: after restart"
        with anyio.fail_after(5):
            await reconnected.wait()
        assert not first.is_alive
        assert await manager.connect("remote") is not first


async def test_a_404_without_a_session_is_not_retried(
    make_manager: ManagerFactory, http_fixtures: HttpFixtures
) -> None:
    url = http_fixtures.faults("--status", "404")
    async with make_manager({"remote": ServerEntry(url=url)}) as manager:
        with pytest.raises(ServerUnavailableError):
            await manager.connect("remote")


async def test_command_values_are_run_at_connect_and_never_sent_as_written(
    make_manager: ManagerFactory, http_fixtures: HttpFixtures
) -> None:
    url = http_fixtures.mcp(
        "streamable-http", "--require-bearer-env", "EXPECTED", env={"EXPECTED": "s3cret"}
    )
    # The parentheses are shell syntax: this one runs through /bin/sh -c.
    entry = ServerEntry(url=url, bearer_token=f"!{PYTHON} -c \"print('s3cret')\"")
    headers_entry = ServerEntry(url=url, headers={"Authorization": f"!{PYTHON} -m this"})
    async with make_manager({"token": entry, "header": headers_entry}) as manager:
        result = await manager.call_tool("token", "echo", {"message": "from a command"})
        assert text_of(result) == "Echo: from a command"
        with pytest.raises(ServerUnavailableError) as caught:
            await manager.connect("header")  # the Zen of Python is not the token
        assert "Beautiful is better" not in str(caught.value)


async def test_a_failing_command_value_names_the_field_and_hides_its_output(
    make_manager: ManagerFactory,
) -> None:
    entry = fixture_entry(env={"API_KEY": f"!{PYTHON} -c \"print('leak'); exit(3)\""})
    async with make_manager({"local": entry}) as manager:
        with pytest.raises(ServerUnavailableError) as caught:
            await manager.connect("local")
    message = str(caught.value)
    assert "env 'API_KEY'" in message
    assert "exited with code 3" in message
    assert "leak" not in message


async def test_an_env_command_value_reaches_the_child_and_a_double_bang_is_literal(
    make_manager: ManagerFactory,
) -> None:
    entry = fixture_entry(env={"FROM_COMMAND": "!echo resolved", "LITERAL": "!!echo kept"})
    async with make_manager({"local": entry}) as manager:
        resolved = await manager.call_tool("local", "env", {"name": "FROM_COMMAND"})
        literal = await manager.call_tool("local", "env", {"name": "LITERAL"})
    assert (text_of(resolved), text_of(literal)) == ("resolved", "!echo kept")


def _headers_script(tmp_path: Path, *, wrong_first: bool) -> RequestHeadersCommand:
    log = tmp_path / "envelopes.jsonl"
    script = tmp_path / "headers.py"
    script.write_text(
        "import json, sys, pathlib\n"
        f"log = pathlib.Path({str(log)!r})\n"
        "envelope = json.load(sys.stdin)\n"
        "with log.open('a') as f: f.write(json.dumps(envelope) + '\\n')\n"
        "calls = len(log.read_text().splitlines())\n"
        f"token = 'stale' if {wrong_first} and calls == 1 else 's3cret'\n"
        "print(json.dumps({'Authorization': 'Bearer ' + token}))\n"
    )
    return RequestHeadersCommand(command=sys.executable, args=(str(script),))


@pytest.mark.parametrize("wrong_first", [False, True], ids=["fresh", "refreshed-on-401"])
async def test_request_headers_come_from_the_command_for_every_request(
    make_manager: ManagerFactory, http_fixtures: HttpFixtures, tmp_path: Path, wrong_first: bool
) -> None:
    url = http_fixtures.mcp(
        "streamable-http", "--require-bearer-env", "EXPECTED", env={"EXPECTED": "s3cret"}
    )
    command = _headers_script(tmp_path, wrong_first=wrong_first)
    entry = ServerEntry(url=url, request_headers_command=command)
    async with make_manager({"signed": entry}) as manager:
        result = await manager.call_tool("signed", "echo", {"message": "signed"})
    assert text_of(result) == "Echo: signed"
    envelopes = [
        json.loads(line) for line in (tmp_path / "envelopes.jsonl").read_text().splitlines()
    ]
    assert {e["version"] for e in envelopes} == {1}
    assert envelopes[0]["method"] == "POST"
    assert envelopes[0]["url"] == url
    assert any(b'"tools/call"' in base64.b64decode(e["bodyBase64"]) for e in envelopes)


@pytest.fixture(scope="module")
def certificate_authority() -> trustme.CA:
    return trustme.CA()


async def test_a_ca_file_lets_a_server_with_a_private_certificate_be_trusted(
    make_manager: ManagerFactory,
    http_fixtures: HttpFixtures,
    tmp_path: Path,
    certificate_authority: trustme.CA,
) -> None:
    cert = certificate_authority.issue_cert("127.0.0.1")
    cert_file, key_file, ca_file = (tmp_path / n for n in ("cert.pem", "key.pem", "ca.pem"))
    cert.private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    certificate_authority.cert_pem.write_to_path(str(ca_file))
    url = http_fixtures.mcp(
        "streamable-http", "--tls-cert", str(cert_file), "--tls-key", str(key_file)
    ).replace("http://", "https://")
    trusted = ServerEntry(url=url, ca_file=str(ca_file))
    untrusted = ServerEntry(url=url)
    async with make_manager({"trusted": trusted, "untrusted": untrusted}) as manager:
        result = await manager.call_tool("trusted", "echo", {"message": "over TLS"})
        assert text_of(result) == "Echo: over TLS"
        with pytest.raises(ServerUnavailableError):
            await manager.connect("untrusted")


async def test_an_unreadable_ca_file_is_named_in_the_error(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    entry = ServerEntry(url="https://127.0.0.1:9/mcp", ca_file=str(tmp_path / "missing.pem"))
    async with make_manager({"remote": entry}) as manager:
        with pytest.raises(ServerUnavailableError, match=r"missing\.pem"):
            await manager.connect("remote")
