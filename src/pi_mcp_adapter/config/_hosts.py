"""Reading MCP servers from other hosts' config files (Cursor, Claude, Codex, VS Code...).

Each reader turns one host file into entries in this project's shape (``command``/``args``/
``env``/``cwd``/``url``/``headers``...), remembering where every key came from so that errors
still point into the host's file. Host files are only ever opened for reading.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pi_mcp_adapter._errors import ConfigError
from pi_mcp_adapter._files import CONFIG_FILE_LIMIT_BYTES, NotARegularFileError, read_regular_file

from ._jsonc import JsoncDocument, JsoncSyntaxError, JsonPath, parse_jsonc
from ._locations import HostFile, ImportKind, Where, host_files
from ._validate import RawEntry, json_type

__all__ = ["HostRead", "read_file_text", "read_host_file", "read_import"]

_TRANSPORT_TYPES = frozenset({"stdio", "http", "sse", "streamable-http", "streamableHttp"})
_INPUT_REFERENCE = re.compile(r"\$\{input:[^}]*\}")


@dataclass(frozen=True, slots=True)
class HostRead:
    """What one host file contributed: entries in file order, plus problems found on the way."""

    file: HostFile
    exists: bool
    entries: list[RawEntry] = field(default_factory=list)
    errors: list[ConfigError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def read_file_text(path: Path) -> str | None:
    """The file's text, or ``None`` when it does not exist.

    Raises:
        ConfigError: the file exists but cannot be read or is not UTF-8.
    """
    try:
        return read_regular_file(path).decode("utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError:
        raise ConfigError("is a directory, not a config file", path=str(path)) from None
    except NotARegularFileError:
        raise ConfigError(
            f"is not a config file: a device, a pipe or a socket, or larger than "
            f"{CONFIG_FILE_LIMIT_BYTES // (1024 * 1024)} MiB (not read)",
            path=str(path),
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"is not UTF-8 text ({exc.reason})", path=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot be read: {exc.strerror}", path=str(path)) from None


def read_import(kind: ImportKind, where: Where) -> list[HostRead]:
    """Read every file of one host, lowest precedence first."""
    return [read_host_file(file, where) for file in host_files(kind, where)]


def read_host_file(file: HostFile, where: Where) -> HostRead:
    """Read one host file. A missing file is not an error; a broken one is reported."""
    try:
        text = read_file_text(file.path)
    except ConfigError as exc:
        return HostRead(file, exists=True, errors=[exc])
    if text is None:
        return HostRead(file, exists=False)
    if file.format == "codex-toml":
        return _read_codex(file, text)
    try:
        document = parse_jsonc(text)
    except JsoncSyntaxError as exc:
        error = ConfigError(exc.message, path=str(file.path), line=exc.line)
        return HostRead(file, exists=True, errors=[error])
    if document is None:
        return HostRead(file, exists=True)
    read = HostRead(file, exists=True)
    if not isinstance(document.data, dict):
        read.errors.append(
            ConfigError(
                f"the top level must be an object, not {json_type(document.data)}",
                path=str(file.path),
                line=1,
            )
        )
        return read
    data: dict[str, object] = document.data
    if file.format == "claude-json":
        _collect_map(read, document, data, ("mcpServers",), _translate_mcp_json)
        _collect_claude_project(read, document, data, where)
    elif file.format == "vscode":
        _collect_map(read, document, data, ("mcpServers",), _translate_mcp_json)
        _collect_map(read, document, data, ("servers",), _translate_mcp_json)
    elif file.format == "windsurf":
        _collect_map(read, document, data, ("mcpServers",), _translate_windsurf)
    elif file.format == "opencode":
        _collect_map(read, document, data, ("mcp",), _translate_opencode)
    else:
        _collect_map(read, document, data, ("mcpServers",), _translate_mcp_json)
    if file.kind in ("vscode", "cursor", "windsurf"):
        _substitute_editor_variables(read, where)
    return read


Translation = tuple[dict[str, object], dict[str, JsonPath]]
Translator = Callable[[dict[str, object], JsonPath], Translation]


def _collect_map(
    read: HostRead,
    document: JsoncDocument,
    data: Mapping[str, object],
    map_path: JsonPath,
    translate: Translator,
) -> None:
    servers: object = data
    for part in map_path:
        if not isinstance(servers, dict) or part not in servers:
            return
        servers = servers[part]
    if not isinstance(servers, dict):
        read.errors.append(
            ConfigError(
                f"must be an object of servers, not {json_type(servers)}",
                path=str(read.file.path),
                line=document.line_of(map_path),
                field=".".join(str(p) for p in map_path),
            )
        )
        return
    for name, value in servers.items():
        entry_path = (*map_path, name)
        if isinstance(value, dict):
            translated, key_paths = translate(value, entry_path)
        else:
            translated, key_paths = value, {}  # the validator reports the wrong type
        read.entries.append(
            RawEntry(
                name=name,
                value=translated,
                path=read.file.path,
                json_path=entry_path,
                line_of=document.line_of,
                key_paths=key_paths,
            )
        )


def _collect_claude_project(
    read: HostRead, document: JsoncDocument, data: Mapping[str, object], where: Where
) -> None:
    projects = data.get("projects")
    if not isinstance(projects, dict):
        return
    wanted = {str(where.project_dir), where.project_dir.as_posix()}
    for key in projects:
        # Claude Code keys projects by absolute path; on Windows it writes forward slashes.
        if isinstance(key, str) and (key in wanted or key.rstrip("/\\") in wanted):
            _collect_map(read, document, data, ("projects", key, "mcpServers"), _translate_mcp_json)


def _without_transport_type(entry: dict[str, object]) -> dict[str, object]:
    """Drop the ``type`` key hosts use to name the transport; the URL or command says it."""
    result = dict(entry)
    if result.get("type") in _TRANSPORT_TYPES:
        del result["type"]
    return result


def _translate_mcp_json(entry: dict[str, object], path: JsonPath) -> Translation:
    return _without_transport_type(entry), {}


def _translate_windsurf(entry: dict[str, object], path: JsonPath) -> Translation:
    result = _without_transport_type(entry)
    key_paths: dict[str, JsonPath] = {}
    if "serverUrl" in result and "url" not in result:
        result["url"] = result.pop("serverUrl")
        key_paths["url"] = (*path, "serverUrl")
    if "disabledTools" in result and "excludeTools" not in result:
        result["excludeTools"] = result.pop("disabledTools")
        key_paths["excludeTools"] = (*path, "disabledTools")
    return result, key_paths


def _translate_opencode(entry: dict[str, object], path: JsonPath) -> Translation:
    result: dict[str, object] = {}
    key_paths: dict[str, JsonPath] = {}
    kind = entry.get("type")
    for key, value in entry.items():
        if key == "type" and value in ("local", "remote"):
            continue
        if key == "command" and kind == "local" and isinstance(value, list) and value:
            # OpenCode writes the program and its arguments as one array.
            result["command"], result["args"] = value[0], value[1:]
            key_paths["command"] = (*path, "command", 0)
            key_paths["args"] = (*path, "command")
        elif key == "environment":
            result["env"] = value
            key_paths["env"] = (*path, "environment")
        else:
            result[key] = value
    return result, key_paths


def _substitute_editor_variables(read: HostRead, where: Where) -> None:
    """Resolve the editor variables VS Code, Cursor and Windsurf put in server entries.

    ``${workspaceFolder}``, ``${workspaceFolderBasename}``, ``${userHome}`` and
    ``${pathSeparator}`` (``${/}``) have a meaning outside the editor (left as written they
    would read as environment variables that are not set); ``${input:...}`` prompts the user
    inside VS Code and cannot be resolved here.
    """
    replacements = {
        "${workspaceFolder}": str(where.project_dir),
        "${workspaceFolderBasename}": where.project_dir.name,
        "${userHome}": str(where.home),
        "${pathSeparator}": os.sep,
        "${/}": os.sep,
    }

    def fix(value: object) -> object:
        if isinstance(value, str):
            for old, new in replacements.items():
                value = value.replace(old, new)
            return value
        if isinstance(value, list):
            return [fix(v) for v in value]
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        return value

    for index, entry in enumerate(read.entries):
        if not isinstance(entry.value, dict):
            continue
        fixed = {k: fix(v) for k, v in entry.value.items()}
        if any(_INPUT_REFERENCE.search(str(v)) for v in fixed.values()):
            read.warnings.append(
                f"{entry.path}: server {entry.name!r} uses ${{input:...}} prompts, which only "
                "the editor can answer; those values are left as written"
            )
        read.entries[index] = RawEntry(
            name=entry.name,
            value=fixed,
            path=entry.path,
            json_path=entry.json_path,
            line_of=entry.line_of,
            key_paths=entry.key_paths,
        )


_TOML_LINE = re.compile(r"at line (\d+)")

# Codex keys that map one-to-one onto ours (seconds become milliseconds below).
_CODEX_KEYS = {
    "command": "command",
    "args": "args",
    "env": "env",
    "cwd": "cwd",
    "url": "url",
    "enabled": "enabled",
    "bearer_token_env_var": "bearerTokenEnv",
    "http_headers": "headers",
    "enabled_tools": "includeTools",
    "disabled_tools": "excludeTools",
}
_CODEX_SECONDS = {"startup_timeout_sec": "startupTimeoutMs", "tool_timeout_sec": "requestTimeoutMs"}


def _read_codex(file: HostFile, text: str) -> HostRead:
    import tomllib  # only Codex's files are TOML: other commands need not load the parser

    read = HostRead(file, exists=True)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_LINE.search(str(exc))
        read.errors.append(
            ConfigError(
                f"is not valid TOML: {str(exc).split(' (at ', 1)[0]}",
                path=str(file.path),
                line=int(found.group(1)) if found else None,
            )
        )
        return read
    servers = data.get("mcp_servers")
    if servers is None:
        return read
    if not isinstance(servers, dict):
        read.errors.append(
            ConfigError(
                f"must be a table of servers, not {json_type(servers)}",
                path=str(file.path),
                line=_toml_key_line(text, "mcp_servers"),
                field="mcp_servers",
            )
        )
        return read
    for name, value in servers.items():
        line = _toml_table_line(text, name)

        def line_of(_path: JsonPath, line: int | None = line) -> int | None:
            return line

        if isinstance(value, dict):
            translated, key_paths = _translate_codex(value, ("mcp_servers", name))
        else:
            translated, key_paths = value, {}
        read.entries.append(
            RawEntry(
                name=name,
                value=translated,
                path=file.path,
                json_path=("mcp_servers", name),
                line_of=line_of,
                key_paths=key_paths,
            )
        )
    return read


def _translate_codex(entry: dict[str, object], path: JsonPath) -> Translation:
    result: dict[str, object] = {}
    key_paths: dict[str, JsonPath] = {}
    for key, value in entry.items():
        if key in _CODEX_KEYS:
            ours = _CODEX_KEYS[key]
            result[ours] = value
            key_paths[ours] = (*path, key)
        elif key in _CODEX_SECONDS:
            ours = _CODEX_SECONDS[key]
            is_number = isinstance(value, int | float) and not isinstance(value, bool)
            result[ours] = round(value * 1000) if is_number else value  # type: ignore[operator]
            key_paths[ours] = (*path, key)
        elif key != "env_http_headers":
            result[key] = value
    env_headers = entry.get("env_http_headers")
    if env_headers is not None:
        headers = entry.get("http_headers", {})
        if isinstance(env_headers, dict) and isinstance(headers, dict):
            # Codex names the variable that holds each header's value; ours interpolates it.
            result["headers"] = {
                **headers,
                **{header: f"${{{var}}}" for header, var in env_headers.items()},
            }
            key_paths["headers"] = (*path, "env_http_headers")
        elif not isinstance(env_headers, dict):
            result["headers"] = env_headers  # the validator reports the wrong type here
            key_paths["headers"] = (*path, "env_http_headers")
    if "bearerTokenEnv" in result and "auth" not in result:
        result["auth"] = "bearer"
    return result, key_paths


def _toml_table_line(text: str, name: str) -> int | None:
    quoted = re.escape(name)
    pattern = re.compile(
        rf"^\s*\[\s*mcp_servers\s*\.\s*(?:{quoted}|\"{quoted}\"|'{quoted}')\s*\]"
        rf"|^\s*(?:{quoted}|\"{quoted}\"|'{quoted}')\s*=\s*\{{",
        re.MULTILINE,
    )
    found = pattern.search(text)
    return text.count("\n", 0, found.start()) + 1 if found else None


def _toml_key_line(text: str, key: str) -> int | None:
    found = re.search(rf"^\s*\[?\s*{re.escape(key)}\b", text, re.MULTILINE)
    return text.count("\n", 0, found.start()) + 1 if found else None
