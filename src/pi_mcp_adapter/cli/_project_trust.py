"""Project trust on the command line: the question at a terminal, and what views show.

Before a command that may start servers runs, and while ``projectTrust`` is ``ask``, the CLI
asks once per content of each untrusted project file, on stderr, when a person is there
(stdin and stderr are terminals and ``CI`` is unset). The question shows each server's
command with its arguments, its URL, and every ``!command`` it would run, masked as ``config``
masks them. "y" records the trust; anything else records the "no" for that content, so the
next command does not ask again (``pi-mcp trust --project`` still trusts it). Headless, nothing
is asked and the servers show as ``untrusted``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pi_mcp_adapter._environment import in_ci_job

if TYPE_CHECKING:
    from pi_mcp_adapter.config import LoadedConfig, ServerEntry
    from pi_mcp_adapter.config._trust import ProjectFile, ProjectTrust

__all__ = [
    "ask_project_trust",
    "describe_project_file",
    "person_is_present",
    "project_trust_json",
    "trust_json",
]


def person_is_present(environ: Mapping[str, str]) -> bool:
    """A terminal on both ends and not a CI job (CI runners may allocate a pseudo-terminal)."""
    if in_ci_job(environ):
        return False
    return sys.stdin.isatty() and sys.stderr.isatty()


def ask_project_trust(loaded: LoadedConfig, *, agent_dir: Path, environ: Mapping[str, str]) -> bool:
    """Ask whether to trust the project files that keep servers from running; True when the
    person trusted them (the caller loads the configuration again)."""
    from pi_mcp_adapter.config._trust import TrustStore

    trust = loaded.project_trust
    if trust.mode != "ask" or not person_is_present(environ):
        return False
    store = TrustStore.in_agent_dir(agent_dir)
    pending = [
        f
        for f in trust.untrusted_files
        if f.sha256 is not None
        and _runnable(loaded, f.servers)
        and not store.was_declined(f.path, f.sha256)
    ]
    if not pending:
        return False
    out = sys.stderr
    out.write("\nThis project's MCP configuration would run commands on this machine:\n")
    for project_file in pending:
        out.write("\n".join(describe_project_file(loaded, project_file)) + "\n")
    out.write("Only trust a repository you know. Trust these files as they are now? [y/N] ")
    out.flush()
    answer = sys.stdin.readline().strip().lower()
    recorded = [(f.path, f.sha256) for f in pending if f.sha256 is not None]
    try:
        if answer in ("y", "yes"):
            store.trust(recorded)
            out.write("Trusted. An edit of these files asks again.\n")
            return True
        store.decline(recorded)
    except OSError as exc:
        out.write(f"warning: cannot record the answer in {store.path}: {exc}\n")
        return False
    out.write(f"Not trusted: these servers stay off. Trust them later with `{trust.command}`.\n")
    return False


def _runnable(loaded: LoadedConfig, servers: Sequence[str]) -> bool:
    """Whether trusting would start anything: some server is neither disabled nor gone."""
    return any(
        (entry := loaded.servers.get(name)) is not None and entry.enabled and not entry.disabled
        for name in servers
    )


def describe_project_file(loaded: LoadedConfig, project_file: ProjectFile) -> list[str]:
    """The file and, for each of its servers, what would run or be contacted (masked)."""
    lines = [f"  {project_file.path}"]
    if project_file.real_path != project_file.path.absolute():
        # Trust is recorded for the file the link leads to, and its commands run there.
        lines[0] += f" -> {project_file.real_path}"
    for name in project_file.servers:
        entry = loaded.servers.get(name)
        if entry is None:
            continue
        lines.append(f"    server {name}:")
        lines.extend(f"      {line}" for line in _what_runs(entry))
    if not project_file.servers:
        lines.append("    (no servers; settings only)")
    return lines


def _what_runs(entry: ServerEntry) -> list[str]:
    import shlex

    from pi_mcp_adapter.config import mask_secrets
    from pi_mcp_adapter.config._command_values import command_value
    from pi_mcp_adapter.config._masking import mask_text

    shown = mask_secrets(entry)
    lines: list[str] = []
    command = shown.get("command")
    if isinstance(command, str):
        args = shown.get("args") or []
        lines.append("runs: " + shlex.join([command, *(str(a) for a in args)]))
    for key in ("url", "socket"):
        value = shown.get(key)
        if isinstance(value, str):
            lines.append(f"{key}: {value}")
    headers_command = shown.get("requestHeadersCommand")
    if isinstance(headers_command, dict):
        argv = [
            str(headers_command.get("command", "")),
            *map(str, headers_command.get("args") or []),
        ]
        lines.append("runs for headers: " + shlex.join(argv))
    for field in ("env", "headers"):
        values = getattr(entry, field)
        for key, value in values.items():
            # The written `!command` (not its output, which is the secret) is what would run.
            found = command_value(value)
            if found is not None:
                lines.append(f"runs for {field} {key}: {mask_text(found.command)}")
    token = entry.bearer_token
    if token is not None and (found := command_value(token)) is not None:
        lines.append(f"runs for bearerToken: {mask_text(found.command)}")
    idp = entry.oauth_config.idp
    for key, value in (
        ("idToken", idp and idp.id_token),
        ("clientSecret", idp and idp.client_secret),
    ):
        if value and (found := command_value(value)) is not None:
            lines.append(f"runs for oauth.idp.{key}: {mask_text(found.command)}")
    return lines or ["(nothing to run)"]


def trust_json(loaded: LoadedConfig) -> dict[str, Any]:
    """The ``projectTrust`` part of ``config --json``: the mode and each project file."""
    return project_trust_json(loaded.project_trust)


def project_trust_json(trust: ProjectTrust) -> dict[str, Any]:
    """:func:`trust_json` of a trust decision (also ``status --json``'s)."""
    return {
        "mode": trust.mode,
        "modeSource": trust.mode_source,
        "command": trust.command,
        "files": [
            {
                "path": str(f.path),
                "sha256": f.sha256,
                "trusted": f.trusted,
                "servers": list(f.servers),
            }
            for f in trust.files
        ],
    }
