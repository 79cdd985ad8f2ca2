"""What a status from the cache reads of the configuration, and keeping it between processes.

A one-shot ``status`` judges each configured server by the metadata cache's summary of it and
the failures file (see :meth:`ServerStatuses.report`). Of the configuration it reads a few
facts per server: enabled or not and why, its lifecycle, the config hash its summary must
carry, the digest its failure record must carry, and whether the counts in the summary alone
give its tool count. Loading 19,641 servers to learn them costs half a second; hashing the
files they come from costs a hundredth of that.

So a one-shot status keeps them in ``<agent dir>/mcp-status-facts.json``, under the digest of
what its configuration was loaded from (:func:`pi_mcp_adapter.config.inputs_digest`: the
files, the trust records, the environment variables the load looked up, the options and the
code). The next status that finds the same digest shows them without loading the
configuration; any other loads it and writes them again. They are kept only for a
configuration whose every input that digest covers (no host import or plugin), without shared
state (whose records a file digest cannot vouch for), and in which no enabled server needs
more of its entry than these facts (a server whose tool filters or overrides decide its tool
count, one signed in explicitly with OAuth). A summary that the counts cannot answer (changed
definitions awaiting review) makes that status load the configuration as well.

The file holds no value of the configuration: server names, flags, lifecycles, digests (the
config hash is in ``mcp-cache.json`` already, by the reference's format; the failure digest
is in the failures file), the project trust decision (paths and file hashes), and the
configuration's errors and warnings as they are shown, redacted. It is written whole or not at
all (0600); one that cannot be read, of another version, or made for other inputs is ignored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pi_mcp_adapter._secrets import redact
from pi_mcp_adapter.catalog import config_hash, counted_tool_count, tools_counted_alone
from pi_mcp_adapter.config import LoadedConfig, ServerEntry
from pi_mcp_adapter.config._trust import ProjectFile, ProjectTrust

from ._kept_files import read_kept, write_kept
from ._values import ServerStatus, StatusReport

if TYPE_CHECKING:
    from pi_mcp_adapter.catalog import EntryState, ToolDefinitionDiff
    from pi_mcp_adapter.servers import FailureRecord

__all__ = [
    "STATUS_FACTS_NAME",
    "EntryNeeded",
    "KeptStatus",
    "Known",
    "ServerFacts",
    "StatusFacts",
    "cached_status_rows",
    "read_status_facts",
    "write_status_facts",
]

logger = logging.getLogger(__name__)

STATUS_FACTS_NAME = "mcp-status-facts.json"
_VERSION = 1
_DIGEST_LENGTH = 64  # SHA-256, hex
_FILE_LIMIT_BYTES = 1 << 30
"""Not the configuration files' 8 MiB: the file holds 190 bytes a server (3.7 MB at 19,641)."""

Known = tuple[bool, int, tuple[str, ...], tuple["ToolDefinitionDiff", ...]]
"""Of one server: whether its tools are known, how many, changed tools and their diffs."""


class ServerFacts(NamedTuple):
    """What a status from the cache reads of one configured server's entry (a tuple: a
    status of 19,641 servers read from the file makes one each)."""

    enabled: bool
    disabled: bool
    untrusted: str | None
    """Why it may not run (:attr:`ServerEntry.untrusted`'s message); None when trusted."""
    lifecycle: str
    config_hash: str
    """The ``configHash`` its cache entry must carry (``catalog.config_hash``)."""
    failure_digest: str | None
    """The digest its failure record must carry (``servers.entry_digest``); None in facts made
    from a loaded configuration, which asks the entries themselves."""
    exposes_resources: bool
    counted_alone: bool
    """No filter or override decides its tools: a summary's counts give the number."""
    explicit_oauth: bool

    @property
    def is_enabled(self) -> bool:
        """As :attr:`ServerEntry.is_enabled`: enabled, not disabled, trusted."""
        return self.enabled and not self.disabled and self.untrusted is None

    @classmethod
    def of(
        cls,
        entry: ServerEntry,
        *,
        environ: Mapping[str, str] | None,
        failure_digest: str | None = None,
    ) -> ServerFacts:
        untrusted = entry.untrusted
        return cls(
            enabled=entry.enabled,
            disabled=entry.disabled,
            untrusted=untrusted.message if untrusted is not None else None,
            lifecycle=entry.lifecycle,
            config_hash=config_hash(entry, environ=environ),
            failure_digest=failure_digest,
            exposes_resources=entry.expose_resources,
            counted_alone=tools_counted_alone(entry),
            explicit_oauth=entry.oauth_mode == "explicit",
        )


@dataclass(frozen=True, slots=True)
class StatusFacts:
    """What a status from the cache reads of a whole configuration."""

    servers: Mapping[str, ServerFacts]
    """The usable entries, in the configuration's order."""
    invalid: Mapping[str, str]
    """Servers that cannot be used, with the message shown."""
    errors: tuple[str, ...]
    """The configuration's errors, as shown (``str`` of each)."""
    warnings: tuple[str, ...]
    project_trust: ProjectTrust
    shared_state: bool
    """Whether the configuration names a shared state (then nothing is kept)."""

    @classmethod
    def of(
        cls,
        config: LoadedConfig,
        *,
        environ: Mapping[str, str] | None,
        failure_digest: Callable[[ServerEntry], str] | None = None,
    ) -> StatusFacts:
        """The facts of ``config``; config hashes read ``environ`` (None: this process's);
        ``failure_digest``: to record each entry's (for facts to keep)."""
        return cls(
            servers={
                name: ServerFacts.of(
                    entry,
                    environ=environ,
                    failure_digest=failure_digest(entry) if failure_digest is not None else None,
                )
                for name, entry in config.servers.items()
            },
            invalid={name: error.message for name, error in config.invalid_servers.items()},
            errors=tuple(str(e) for e in config.errors),
            warnings=tuple(config.warnings),
            project_trust=config.project_trust,
            shared_state=bool(config.settings.shared_state),
        )

    @property
    def keepable(self) -> bool:
        """Whether a later status can be shown from these facts alone (see the module
        docstring): no shared state, and no enabled server that needs more of its entry."""
        return not self.shared_state and all(
            facts.counted_alone and not facts.explicit_oauth
            for facts in self.servers.values()
            if facts.is_enabled
        )


@dataclass(frozen=True, slots=True)
class KeptStatus:
    """A status from the cache shown from kept facts (``engine.kept_cached_status``)."""

    report: StatusReport | None
    """None when a server's status needs its entry: the configuration is loaded for it (the
    facts are current, and need not be kept again)."""
    facts: StatusFacts
    cache_warnings: tuple[str, ...]
    """What the metadata cache said while it was read (a file it set aside...)."""


class EntryNeeded(Exception):
    """A server's status needs its entry, which facts read from the file lack."""


def cached_status_rows(
    facts: StatusFacts,
    *,
    summaries: Callable[[Mapping[str, str]], Mapping[str, tuple[EntryState, Mapping[str, Any]]]],
    failures: Callable[[Mapping[str, ServerFacts]], Mapping[str, FailureRecord]],
    now: float,
    listing: Collection[str],
    needs_auth: Callable[[str], bool],
    known_from_entry: Callable[[str], Known] | None,
) -> tuple[ServerStatus, ...]:
    """Each server's row of a status from the cache, with no manager started (see
    :meth:`ServerStatuses.report`): ``summaries`` judges the cache's summaries by config
    hash, ``failures`` gives the enabled servers' failure records, ``listing`` names the servers
    this process lists now, ``needs_auth`` an explicitly signed-in server without a token, and
    ``known_from_entry`` what the catalog would say of a server whose summary cannot tell.

    Raises:
        EntryNeeded: a server needs ``known_from_entry`` and it is None.
    """
    servers = facts.servers
    enabled = {name: f for name, f in servers.items() if f.is_enabled}
    judged = summaries({name: f.config_hash for name, f in enabled.items()}).get
    failed = failures(enabled).get
    invalid_of = facts.invalid.get
    rows: list[ServerStatus] = []
    add = rows.append
    for name, server in servers.items():
        invalid = invalid_of(name)
        if invalid is not None:
            add(ServerStatus(name, "invalid", 0, error=invalid))
            continue
        lifecycle = server.lifecycle
        if name not in enabled:
            if server.untrusted is not None and server.enabled and not server.disabled:
                add(ServerStatus(name, "untrusted", 0, lifecycle=lifecycle, error=server.untrusted))
            else:
                add(ServerStatus(name, "disabled", 0, lifecycle=lifecycle))
            continue
        known, count, changed, diffs = _known(name, server, judged(name), known_from_entry)
        record = failed(name)
        if record is not None and record.backoff_left_s(now) > 0:
            add(
                ServerStatus(
                    name,
                    "failed",
                    count,
                    lifecycle=lifecycle,
                    error=record.message,
                    failed_ago_s=max(0.0, now - record.failed_at),
                    changed_tools=changed,
                    definition_changes=diffs,
                )
            )
            continue
        status = "cached" if known else "not-cached"
        if name in listing:
            status = "connecting"
        elif server.explicit_oauth and needs_auth(name):
            status = "needs-auth"
        add(
            ServerStatus(
                name,
                status,
                count,
                lifecycle=lifecycle,
                changed_tools=changed,
                definition_changes=diffs,
            )
        )
    rows += [
        ServerStatus(name, "invalid", 0, error=message)
        for name, message in facts.invalid.items()
        if name not in servers
    ]
    return tuple(rows)


def _known(
    name: str,
    server: ServerFacts,
    judged: tuple[EntryState, Mapping[str, Any]] | None,
    known_from_entry: Callable[[str], Known] | None,
) -> Known:
    """Whether ``name``'s tools are known, how many, and its changed tools, from the cache's
    summary when it tells (no entry parsed, no catalog built), else from its entry."""
    if judged is None or judged[0] != "valid":
        return False, 0, (), ()
    summary = judged[1]
    if server.counted_alone and summary.get("changes") is False:
        count = counted_tool_count(summary.get("named"), expose_resources=server.exposes_resources)
        if count is not None:
            return True, count, (), ()
    if known_from_entry is None:
        raise EntryNeeded(name)
    return known_from_entry(name)


# ----------------------------------------------------------------------------- the file


def write_status_facts(
    agent_dir: Path, facts: StatusFacts, *, key: str, names: Sequence[str]
) -> None:
    """Keep ``facts`` for the inputs whose digest is ``key`` (``names``: the environment
    variables the digest reads), in an agent dir that exists. A file that cannot be written is
    logged and left alone: the next status loads the configuration."""
    servers = facts.servers
    rows = servers.values()
    if any(f.failure_digest is None for f in rows):
        raise ValueError("facts to keep carry each entry's failure digest")
    document = {
        "version": _VERSION,
        "key": key,
        "environ": sorted(names),
        # A column per field, each digest column one string: a status reads 19,641 servers
        # from this file, and parsing a list per server cost more than the rest of it.
        "servers": {
            "names": list(servers),
            "enabled": [f.enabled for f in rows],
            "disabled": [f.disabled for f in rows],
            "untrusted": {
                n: redact(f.untrusted) for n, f in servers.items() if f.untrusted is not None
            },
            "lifecycles": [f.lifecycle for f in rows],
            "configHashes": "".join(f.config_hash for f in rows),
            "failureDigests": "".join(f.failure_digest or "" for f in rows),
            "exposesResources": [f.exposes_resources for f in rows],
            "countedAlone": [f.counted_alone for f in rows],
            "explicitOauth": [f.explicit_oauth for f in rows],
        },
        "invalid": [[name, redact(message)] for name, message in facts.invalid.items()],
        "errors": [redact(e) for e in facts.errors],
        "warnings": [redact(w) for w in facts.warnings],
        "projectTrust": _trust_json(facts.project_trust),
    }
    data = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    # A status creates no agent dir: nothing is cached there to show either.
    write_kept(agent_dir / STATUS_FACTS_NAME, data)


def read_status_facts(
    agent_dir: Path, key_of: Callable[[Sequence[str]], str]
) -> StatusFacts | None:
    """The facts kept in ``agent_dir`` when ``key_of`` (the digest of the current inputs for
    the environment variables it is given) equals their key; None for a missing, damaged or
    foreign file, or one kept for other inputs."""
    document = read_kept(
        agent_dir / STATUS_FACTS_NAME,
        version=_VERSION,
        limit_bytes=_FILE_LIMIT_BYTES,
        key_of=key_of,
    )
    if document is None:
        return None
    try:
        return StatusFacts(
            servers=_servers_of(document["servers"]),
            invalid={str(name): str(message) for name, message in document["invalid"]},
            errors=tuple(str(e) for e in document["errors"]),
            warnings=tuple(str(w) for w in document["warnings"]),
            project_trust=_trust_of(document["projectTrust"]),
            shared_state=False,
        )
    except (KeyError, TypeError, ValueError) as exc:
        logger.debug("status facts unreadable: %s", exc)
        return None


def _servers_of(columns: Any) -> dict[str, ServerFacts]:
    names = columns["names"]
    count = len(names) if _all_of(str, names) else -1
    flags = [
        columns[key]
        for key in ("enabled", "disabled", "exposesResources", "countedAlone", "explicitOauth")
    ]
    lifecycles, untrusted = columns["lifecycles"], columns["untrusted"]
    hashes, failures = columns["configHashes"], columns["failureDigests"]
    if not (
        count == len(set(names))
        and all(len(column) == count and _all_of(bool, column) for column in flags)
        and len(lifecycles) == count
        and _all_of(str, lifecycles)
        and isinstance(untrusted, dict)
        and _all_of(str, untrusted.values())
        and isinstance(hashes, str)
        and isinstance(failures, str)
        and len(hashes) == len(failures) == count * _DIGEST_LENGTH
    ):
        raise ValueError("malformed server columns")
    enabled, disabled, exposes, counted, explicit = flags
    return dict(
        zip(
            names,
            map(
                ServerFacts,
                enabled,
                disabled,
                map(untrusted.get, names),
                lifecycles,
                _digests(hashes),
                _digests(failures),
                exposes,
                counted,
                explicit,
            ),
            strict=True,
        )
    )


def _all_of(kind: type, values: Any) -> bool:
    """Whether ``values`` is a list (or a dict's values) of exactly ``kind``."""
    if not isinstance(values, list | type({}.values())):
        return False
    return all(type(v) is kind for v in values)


def _digests(joined: str) -> list[str]:
    return [joined[i : i + _DIGEST_LENGTH] for i in range(0, len(joined), _DIGEST_LENGTH)]


def _trust_json(trust: ProjectTrust) -> dict[str, Any]:
    return {
        "mode": trust.mode,
        "modeSource": trust.mode_source,
        "projectDir": str(trust.project_dir) if trust.project_dir is not None else None,
        "files": [[str(f.path), f.sha256, f.trusted, list(f.servers)] for f in trust.files],
    }


def _trust_of(data: Any) -> ProjectTrust:
    mode = data["mode"]
    if mode not in ("ask", "always", "never"):
        raise ValueError(f"projectTrust mode {mode!r}")
    project_dir = data["projectDir"]
    return ProjectTrust(
        mode=mode,
        mode_source=str(data["modeSource"]),
        project_dir=Path(project_dir) if isinstance(project_dir, str) else None,
        files=tuple(
            ProjectFile(Path(path), sha256, bool(trusted), tuple(servers))
            for path, sha256, trusted, servers in data["files"]
        ),
    )
