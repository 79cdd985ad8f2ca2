"""What every start and every ``pi-mcp status`` pays per configured server.

At 19,641 servers three passes cost a second of each start: reading ``mcp-failures.json`` once
per server, hashing each server's configuration, and recording where every key of the
configuration file sits. These tests count the work (file reads, scanner passes, Python calls),
not the time, so they mean the same on a busy machine as on an idle one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from _large_catalog import counted_calls  # tests/ is on sys.path
from pi_mcp_adapter._errors import ConfigError
from pi_mcp_adapter.catalog import config_hash
from pi_mcp_adapter.config import ServerEntry, _jsonc
from pi_mcp_adapter.engine import McpAdapter
from pi_mcp_adapter.servers import FailureMemory, ServerManager

from .conftest import Machine

SMALL, LARGE = 20, 200
"""Two configuration sizes: what one costs must not grow from the first to the second."""


def server_names(count: int) -> list[str]:
    return [f"server-{index:04d}" for index in range(count)]


def configured(count: int) -> dict[str, ServerEntry]:
    return {name: ServerEntry(command="/bin/false", args=(name,)) for name in server_names(count)}


@pytest.fixture
def failures_file_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every read of a failures file, recorded by wrapping the real reader."""
    reads: list[Path] = []
    read_file = FailureMemory._read_file

    def recorded(memory: FailureMemory) -> dict[str, object]:
        reads.append(memory.path)
        return read_file(memory)

    monkeypatch.setattr(FailureMemory, "_read_file", recorded)
    return reads


@pytest.fixture
def positions_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a document's key positions were scanned (the real scanner, counted)."""
    passes = [0]
    scan_document = _jsonc._Scanner.scan_document

    def counted(scanner: _jsonc._Scanner) -> None:
        passes[0] += 1
        scan_document(scanner)

    monkeypatch.setattr(_jsonc._Scanner, "scan_document", counted)
    return passes


@pytest.mark.parametrize("servers", [SMALL, LARGE])
async def test_a_start_reads_the_failures_file_once_however_many_servers_are_configured(
    tmp_path: Path, failures_file_reads: list[Path], servers: int
) -> None:
    entries = configured(servers)
    path = tmp_path / "mcp-failures.json"
    # Written by another process before this one starts.
    FailureMemory(path).record("server-0003", entries["server-0003"], "exited with code 3")
    failures_file_reads.clear()

    async with ServerManager(entries, log_dir=tmp_path, failures=FailureMemory(path)) as manager:
        assert failures_file_reads == [path]
        assert manager.state("server-0003").status == "failed"
        assert manager.state("server-0003").error == "exited with code 3"
        assert manager.state("server-0004").status != "failed"


async def test_a_failure_another_process_records_after_a_start_is_seen_by_the_next_start(
    tmp_path: Path,
) -> None:
    entries = configured(SMALL)
    path = tmp_path / "mcp-failures.json"
    async with ServerManager(entries, log_dir=tmp_path, failures=FailureMemory(path)) as first:
        assert first.state("server-0007").status != "failed"
        # Another process fails to connect meanwhile; this one's memory reads the file again.
        FailureMemory(path).record("server-0007", entries["server-0007"], "refused")
        assert FailureMemory(path).get("server-0007", entries["server-0007"]) is not None
    async with ServerManager(entries, log_dir=tmp_path, failures=FailureMemory(path)) as second:
        assert second.state("server-0007").status == "failed"


def test_a_failure_recorded_for_another_configuration_is_not_recalled(tmp_path: Path) -> None:
    path = tmp_path / "mcp-failures.json"
    FailureMemory(path).record("server-0001", ServerEntry(command="/bin/old"), "no")
    FailureMemory(path).record("gone", ServerEntry(command="/bin/false"), "no")

    assert FailureMemory(path).get_many(configured(SMALL)) == {}


def write_config(machine: Machine, servers: int, **extra: object) -> Path:
    entries: dict[str, object] = {
        name: {"command": "/bin/false", "args": [name]} for name in server_names(servers)
    }
    entries.update(extra)
    return machine.write_layer("agent", {"mcpServers": entries})


def test_status_reads_the_failures_file_once_however_many_servers_are_configured(
    machine: Machine, failures_file_reads: list[Path]
) -> None:
    write_config(machine, LARGE)
    adapter = McpAdapter(config=machine.load(), agent_dir=machine.agent_dir)
    failures = FailureMemory(machine.agent_dir / "mcp-failures.json")
    failures.record("server-0042", adapter.servers["server-0042"], "refused")
    failures_file_reads.clear()

    recalled = adapter.last_failures()

    assert list(recalled) == ["server-0042"]
    assert len(failures_file_reads) == 1
    failures_file_reads.clear()

    report = adapter.cached_status()  # what `pi-mcp status` shows

    assert [row.name for row in report.servers if row.status == "failed"] == ["server-0042"]
    assert len(failures_file_reads) == 1


@pytest.mark.parametrize("servers", [SMALL, LARGE])
def test_a_valid_configuration_loads_without_finding_its_key_positions(
    machine: Machine, positions_passes: list[int], servers: int
) -> None:
    write_config(machine, servers)

    config = machine.load()

    assert len(config.servers) == servers
    assert config.errors == ()
    assert positions_passes == [0]


def test_an_error_in_a_large_configuration_names_its_file_line_and_field_from_one_pass(
    machine: Machine, positions_passes: list[int]
) -> None:
    path = write_config(machine, LARGE, broken={"command": "/bin/false", "args": 7})
    lines = path.read_text(encoding="utf-8").splitlines()
    args_line = next(i for i, line in enumerate(lines, 1) if '"args": 7' in line)

    config = machine.load()

    (error,) = [e for e in config.errors if isinstance(e, ConfigError)]
    assert (error.path, error.line, error.field) == (str(path), args_line, "mcpServers.broken.args")
    assert positions_passes == [1]


def test_the_line_a_server_came_from_is_found_when_asked(
    machine: Machine, positions_passes: list[int]
) -> None:
    path = write_config(machine, SMALL)
    lines = path.read_text(encoding="utf-8").splitlines()
    expected = next(i for i, line in enumerate(lines, 1) if '"server-0011": {' in line)
    config = machine.load()
    assert positions_passes == [0]

    origin = config.provenance["server-0011"].origin

    assert (origin.path, origin.line) == (path, expected)
    assert config.provenance["server-0012"].origin.line == expected + 6
    assert positions_passes == [1]


def test_a_config_hash_makes_a_fixed_number_of_calls_for_a_server_of_the_usual_shape() -> None:
    # This pins how much Python one digest takes (79 calls when the members were sorted per
    # server, each written through a call; 33 when each of the fifteen members was looked up
    # in a record built per server): only the members the entry sets are written, into the
    # text of a record with every member unset. The value is the reference's (more in
    # tests/config/test_reference_vectors.py).
    entry = ServerEntry.model_validate({"command": "npx", "args": ["-y", "@acme/mcp", "--stdio"]})
    config_hash(entry)

    with counted_calls() as calls:
        digest = config_hash(entry)

    assert digest == "271de1b290fdd6390453cfc150d8c50c963ffdac579074024f8d30317aea90be"
    assert calls[0] <= 12
