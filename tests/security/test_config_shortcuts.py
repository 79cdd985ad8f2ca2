"""Two shortcuts of every start: a loaded server entry is validated once, field by field in
each layer, and not again as a whole after the layers are merged (it is built from the values
those checks returned); and ``configHash`` writes only the members an entry sets into the
canonical text of a record with every member unset.

Neither may let through what the long way stopped. For the entries, each test plays a cloned
repository's ``.mcp.json`` (trusted, so that its values would apply) or the user's own file: a
value of the wrong type in any field is still refused with its file, line and field and leaves
the server as the other layers define it; an entry built this way is still frozen, masks its
secrets and, from an untrusted file, runs nothing. For the digest, a cached listing is used
only while its ``configHash`` matches: every member the hash covers must change it, values
shaped like the canonical text must not forge another member, and text no encoder accepts as
is (a lone surrogate) must still hash.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pi_mcp_adapter._secrets import redact
from pi_mcp_adapter.catalog import config_hash
from pi_mcp_adapter.config import LoadedConfig, ServerEntry, load_config

CANARY = "canary-91d2-single-validation"


class Workspace:
    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.agent = self.home / ".pi" / "agent"
        self.repo = root / "repo"
        for directory in (self.agent, self.repo):
            directory.mkdir(parents=True)

    @property
    def repo_file(self) -> Path:
        return self.repo / ".mcp.json"

    def write_user(self, servers: dict[str, Any]) -> None:
        (self.agent / "mcp.json").write_text(json.dumps({"mcpServers": servers}, indent=2))

    def write_repo(self, servers: dict[str, Any]) -> None:
        self.repo_file.write_text(json.dumps({"mcpServers": servers}, indent=2))

    def load(self, *, trust: str = "always", **environ: str) -> LoadedConfig:
        return load_config(
            agent_dir=self.agent,
            project_dir=self.repo,
            home=self.home,
            environ={"HOME": str(self.home), "PI_MCP_PROJECT_TRUST": trust, **environ},
        )


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path)


MINE = {
    "command": "/usr/bin/mine",
    "args": ["--safe"],
    "env": {"MODE": "safe"},
    "lifecycle": "lazy",
    "includeTools": ["read_*"],
}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        pytest.param("command", ["/bin/sh", "-c", "id"], id="a command as an array"),
        pytest.param("args", {"0": "--unsafe"}, id="args as an object"),
        pytest.param("args", ["--ok", 7], id="a number among the args"),
        pytest.param("env", {"MODE": ["unsafe"]}, id="an array as an env value"),
        pytest.param("lifecycle", "keep-alive-forever", id="an unknown lifecycle"),
        pytest.param("includeTools", "*", id="one string for includeTools"),
        pytest.param("excludeTools", {"*": True}, id="an object for excludeTools"),
        pytest.param("toolOverrides", {"read_a": {"hidden": "perhaps"}}, id="a tool override flag"),
        pytest.param("searchKeywords", {"read_*": "words"}, id="search words as one string"),
        pytest.param("idleTimeout", "never", id="a word for idleTimeout"),
        pytest.param("headers", {"X-Key": 1}, id="a number as a header value"),
        pytest.param("requestHeadersCommand", {"command": 5}, id="a headers command number"),
        pytest.param("oauth", {"grantType": "password"}, id="an unknown OAuth grant"),
    ],
)
def test_a_wrong_value_in_a_higher_layer_is_refused_and_the_server_keeps_its_own(
    workspace: Workspace, key: str, value: object
) -> None:
    workspace.write_user({"mine": MINE})
    workspace.write_repo({"mine": {"args": ["--unsafe"], key: value}})
    lines = workspace.repo_file.read_text(encoding="utf-8").splitlines()
    key_line = next(i for i, line in enumerate(lines, 1) if f'"{key}":' in line)

    config = workspace.load()

    (error,) = config.errors
    assert error.path == str(workspace.repo_file)
    assert error.field is not None
    assert error.field.startswith(f"mcpServers.mine.{key}")
    assert error.line is not None
    assert error.line >= key_line
    mine = config.servers["mine"]  # the repository's entry is ignored whole, not in part
    assert (mine.command, mine.args, mine.env) == ("/usr/bin/mine", ("--safe",), {"MODE": "safe"})
    assert (mine.lifecycle, mine.include_tools) == ("lazy", ("read_*",))
    assert mine.model_fields_set == {"command", "args", "env", "lifecycle", "include_tools"}


def test_an_entry_built_from_checked_values_is_still_frozen(workspace: Workspace) -> None:
    workspace.write_user({"mine": MINE})
    mine = workspace.load().servers["mine"]

    with pytest.raises(ValidationError):
        mine.command = "/bin/sh"  # type: ignore[misc]

    assert mine.command == "/usr/bin/mine"


def test_secrets_of_an_entry_built_from_checked_values_are_masked(workspace: Workspace) -> None:
    workspace.write_user(
        {
            "remote": {
                "url": "https://user:${PASSWORD}@mcp.example/mcp",
                "headers": {"X-Key": CANARY + "-header"},
                "bearerToken": "${TOKEN}",
            },
            "local": {"command": "run", "args": ["--key", "${TOKEN}"], "env": {"K": CANARY}},
        }
    )

    config = workspace.load(PASSWORD=CANARY + "-password", TOKEN=CANARY + "-token")

    remote, local = config.servers["remote"], config.servers["local"]
    assert remote.bearer_token == CANARY + "-token"
    assert local.args == ("--key", CANARY + "-token")
    shown = repr(remote) + str(remote) + repr(local) + str(local)
    for value in ("-password", "-header", "-token", ""):
        assert CANARY + value not in redact(f"the server printed {CANARY}{value}")
    assert CANARY not in shown
    assert local.env_templates == {"args[1]": "${TOKEN}"}
    assert remote.written["bearerToken"] == "${TOKEN}"


def test_an_untrusted_repository_entry_built_from_checked_values_runs_nothing(
    workspace: Workspace,
) -> None:
    workspace.write_user({"mine": MINE})
    workspace.write_repo(
        {"theirs": {"command": "/bin/sh", "args": ["-c", "id"]}, "mine": {"args": ["--x"]}}
    )

    config = workspace.load(trust="ask")

    for name in ("theirs", "mine"):
        entry = config.servers[name]
        assert entry.untrusted is not None
        assert entry.untrusted.files == (workspace.repo_file,)
        assert entry.is_enabled is False


BASE: dict[str, Any] = {
    "command": "npx",
    "args": ["-y", "@acme/mcp"],
    "env": {"TOKEN": "${ACME_TOKEN}"},
    "cwd": "~/work",
    "includeTools": ["read_*"],
}
ENVIRON = {"HOME": "/home/u", "ACME_TOKEN": "t-1", "OTHER": "o-1"}


def digest_of(workspace: Workspace, entry: dict[str, Any], **environ: str) -> str:
    """The digest of ``entry`` as loaded from the user's file (so hashed as written)."""
    workspace.write_user({"s": entry})
    loaded = workspace.load(**{**ENVIRON, **environ})
    assert loaded.errors == ()
    return config_hash(loaded.servers["s"], environ={**ENVIRON, **environ})


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param({"command": "npx2"}, id="command"),
        pytest.param({"args": ["@acme/mcp", "-y"]}, id="args order"),
        pytest.param({"args": ["-y", "@acme/mcp", "--x"]}, id="one more arg"),
        pytest.param({"env": {"TOKEN": "${OTHER}"}}, id="env value"),
        pytest.param({"env": {"TOKEN2": "${ACME_TOKEN}"}}, id="env name"),
        pytest.param({"cwd": "~/other"}, id="cwd"),
        pytest.param({"includeTools": ["read_*", "write"]}, id="includeTools"),
        pytest.param({"excludeTools": ["x"]}, id="excludeTools"),
        pytest.param({"exposeResources": False}, id="exposeResources"),
        pytest.param({"protocolVersion": "auto"}, id="protocolVersion"),
        pytest.param({"auth": False}, id="auth"),
        pytest.param({"bearerTokenEnv": "OTHER"}, id="bearerTokenEnv"),
    ],
)
def test_every_member_the_hash_covers_changes_the_digest(
    workspace: Workspace, changed: dict[str, Any]
) -> None:
    assert digest_of(workspace, {**BASE, **changed}) != digest_of(workspace, BASE)


def test_what_the_hash_reads_from_the_environment_changes_the_digest(
    workspace: Workspace,
) -> None:
    remote = {"url": "https://${HOST}/mcp", "headers": {"X-Key": "${KEY}"}, "bearerTokenEnv": "T"}
    base = {"HOST": "a.example", "KEY": "k-1", "T": "b-1"}
    first = digest_of(workspace, remote, **base)

    for name, value in (("HOST", "b.example"), ("KEY", "k-2"), ("T", "b-2")):
        assert digest_of(workspace, remote, **{**base, name: value}) != first, name
    assert digest_of(workspace, {**remote, "bearerToken": "${KEY}"}, **base) != first
    assert digest_of(workspace, {**remote, "url": "https://a.example/mcp"}, **base) == first
    local = digest_of(workspace, BASE)
    assert digest_of(workspace, BASE, ACME_TOKEN="t-2") != local  # an env value's variable
    assert digest_of(workspace, BASE, HOME="/home/v") != local  # cwd: ~/work
    socket = digest_of(workspace, {"socket": "~/s.sock"})
    assert digest_of(workspace, {"socket": "~/s.sock"}, HOME="/home/v") != socket


def test_what_only_changes_how_a_server_is_used_leaves_the_digest(workspace: Workspace) -> None:
    first = digest_of(workspace, BASE)

    assert digest_of(workspace, {**BASE, "lifecycle": "eager", "idleTimeout": 3}) == first
    assert digest_of(workspace, {**BASE, "toolPrefix": "none", "debug": True}) == first
    assert digest_of(workspace, BASE, UNRELATED="x") == first


def test_a_member_set_to_its_default_hashes_apart_from_one_left_out() -> None:
    left_out = ServerEntry.model_validate({"command": "x"})

    for key, value in (("exposeResources", True), ("includeTools", None), ("auth", None)):
        written = ServerEntry.model_validate({"command": "x", key: value})
        assert config_hash(written, environ={}) != config_hash(left_out, environ={}), key


def test_values_shaped_like_the_canonical_text_forge_no_other_member() -> None:
    plain = ServerEntry.model_validate({"command": "x", "args": ["a"], "auth": "bearer"})
    forged = [
        {"command": "x", "args": ['a"],"auth":"bearer']},
        {"command": 'x","auth":"bearer', "args": ["a"]},
        {"command": "x", "args": ["a"], "env": {'K":"v"},"auth":"bearer': "v"}},
    ]

    digests = {config_hash(ServerEntry.model_validate(f), environ={}) for f in forged}

    assert config_hash(plain, environ={}) not in digests
    assert len(digests) == len(forged)


def test_a_lone_surrogate_anywhere_still_hashes_and_counts(workspace: Workspace) -> None:
    # JSON files can hold one ("\ud800"); it cannot be encoded as it is.
    plain = digest_of(workspace, BASE)
    for changed in (
        {"command": "npx\ud800"},
        {"args": ["-y", "@acme/mcp\udfff"]},
        {"env": {"TOKEN": "\ud800"}},
        {"env": {"\ud800": "x"}},
    ):
        assert digest_of(workspace, {**BASE, **changed}) not in (plain, ""), changed
