"""Shared files mean the same here and in the TypeScript adapter: expected values from 2.36.

Every expected value in these tables was computed by the TypeScript adapter itself
(``pi-mcp-adapter@2.36.0`` from npm), running its own modules with ``tsx``: ``computeServerHash``
and ``isServerCacheValid`` (metadata-cache.ts), ``interpolateEnvVars`` and ``getMissingEnvVars``
(utils.ts), ``formatToolName`` (types.ts) and ``loadMcpConfig`` (config.ts) over files in a
temporary home. ``tests/config/reference_vectors.ts`` is the script that printed them, with the
steps to rerun it; the reference needs ``HOME=/tmp/ref-home`` there, which is why the hash
cases below set that ``HOME``. Where this project deliberately reads a value differently, the
row says so and what we return instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import ReferenceJs
from pi_mcp_adapter.catalog import config_hash, format_tool_name
from pi_mcp_adapter.catalog._cache import _hash_interpolate, entry_is_fresh
from pi_mcp_adapter.config import MASK, mask_secrets
from pi_mcp_adapter.config._interpolate import interpolate

from .conftest import Machine

REFERENCE_HOME = "/tmp/ref-home"

HASH_CASES = [
    pytest.param(
        {"command": "npx", "args": ["-y", "x"]},
        {},
        "259b2cf72068900c8de8e9ccc60583a3dbe53999c3b896fcb086c9d4baf4ef57",
        id="npx-plain",
    ),
    pytest.param(
        {"command": "~/bin/s", "args": ["${ROOT}/x", "~/y"]},
        {"ROOT": "/r"},
        "6e40dd1ada1d7191f7c1eec464226a4943886463ef6481e2476e3296048acd0f",
        id="command-and-args-hashed-as-written",
    ),
    pytest.param(
        {"command": "x", "env": {"A": "~/p", "B": "${TOK}", "C": "!op read x", "D": "!!lit${TOK}"}},
        {"TOK": "t"},
        "abdbc2a7d5bdc8b3e7839e1e25c273027c195d66876167e7923bfd7bb10a73b0",
        id="env-variables-tilde-and-commands",
    ),
    pytest.param(
        {
            "url": "https://h.example/${P}",
            "headers": {"Authorization": "Bearer ${env:T}", "X": "{env:T}", "Y": "$env:T"},
        },
        {"P": "mcp", "T": "s"},
        "d1ae4891a4249f49259d74b7e97c7bb2efc7ef6eeadaa4bcbdb80824d90255fd",
        id="url-and-header-spellings",
    ),
    pytest.param(
        {"url": "https://h.example/mcp", "auth": "bearer", "bearerTokenEnv": "TOK"},
        {"TOK": "abc"},
        "f8333a6ecfd79a074974a9e4fd90daeb2d91c10738858bb0e2a6a011a82dffb2",
        id="bearer-token-env",
    ),
    pytest.param(
        {"url": "https://h.example/mcp", "bearerToken": "${TOK}"},
        {"TOK": "abc"},
        "d23cf501cf3b4691701da74d5ff12938e320e083a5963121127c563cab84d3c3",
        id="bearer-token-variable",
    ),
    pytest.param(
        {"command": "x", "env": {"\ud83d\ude00": "a", "\uff01": "b", "a": "c"}},
        {},
        "173eaa96258d2e1ac0a40b09ba281151a726143d3b23fcb2b9eaf15834369ab9",
        id="env-keys-beyond-the-bmp",
    ),
    pytest.param(
        {"socket": "~/s.sock"},
        {},
        "122b4d03c563f86d665d0ec851df0d6b3befa84eafe599bb07a2e58c9eed2cea",
        id="socket-with-tilde",
    ),
    pytest.param(
        {
            "command": "x",
            "cwd": "~/w",
            "includeTools": ["a*"],
            "excludeTools": ["b"],
            "exposeResources": False,
        },
        {},
        "5fd85cf7b47742c1e2cf6dafed655a27cd5073aea6f3e873c029c3b6f0c418e5",
        id="cwd-filters-resources",
    ),
    pytest.param(
        {
            "url": "https://h.example/mcp",
            "requestHeadersCommand": {
                "command": "${BIN}/sign",
                "args": ["--a", "$env:X"],
                "env": {"K": "${X}"},
                "timeoutMs": 5000,
            },
        },
        {"BIN": "/b", "X": "x"},
        "1009e6b82cc8969bca341b03abe1c00dbfc38edd666606fb25c52dd22deb4bdc",
        id="request-headers-command",
    ),
    pytest.param(
        {"url": "https://h.example/mcp", "protocolVersion": "auto", "auth": False},
        {},
        "89ae7f0002e4f76f08e3fb4a37a584b416a51d96104d303b9b759d72731a0503",
        id="protocol-version-auth-False",
    ),
    pytest.param(
        {"command": "x", "lifecycle": "keep-alive", "idleTimeout": 3, "toolPrefix": "short"},
        {},
        "f0211144c2b2b29b578deb59dd0edc37fe366b5a902d0cf65d3b12d1a56bbda5",
        id="lifecycle-not-hashed",
    ),
    # Node's path.join keeps a trailing separator after normalising the path.
    pytest.param(
        {"command": "x", "cwd": "~/a/../b/"},
        {},
        "79414b4803d9e814a71cd116f154b3400bc7403ebb4a7cecb321aaf329c8d846",
        id="cwd-trailing-slash-after-dot-dot",
    ),
    pytest.param(
        {"command": "x", "cwd": "~/w/"},
        {},
        "34206c43e2433dabb8864f936dcd69e1e083f82669f702594972f95e11a5e081",
        id="cwd-trailing-slash",
    ),
    pytest.param(
        {"command": "x", "cwd": "~/"},
        {},
        "18dafa9c45daf30ee22b6a2f5c74562e74e8f7eda882b235a01ccb3d804b56d8",
        id="cwd-home-with-slash",
    ),
    pytest.param(
        {"command": "x", "cwd": "~/../"},
        {},
        "7d3dd8150216b7ca2e2d387827bc6a2512ee30cf436702fa8ee87aee49b032b3",
        id="cwd-above-home-with-slash",
    ),
    pytest.param(
        {"socket": "~/a//b/./s/"},
        {},
        "c9974645c320e91e54c0c41c7ad6ad06dbada6837ecde5ae92f01ddd19d67b7d",
        id="socket-doubled-and-dot-segments",
    ),
]

NOW_MS = 1800000000000
ACCEPTANCE_CASES = [
    pytest.param({"cachedAt": 1799999999000}, True, id="fresh"),
    pytest.param({"cachedAt": 1800000030000}, True, id="slightly-in-the-future"),
    pytest.param({"cachedAt": 1800086400000}, True, id="a-day-in-the-future"),
    pytest.param({"cachedAt": 0}, False, id="cached-at-zero"),
    pytest.param({"cachedAt": "1800000000000"}, False, id="cached-at-string"),
    pytest.param({}, False, id="cached-at-missing"),
    pytest.param({"cachedAt": 1799395200000}, True, id="exactly-seven-days"),
    pytest.param({"cachedAt": 1799395199999}, False, id="seven-days-and-a-millisecond"),
    pytest.param({"cachedAt": 1800000000000, "ttlMs": 0}, False, id="ttl-zero"),
    pytest.param({"cachedAt": 1799999995000, "ttlMs": -5}, True, id="ttl-negative"),
    pytest.param({"cachedAt": 1799999995000, "ttlMs": 1.5}, True, id="ttl-fractional"),
    pytest.param({"cachedAt": 1799999995000, "ttlMs": "1000"}, True, id="ttl-string"),
    pytest.param({"cachedAt": 1799999999001, "ttlMs": 1000}, True, id="within-ttl"),
    pytest.param({"cachedAt": 1799999999000, "ttlMs": 1000}, False, id="at-ttl"),
    pytest.param({"cachedAt": 1799999998999, "ttlMs": 1000}, False, id="past-ttl"),
    pytest.param(
        {"cachedAt": 1799308800000, "ttlMs": 2592000000}, False, id="ttl-beyond-seven-days"
    ),
    pytest.param(
        {"cachedAt": 1799308800000, "ttlMs": 1152921504606847000}, False, id="ttl-unsafe-integer"
    ),
    pytest.param({"cachedAt": 1799395199999, "ttlMs": -1}, False, id="negative-ttl-seven-days-old"),
]

INTERPOLATION_ENV = {"A": "one", "B": "two"}
INTERPOLATION_CASES = [
    pytest.param("${A}", "one", [], id="${A}"),
    pytest.param("$env:A", "one", [], id="$env:A"),
    pytest.param("{env:A}", "one", [], id="{env:A}"),
    pytest.param("${env:A}", "$one", [], id="${env:A}"),
    pytest.param("x${A}y$env:B", "xoneytwo", [], id="x${A}y$env:B"),
    pytest.param("${MISSING}z", "z", ["MISSING"], id="${MISSING}z"),
    pytest.param("$A", "$A", [], id="$A"),
    pytest.param("${1A}", "", ["1A"], id="${1A}"),
    pytest.param("${A-B}", "${A-B}", [], id="${A-B}"),
    pytest.param("{env:A}{env:B}", "onetwo", [], id="{env:A}{env:B}"),
    pytest.param("$${A}", "$one", [], id="$${A}"),
    pytest.param("${A}${B}", "onetwo", [], id="${A}${B}"),
    pytest.param("pre{env:MISSING}post", "prepost", ["MISSING"], id="pre{env:MISSING}post"),
]

NAMING_CASES = [
    pytest.param("search", "github", "server", "github_search", id="github/search/server"),
    pytest.param("search", "github", "short", "github_search", id="github/search/short"),
    pytest.param("search", "github", "none", "search", id="github/search/none"),
    pytest.param("search", "github", "mcp", "mcp__github_search", id="github/search/mcp"),
    pytest.param(
        "search",
        "chrome-devtools",
        "mcp",
        "mcp__chrome-devtools_search",
        id="chrome-devtools/search/mcp",
    ),
    pytest.param(
        "search",
        "chrome-devtools",
        "server",
        "chrome-devtools_search",
        id="chrome-devtools/search/server",
    ),
    pytest.param(
        "take.screenshot",
        "chrome-devtools",
        "server",
        "chrome-devtools_take_screenshot",
        id="chrome-devtools/take.screenshot/server",
    ),
    pytest.param(
        "github_search", "github", "server", "github_search", id="github/github_search/server"
    ),
    pytest.param(
        "mcp__github_search",
        "github",
        "mcp",
        "mcp__github_search",
        id="github/mcp__github_search/mcp",
    ),
    pytest.param("read", "fs-mcp", "short", "fs_read", id="fs-mcp/read/short"),
    pytest.param("read", "mcp", "short", "mcp_read", id="mcp/read/short"),
    pytest.param("read", "my server", "server", "my_20_server_read", id="my server/read/server"),
    pytest.param("read", "my server", "mcp", "mcp__my_20_server_read", id="my server/read/mcp"),
    pytest.param("read", "a.b", "short", "a_2e_b_read", id="a.b/read/short"),
]

MERGE_CASES = [
    pytest.param(
        {
            "agent": {"mcpServers": {"s": {"command": "x", "args": ["a"], "lifecycle": "lazy"}}},
            "project": {"mcpServers": {"s": {"lifecycle": "keep-alive"}}},
        },
        {"s": {"command": "x", "args": ["a"], "lifecycle": "keep-alive"}},
        id="one-field-override",
    ),
    pytest.param(
        {
            "agent": {"mcpServers": {"s": {"command": "x", "env": {"A": "1", "B": "2"}}}},
            "project": {"mcpServers": {"s": {"env": {"C": "3"}}}},
        },
        {"s": {"command": "x", "env": {"C": "3"}}},
        id="env-replaced-whole",
    ),
    pytest.param(
        {
            "agent": {
                "mcpServers": {
                    "s": {
                        "url": "https://one.example/mcp",
                        "auth": "bearer",
                        "bearerToken": "t",
                        "headers": {"H": "1"},
                        "oauth": False,
                        "caFile": "/ca.pem",
                        "requestHeadersCommand": {"command": "sign"},
                    }
                }
            },
            "project": {"mcpServers": {"s": {"url": "https://two.example/mcp"}}},
        },
        {"s": {"url": "https://two.example/mcp", "auth": "bearer", "oauth": False}},
        id="new-url-keeps-auth-and-oauth-False",
    ),
    pytest.param(
        {
            "agent": {
                "mcpServers": {
                    "s": {
                        "url": "https://one.example/mcp",
                        "auth": "oauth",
                        "oauth": {"clientId": "c"},
                    }
                }
            },
            "project": {"mcpServers": {"s": {"url": "https://two.example/mcp"}}},
        },
        {"s": {"url": "https://two.example/mcp", "auth": "oauth"}},
        id="new-url-drops-oauth-object",
    ),
    pytest.param(
        {
            "agent": {
                "mcpServers": {
                    "s": {
                        "url": "https://one.example/mcp",
                        "bearerToken": "t",
                        "headers": {"H": "1"},
                    }
                }
            },
            "project": {"mcpServers": {"s": {"url": "https://one.example/mcp", "idleTimeout": 3}}},
        },
        {
            "s": {
                "url": "https://one.example/mcp",
                "bearerToken": "t",
                "headers": {"H": "1"},
                "idleTimeout": 3,
            }
        },
        id="same-url-keeps-credentials",
    ),
    pytest.param(
        {
            "agent": {
                "mcpServers": {
                    "s": {
                        "url": "https://one.example/mcp",
                        "httpTransport": "sse",
                        "auth": "bearer",
                        "headers": {"H": "1"},
                    }
                }
            },
            "project": {"mcpServers": {"s": {"command": "local"}}},
        },
        {"s": {"command": "local"}},
        id="url-to-command-drops-http-transport",
    ),
    pytest.param(
        {
            "agent": {
                "mcpServers": {
                    "s": {
                        "command": "x",
                        "args": ["a"],
                        "env": {"A": "1"},
                        "cwd": "/w",
                        "lifecycle": "eager",
                    }
                }
            },
            "project": {"mcpServers": {"s": {"url": "https://two.example/mcp"}}},
        },
        {"s": {"lifecycle": "eager", "url": "https://two.example/mcp"}},
        id="command-to-url-drops-stdio",
    ),
    pytest.param(
        {
            "agent": {
                "mcpServers": {
                    "s": {
                        "url": "https://one.example/mcp",
                        "headers": {"H": "1"},
                        "lifecycle": "eager",
                    }
                }
            },
            "project": {"mcpServers": {"s": {"socket": "/run/s.sock"}}},
        },
        {"s": {"lifecycle": "eager", "socket": "/run/s.sock"}},
        id="socket-replaces-everything",
    ),
    pytest.param(
        {
            "cursor": {"mcpServers": {"c": {"command": "cursor-c", "args": ["x"]}}},
            "agent": {"imports": ["cursor"], "mcpServers": {"c": {"lifecycle": "keep-alive"}}},
        },
        {"c": {"command": "cursor-c", "args": ["x"], "lifecycle": "keep-alive"}},
        id="imported-server-overridden-field-by-field",
    ),
    pytest.param(
        {
            "cursor": {"mcpServers": {"c": {"command": "cursor-c"}}},
            "agent": {"imports": ["cursor"]},
            "project": {"mcpServers": {"c": {"disabled": True}}},
        },
        {"c": {"command": "cursor-c", "disabled": True}},
        id="imported-server-disabled-by-project",
    ),
    pytest.param(
        {
            "cursor": {"mcpServers": {"b": {"command": "cursor-b"}}},
            "claude": {"mcpServers": {"b": {"command": "claude-b"}}},
            "agent": {"imports": ["cursor", "claude-code"]},
        },
        {"b": {"command": "cursor-b"}},
        id="first-import-wins-a-name",
    ),
    pytest.param(
        {
            "cursor": {"mcpServers": {"b": {"command": "cursor-b"}}},
            "claude": {"mcpServers": {"b": {"command": "claude-b"}}},
            "agent": {"imports": ["cursor"]},
            "project": {"imports": ["claude-code"]},
        },
        {"b": {"command": "claude-b"}},
        id="higher-layer-import-overrides-lower",
    ),
    pytest.param(
        {"agent": {"mcpServers": {"a": {"command": "a"}}, "mcp-servers": {"b": {"command": "b"}}}},
        {"a": {"command": "a"}},
        id="both-server-maps-reads-mcpServers",
    ),
    pytest.param(
        {"agent": {"mcp-servers": {"k": {"command": "k"}}}},
        {"k": {"command": "k"}},
        id="kebab-server-map",
    ),
    pytest.param(
        {"agent": {"mcpServers": {"d": {"command": "d", "disabled": "true"}}}},
        {"d": {"command": "d", "disabled": "true"}},
        id="disabled-string-is-kept",
    ),
]

# Our own reading of a variable where it deliberately differs from the reference's.
OUR_INTERPOLATION = {
    # VS Code's spelling means the variable there; the reference's sequential replacement
    # leaves a "$" in front of the value, which no user means. The hash still reads it the
    # reference's way (see test_the_hash_reads_variables_as_the_reference_does).
    "${env:A}": ("one", ()),
}

# Where our names deliberately differ from the reference's (none in this table today).
OUR_NAMES: dict[tuple[str, str, str], str] = {}


def _load_one(machine: Machine, entry: dict[str, Any], env: dict[str, str]) -> Any:
    machine.environ.update(env)
    machine.write_layer("agent", {"mcpServers": {"s": entry}})
    config = machine.load()
    assert not config.errors, config.errors
    return config.servers["s"]


@pytest.mark.parametrize(("entry", "env", "expected"), HASH_CASES)
def test_the_config_hash_equals_the_reference_hash(
    machine: Machine, entry: dict[str, Any], env: dict[str, str], expected: str
) -> None:
    loaded = _load_one(machine, entry, env)
    assert config_hash(loaded, environ={**env, "HOME": REFERENCE_HOME}) == expected


def test_the_config_hash_equals_the_hash_the_installed_reference_computes(
    machine: Machine, reference_js: ReferenceJs
) -> None:
    # The same table, recomputed by the reference itself when it is installed: a changed
    # expectation above shows up here as well.
    cases = [(param.values[0], param.values[1]) for param in HASH_CASES]
    theirs = reference_js.call(
        "metadata-cache",
        "computeServerHash",
        [[entry, env] for entry, env in cases],
        env={"HOME": REFERENCE_HOME},
    )
    for (entry, env), result in zip(cases, theirs, strict=True):
        ours = config_hash(_load_one(machine, entry, env), environ={**env, "HOME": REFERENCE_HOME})
        assert ours == result["value"], entry


def test_a_command_value_is_never_run_to_compute_the_hash(machine: Machine, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    loaded = _load_one(machine, {"command": "x", "env": {"K": f"!touch {marker}"}}, {})
    config_hash(loaded, environ={})
    assert not marker.exists()


@pytest.mark.parametrize(("fields", "valid"), ACCEPTANCE_CASES)
def test_cache_entries_are_accepted_as_the_reference_accepts_them(
    fields: dict[str, Any], valid: bool
) -> None:
    fresh = entry_is_fresh(
        fields.get("cachedAt"), fields.get("ttlMs"), now_ms=NOW_MS, max_age_ms=7 * 86_400_000
    )
    assert fresh is valid


@pytest.mark.parametrize(("value", "result", "missing"), INTERPOLATION_CASES)
def test_the_hash_reads_variables_as_the_reference_does(
    value: str, result: str, missing: list[str]
) -> None:
    assert _hash_interpolate(value, INTERPOLATION_ENV) == result


@pytest.mark.parametrize(("value", "result", "missing"), INTERPOLATION_CASES)
def test_config_values_read_variables_as_the_reference_does(
    value: str, result: str, missing: list[str]
) -> None:
    expected_value, expected_missing = OUR_INTERPOLATION.get(value, (result, tuple(missing)))
    interpolated = interpolate(value, INTERPOLATION_ENV)
    assert (interpolated.value, interpolated.missing) == (expected_value, tuple(expected_missing))


@pytest.mark.parametrize(("tool", "server", "mode", "name"), NAMING_CASES)
def test_tool_names_are_the_reference_names(tool: str, server: str, mode: Any, name: str) -> None:
    expected = OUR_NAMES.get((tool, server, mode), name)
    assert format_tool_name(tool, server, mode=mode) == expected


def _write_layers(machine: Machine, layers: dict[str, Any]) -> None:
    files = {
        "agent": machine.layer_path("agent"),
        "project": machine.layer_path("project-pi"),
        "cursor": machine.home / ".cursor" / "mcp.json",
        "claude": machine.home / ".claude" / "mcp.json",
    }
    for name, content in layers.items():
        machine.write(files[name], content)


@pytest.mark.parametrize(("layers", "expected"), MERGE_CASES)
def test_files_merge_as_the_reference_merges_them(
    machine: Machine, layers: dict[str, Any], expected: dict[str, Any]
) -> None:
    _write_layers(machine, layers)
    config = machine.load()
    merged = {
        name: entry.model_dump(mode="json", by_alias=True, exclude_unset=True)
        for name, entry in config.servers.items()
    }
    reference = {name: dict(fields) for name, fields in expected.items()}
    for name, fields in reference.items():
        if fields.get("disabled") == "true":
            # The reference keeps the string and leaves the server enabled; we drop it with a
            # warning, which is the same server.
            del fields["disabled"]
            assert config.servers[name].is_enabled
            assert any("'disabled' is string" in w for w in config.warnings)
    assert merged == reference


def test_reference_only_fields_load_without_errors(machine: Machine) -> None:
    machine.environ.update({"HOME": str(machine.home), "SIGNER": "/opt/sign"})
    machine.write_layer(
        "agent",
        {
            "mcpServers": {
                "mux": {"socket": "~/run/mux.sock", "lifecycle": "lazy-keep-alive"},
                "signed": {
                    "url": "https://h.example/mcp",
                    "toolPrefix": "mcp",
                    "directTools": "search",
                    "caFile": "~/ca.pem",
                    "requestHeadersCommand": {"command": "${SIGNER}", "args": ["--aud", "x"]},
                    "searchKeywords": {"*": ["remote"]},
                    "approveTools": ["delete_*"],
                    "trace": True,
                    "httpTransport": "sse",
                },
            },
            "settings": {"outputGuard": {"maxBytes": 1000}, "trace": True, "approveTools": True},
        },
    )
    config = machine.load()
    assert not config.errors
    assert not config.invalid_servers
    mux, signed = config.servers["mux"], config.servers["signed"]
    assert (mux.transport_kind, mux.socket) == ("socket", str(machine.home / "run/mux.sock"))
    assert signed.request_headers_command is not None
    assert signed.request_headers_command.command == "/opt/sign"
    assert signed.ca_file == str(machine.home / "ca.pem")
    assert signed.search_keywords == {"*": ("remote",)}
    assert signed.approve_tools == ("delete_*",)
    assert config.settings.approve_tools is True
    assert not [w for w in config.warnings if "unknown key" in w]


def test_a_file_with_both_server_maps_reads_mcp_servers_and_says_so(machine: Machine) -> None:
    path = machine.write_layer(
        "agent", {"mcpServers": {"a": {"command": "a"}}, "mcp-servers": {"b": {"command": "b"}}}
    )
    config = machine.load()
    assert list(config.servers) == ["a"]
    assert any(str(path) in w and "only 'mcpServers' is read" in w for w in config.warnings)


def test_a_command_value_is_kept_unrun_until_connect_and_never_shown(machine: Machine) -> None:
    machine.write_layer(
        "agent",
        {"mcpServers": {"s": {"url": "https://h.example", "headers": {"X-Key": "!pass show k"}}}},
    )
    entry = machine.load().servers["s"]
    assert entry.headers == {"X-Key": "!pass show k"}
    assert "pass show" not in repr(entry)


def test_request_headers_command_env_is_masked_when_shown(machine: Machine) -> None:
    machine.write_layer(
        "agent",
        {
            "mcpServers": {
                "s": {
                    "url": "https://h.example/mcp",
                    "requestHeadersCommand": {"command": "sign", "env": {"KEY": "hunter2"}},
                }
            }
        },
    )
    entry = machine.load().servers["s"]
    shown = mask_secrets(entry)
    assert shown["requestHeadersCommand"]["env"] == {"KEY": MASK}
    assert "hunter2" not in repr(entry)
