"""What loading costs per configured server, counted rather than timed.

At 19,641 servers every start and every ``pi-mcp status`` pays for each server: a validator
call per field, a substitution pass per value, and one walk of everything loaded by the
garbage collector. These tests count Python calls, validator calls and collector state, so
they mean the same on a busy machine as on an idle one.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from _large_catalog import counted_calls  # tests/ is on sys.path
from pi_mcp_adapter._errors import ConfigError
from pi_mcp_adapter.config import ServerEntry, _loader

from .conftest import Machine

SMALL, LARGE = 20, 200
"""Two configuration sizes: what one more server costs is their difference, divided."""

CALLS_PER_SERVER = 50
"""Python calls one more server of the usual shape may cost (117 when every field went
through a validator and every value through the substitution; 73 when the merged entry was
validated a second time as a whole; 44 now)."""


def usual_entry(name: str) -> dict[str, object]:
    """A server as configurations usually write one: a command, arguments, an environment
    variable, a lifecycle, a flag."""
    return {
        "command": "npx",
        "args": ["-y", f"@acme/{name}", "--stdio"],
        "env": {"LOG_LEVEL": "info"},
        "lifecycle": "lazy",
        "exposeResources": False,
    }


def write_servers(machine: Machine, count: int, **extra: object) -> Path:
    servers: dict[str, object] = {f"server-{i:05d}": usual_entry(f"s{i}") for i in range(count)}
    servers.update(extra)
    return machine.write_layer("agent", {"mcpServers": servers})


@pytest.fixture
def validator_calls(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every value a field validator was called on while loading (the real one, counted)."""
    calls: list[object] = []
    validate = TypeAdapter.validate_python

    def counted(adapter: TypeAdapter[object], value: object, /, **kwargs: object) -> object:
        calls.append(value)
        return validate(adapter, value, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(TypeAdapter, "validate_python", counted)
    return calls


@pytest.fixture
def collector_unfrozen() -> Iterator[None]:
    """Whatever a test's load moves out of the collector's view is moved back after it."""
    yield
    gc.unfreeze()


def test_one_more_server_of_the_usual_shape_costs_a_fixed_small_number_of_python_calls(
    machine: Machine,
) -> None:
    costs: dict[int, int] = {}
    for count in (SMALL, LARGE):
        write_servers(machine, count)
        with counted_calls() as calls:
            config = machine.load()
        assert len(config.servers) == count
        costs[count] = calls[0]

    per_server = (costs[LARGE] - costs[SMALL]) / (LARGE - SMALL)

    assert per_server <= CALLS_PER_SERVER


def test_the_usual_field_values_are_taken_without_a_validator_call_each(
    machine: Machine, validator_calls: list[object]
) -> None:
    write_servers(machine, LARGE)

    config = machine.load()

    assert validator_calls == []
    entry = config.servers["server-00007"]
    assert entry.args == ("-y", "@acme/s7", "--stdio")
    assert entry.env == {"LOG_LEVEL": "info"}
    assert (entry.lifecycle, entry.expose_resources) == ("lazy", False)


@pytest.mark.parametrize(
    ("value", "field", "expected"),
    [
        pytest.param(
            ["-y", 7], "args[1]", "must be a string, not number", id="a number among the args"
        ),
        pytest.param(
            {"TOKEN": 1}, "env.TOKEN", "must be a string, not number", id="a number in env"
        ),
        pytest.param("sometimes", "lifecycle", "got 'sometimes'", id="an unknown lifecycle"),
        pytest.param(None, "command", None, id="a null command"),
    ],
)
def test_an_unusual_value_among_many_usual_ones_still_gets_the_full_check(
    machine: Machine,
    validator_calls: list[object],
    value: object,
    field: str,
    expected: str | None,
) -> None:
    odd = {**usual_entry("odd"), field.partition("[")[0].partition(".")[0]: value}
    path = write_servers(machine, LARGE, odd=odd)

    config = machine.load()

    assert validator_calls == [value]  # only the odd value went to the validator
    if expected is None:  # null is valid for the field; the entry then has no transport
        assert "odd" in config.invalid_servers
        return
    (error,) = [e for e in config.errors if isinstance(e, ConfigError)]
    assert error.path == str(path)
    assert error.field == f"mcpServers.odd.{field}"
    assert error.line is not None
    assert expected in error.message
    assert "odd" not in config.servers


def test_a_merged_entry_is_not_validated_again_as_a_whole(
    machine: Machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each layer's fields were checked one by one (errors name the file, line and field);
    # only an alwaysLoad needs the model's own validator, which folds it into directTools.
    validated: list[object] = []
    validate = ServerEntry.model_validate

    def counted(cls: type[ServerEntry], value: object, **kwargs: Any) -> ServerEntry:
        validated.append(value)
        return validate(value, **kwargs)

    monkeypatch.setattr(ServerEntry, "model_validate", classmethod(counted))
    always = {"command": "npx", "directTools": ["a"], "alwaysLoad": ["b"]}
    write_servers(machine, LARGE, always=always)

    config = machine.load()

    assert len(config.servers) == LARGE + 1
    (whole,) = validated
    assert isinstance(whole, dict)
    assert whole["always_load"] == ("b",)
    assert config.servers["always"].direct_tools == ("a", "b")


def test_values_that_refer_to_variables_or_home_are_still_expanded(machine: Machine) -> None:
    machine.environ["ACME_TOKEN"] = "tok-123"
    templated = {
        "command": "~/bin/acme",
        "args": ["--token", "${ACME_TOKEN}", "plain"],
        "env": {"TOKEN": "$env:ACME_TOKEN"},
    }
    write_servers(machine, SMALL, templated=templated)

    entry = machine.load().servers["templated"]

    assert entry.command == str(machine.home / "bin" / "acme")
    assert entry.args == ("--token", "tok-123", "plain")
    assert entry.env == {"TOKEN": "tok-123"}
    assert entry.env_templates["args[1]"] == "${ACME_TOKEN}"


def test_a_large_configuration_is_moved_out_of_the_collectors_walks(
    machine: Machine, collector_unfrozen: None
) -> None:
    write_servers(machine, _loader.LONG_LIVED_FROM_SERVERS)
    frozen_before = gc.get_freeze_count()

    config = machine.load()

    assert len(config.servers) == _loader.LONG_LIVED_FROM_SERVERS
    # About 20 objects a server are out of every later collection's walk.
    assert gc.get_freeze_count() - frozen_before >= 10 * _loader.LONG_LIVED_FROM_SERVERS


def test_a_small_configuration_is_left_to_the_collector(machine: Machine) -> None:
    write_servers(machine, SMALL)
    frozen_before = gc.get_freeze_count()

    machine.load()

    assert gc.get_freeze_count() == frozen_before


def test_a_replaced_configuration_holds_no_reference_cycle(machine: Machine) -> None:
    # What a frozen configuration relies on: replaced, it is freed by reference counting.
    write_servers(machine, SMALL, broken={"command": "npx", "args": 7})
    config = machine.load()
    assert config.provenance["server-00003"].origin.line is not None  # positions found
    assert config.errors  # and an error with its line
    gc.collect()

    del config

    assert gc.collect() == 0
