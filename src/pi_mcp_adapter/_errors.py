"""Exceptions raised by pi-mcp-adapter.

Every exception derives from :class:`McpAdapterError` and is branched by what the caller can do
about it::

    McpAdapterError
    ├── ConfigError              a config file or entry is wrong: fix the file
    ├── ServerUnavailableError   a server could not be reached or used: check it, retry later
    │   ├── ServerNotConfiguredError   no enabled server of that name
    │   ├── ServerDisabledError        the server is disabled in config
    │   ├── ServerUntrustedError       it comes from a project file not trusted yet:
    │   │                              `pi-mcp trust --project DIR`
    │   ├── ServerStartError           the process/URL failed at connect (with stderr tail)
    │   ├── ConnectTimeoutError        the handshake did not finish within its deadline
    │   ├── NeedsAuthError             HTTP 401 or an OAuth sign-in needed: `pi-mcp auth SERVER`
    │   ├── HttpStatusError            HTTP 403/404/5xx at connect (status kept)
    │   ├── NotMcpError                the endpoint answered, but not with MCP
    │   ├── ConnectionLostError        the server went away mid-session
    │   └── ServerBackoffError         a recent connect failed; retry after the backoff
    ├── ServerReportedError      the server answered a request with an MCP error
    │   └── RequestTimeoutError      a request exceeded its `requestTimeoutMs`
    ├── ToolLookupError          a tool name did not resolve
    │   ├── ToolNotFoundError        no such tool (with "did you mean" suggestions)
    │   └── AmbiguousToolError       several tools match (with the candidates)
    └── UsageError               the API was used wrongly (bad arguments, closed object)

Messages are written for the person reading them: they name the server, the tool and the next
step. They never contain secrets: every message (and ``str()`` of the error) has the registered
secret values replaced by their references (:mod:`pi_mcp_adapter._secrets`), whatever text an
SDK, httpx, the OS or a server's stderr put into it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._secrets import redact

__all__ = [
    "AmbiguousToolError",
    "ConfigError",
    "ConnectTimeoutError",
    "ConnectionLostError",
    "HttpStatusError",
    "McpAdapterError",
    "NeedsAuthError",
    "NotMcpError",
    "RequestTimeoutError",
    "ServerBackoffError",
    "ServerDisabledError",
    "ServerNotConfiguredError",
    "ServerReportedError",
    "ServerStartError",
    "ServerUnavailableError",
    "ServerUntrustedError",
    "ToolLookupError",
    "ToolNotFoundError",
    "UsageError",
]


class McpAdapterError(Exception):
    """Base class of every error this package raises on purpose."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact(arg) if isinstance(arg, str) else arg for arg in args))

    def __str__(self) -> str:
        # Also covers a value registered after the error was made (a tail read later).
        return redact(super().__str__())


class ConfigError(McpAdapterError):
    """A configuration file or entry is invalid.

    ``path``, ``line`` and ``field`` locate the problem when they are known.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.field = field
        where = ""
        if path is not None:
            where = path if line is None else f"{path}:{line}"
        parts = [p for p in (where, f"field {field!r}" if field else "") if p]
        super().__init__(f"{': '.join(parts)}: {message}" if parts else message)
        self.message = redact(message)


class ServerUnavailableError(McpAdapterError):
    """A server could not be connected to or used. ``server`` names it."""

    def __init__(self, server: str, message: str) -> None:
        self.server = server
        self.message = redact(message)
        super().__init__(message)


class ServerNotConfiguredError(ServerUnavailableError):
    pass


class ServerDisabledError(ServerUnavailableError):
    pass


class ServerUntrustedError(ServerUnavailableError):
    """The server comes from a project-level file whose current content is not trusted, so
    nothing of it runs. ``files`` are those files; ``trust_command`` trusts them."""

    def __init__(
        self, server: str, message: str, *, files: Sequence[str], trust_command: str
    ) -> None:
        self.files = tuple(files)
        self.trust_command = trust_command
        super().__init__(server, message)


class ServerStartError(ServerUnavailableError):
    """The server failed while starting. ``stderr_tail`` holds its last stderr lines."""

    def __init__(self, server: str, message: str, *, stderr_tail: str = "") -> None:
        self.stderr_tail = redact(stderr_tail)
        full = f"{message}\n--- last stderr lines ---\n{stderr_tail}" if stderr_tail else message
        super().__init__(server, full)


class ConnectTimeoutError(ServerUnavailableError):
    """The handshake did not finish in time.

    ``still_starting`` is true when the caller stopped waiting before the server's own
    ``startupTimeoutMs`` ran out (a one-shot command's shorter wait): the server did not fail,
    so nothing is remembered against it and the next attempt starts it afresh.
    """

    def __init__(
        self, server: str, message: str, *, timeout_s: float, still_starting: bool = False
    ) -> None:
        self.timeout_s = timeout_s
        self.still_starting = still_starting
        super().__init__(server, message)


class NeedsAuthError(ServerUnavailableError):
    pass


class HttpStatusError(ServerUnavailableError):
    def __init__(self, server: str, message: str, *, status: int) -> None:
        self.status = status
        super().__init__(server, message)


class NotMcpError(ServerUnavailableError):
    pass


class ConnectionLostError(ServerUnavailableError):
    pass


class ServerBackoffError(ServerUnavailableError):
    def __init__(self, server: str, message: str, *, retry_in_s: float) -> None:
        self.retry_in_s = retry_in_s
        super().__init__(server, message)


class ServerReportedError(McpAdapterError):
    """The server answered with a JSON-RPC error. ``code`` and ``data`` are the server's."""

    def __init__(self, server: str, message: str, *, code: int = 0, data: object = None) -> None:
        self.server = server
        self.code = code
        self.data = data
        self.message = redact(message)
        super().__init__(message)


class RequestTimeoutError(ServerReportedError):
    pass


class ToolLookupError(McpAdapterError):
    def __init__(self, name: str, message: str) -> None:
        self.name = name
        self.message = redact(message)
        super().__init__(message)


class ToolNotFoundError(ToolLookupError):
    def __init__(self, name: str, message: str, *, suggestions: Sequence[str] = ()) -> None:
        self.suggestions = tuple(suggestions)
        super().__init__(name, message)


class AmbiguousToolError(ToolLookupError):
    def __init__(self, name: str, message: str, *, candidates: Sequence[str]) -> None:
        self.candidates = tuple(candidates)
        super().__init__(name, message)


class UsageError(McpAdapterError):
    """The API was used in a way it does not support."""
