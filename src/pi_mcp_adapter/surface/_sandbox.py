"""Running a model's script in the ``pydantic-monty`` sandbox, within budgets.

The sandbox is a Rust interpreter of a Python subset, run in a worker process: the script has
no filesystem, network, environment or subprocesses (``open``, ``os.listdir`` and
``os.environ`` are refused; ``subprocess`` and ``socket`` do not exist), and the interpreter
bounds its memory, recursion and running time. What the script can reach is only the host
functions it is given (``call``, ``search``, ``describe``); this module knows nothing of MCP.

Resource handling: every run owns its own worker pool of one process, opened and closed in the
task that runs the script. Closing the pool kills the worker, whatever state the script left it
in, so a run that ends (finished, failed, over budget or cancelled) leaves no worker behind and
no worker busy. A fresh worker costs a few milliseconds (``bench/bench_script.py``).

Host functions run in a task group of the run (the sandbox awaits them in tasks of its own,
which it does not cancel when the script is stopped): cancelling the run, or a budget ending
it, cancels the calls in flight.

Budgets end the script rather than raise inside it, so a ``try``/``except`` in the script
cannot swallow them: total bytes moved between host functions and the script, number of host
function calls, wall time, and bytes printed. The message names the budget.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import math
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.from_thread
import anyio.lowlevel

from pi_mcp_adapter._secrets import redact, redact_data

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

__all__ = [
    "SANDBOX_MISSING",
    "Charge",
    "HostFunction",
    "ScriptLimits",
    "ScriptRun",
    "json_size",
    "run_sandboxed",
    "sandbox_available",
]

SANDBOX_MISSING = (
    "Scripts need the sandbox, which is not installed: pip install 'pi-mcp-adapter[script]'"
)

ScriptErrorKind = Literal["unavailable", "syntax", "error", "budget", "crashed"]

HostFunction = Callable[..., Awaitable[Any]]
"""A host function a script may ``await``: called with the script's arguments; its return
value (plain JSON-like data) is what the script gets. An exception it raises is raised in the
script, as ``Exception`` with the same message (the sandbox maps unknown types so)."""

_MIB = 1024 * 1024
_POOL_GRACE_S = 5.0
"""The pool kills a worker whose turn outlives the script's wall time by this much: a backstop
for the run's own deadline, which cancels first."""
_ONE_SANDBOX_CALL = 4
"""Sandbox suspensions one host call costs (the name lookup, the call, its future), so the
sandbox's own suspension cap never ends a script before the call budget does."""


@dataclass(frozen=True, slots=True)
class ScriptLimits:
    """What one script may use. Every limit is positive."""

    max_bytes: int = 16 * _MIB
    """Bytes moved between host functions and the script: arguments sent, results returned
    (as JSON), summed over the run."""
    max_calls: int = 100
    """Host function calls (``call``, ``search``, ``describe``) per run."""
    timeout_s: float = 60.0
    """Wall time of the whole run, host calls included."""
    max_output_bytes: int = _MIB
    """Bytes the script may ``print``; more than a model could read anyway."""
    max_memory_bytes: int = 256 * _MIB
    """The sandbox's heap."""
    max_recursion_depth: int = 200

    def __post_init__(self) -> None:
        for name in (
            "max_bytes",
            "max_calls",
            "timeout_s",
            "max_output_bytes",
            "max_memory_bytes",
            "max_recursion_depth",
        ):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"ScriptLimits.{name} must be a positive number, got {value!r}")


@dataclass(frozen=True, slots=True)
class ScriptRun:
    """How a script ended. ``error_kind`` is None when it finished; then ``value`` is the value
    of its last expression (or of a variable named ``result``), made plain JSON-like data."""

    value: Any = None
    output: str = ""
    """What the script printed (up to ``max_output_bytes``)."""
    error_kind: ScriptErrorKind | None = None
    error: str = ""
    """What went wrong, for the model: the exception and the line, or the budget."""
    budget: str | None = None
    """The budget that ended the script (``bytes``, ``calls``, ``time``, ``output``,
    ``memory``), when one did."""
    calls: int = 0
    bytes_moved: int = 0
    duration_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error_kind is None


def sandbox_available() -> bool:
    """Whether the ``script`` extra (``pydantic-monty``) is installed."""
    return importlib.util.find_spec("pydantic_monty") is not None


class _BudgetExceeded(Exception):
    """A budget ended the run (raised in the host function that went over, and recorded)."""

    def __init__(self, budget: str, message: str) -> None:
        super().__init__(message)
        self.budget = budget
        self.message = message


@dataclass
class _Run:
    """The state of one run: counters, output, and the way to stop it from anywhere."""

    limits: ScriptLimits
    scope: anyio.CancelScope
    calls_group: TaskGroup
    on_print: Callable[[str], None] | None
    loop_thread: int = field(default_factory=threading.get_ident)
    token: anyio.lowlevel.EventLoopToken = field(default_factory=anyio.lowlevel.current_token)
    calls: int = 0
    bytes_moved: int = 0
    output: list[str] = field(default_factory=list)
    output_bytes: int = 0
    stopped: _BudgetExceeded | None = None

    def stop(self, exceeded: _BudgetExceeded) -> None:
        """End the run (on the event loop's thread)."""
        if self.stopped is None:
            self.stopped = exceeded
        self.scope.cancel()

    def charge_call(self, what: str) -> None:
        if self.calls >= self.limits.max_calls:
            self._exceed(
                "calls",
                f"the script went over its call budget of {self.limits.max_calls} calls "
                f"with {what}",
            )
        self.calls += 1

    def charge_bytes(self, size: int, what: str) -> None:
        self.bytes_moved += size
        if self.bytes_moved > self.limits.max_bytes:
            self._exceed(
                "bytes",
                f"the script went over its byte budget of {_size(self.limits.max_bytes)} "
                f"moved between tools and script with {what}",
            )

    def _exceed(self, budget: str, message: str) -> None:
        exceeded = _BudgetExceeded(budget, message)
        self.stop(exceeded)
        raise exceeded

    def printed(self, stream: str, text: str) -> None:
        """The sandbox's print callback (called on a thread of the sandbox client)."""
        if self.stopped is not None:
            return
        size = len(text.encode("utf-8", "replace"))
        room = self.limits.max_output_bytes - self.output_bytes
        if size > room:
            head = text.encode("utf-8", "replace")[: max(room, 0)]
            self.output.append(head.decode("utf-8", "ignore"))
            self.output_bytes = self.limits.max_output_bytes
            exceeded = _BudgetExceeded(
                "output",
                f"the script went over its output budget of "
                f"{_size(self.limits.max_output_bytes)} printed",
            )
            self._on_loop(self.stop, exceeded)
            return
        self.output.append(text)
        self.output_bytes += size
        if self.on_print is not None:
            self._on_loop(self.on_print, text)

    def _on_loop(self, function: Callable[[Any], None], argument: Any) -> None:
        if threading.get_ident() == self.loop_thread:
            function(argument)
            return
        # A late flush may come after the run (and its loop) ended: nothing is left to tell.
        with contextlib.suppress(RuntimeError):
            anyio.from_thread.run_sync(function, argument, token=self.token)

    def host_function(self, name: str, function: HostFunction) -> HostFunction:
        """``function`` as the sandbox calls it: counted, and run in the run's task group."""

        async def in_run(*args: Any, **kwargs: Any) -> Any:
            self.charge_call(f"{name}()")
            finished = anyio.Event()
            box: dict[str, Any] = {}

            async def run_it() -> None:
                try:
                    box["value"] = await function(*args, **kwargs)
                except Exception as exc:  # raised in the script, where it can be caught
                    box["error"] = exc
                finally:
                    finished.set()

            self.calls_group.start_soon(run_it)
            await finished.wait()
            if "error" in box:
                raise box["error"]
            if "value" not in box:  # cancelled: the script is ending
                raise RuntimeError(f"{name}() was cancelled: the script is ending")
            return box["value"]

        return in_run


async def run_sandboxed(
    code: str,
    functions: Mapping[str, Callable[[Charge], HostFunction]],
    *,
    limits: ScriptLimits | None = None,
    on_print: Callable[[str], None] | None = None,
) -> ScriptRun:
    """Run ``code`` in a fresh sandbox worker with ``functions`` as its host functions.

    Each entry of ``functions`` is a factory: given the run's :class:`Charge` (to count the
    bytes it moves), it returns the coroutine function the script awaits. ``on_print``
    receives printed text as it comes (on the event loop's thread).

    Never raises for the script's failures (they come back as a :class:`ScriptRun` with an
    ``error_kind``); cancelling the caller cancels the script and its calls in flight.
    """
    limits = limits or ScriptLimits()
    started = time.perf_counter()
    try:
        import pydantic_monty as monty
    except ImportError:
        return ScriptRun(error_kind="unavailable", error=SANDBOX_MISSING)

    value: Any = None
    error_kind: ScriptErrorKind | None = None
    error = ""
    budget: str | None = None
    async with anyio.create_task_group() as calls_group:
        with anyio.CancelScope() as scope:
            run = _Run(limits, scope, calls_group, on_print)
            charge = Charge(run)
            lookup = {
                name: run.host_function(name, make(charge)) for name, make in functions.items()
            }
            try:
                with anyio.fail_after(limits.timeout_s):
                    value = await _feed(monty, code, lookup, run)
            except TimeoutError:
                error_kind, budget = "budget", "time"
                error = f"the script went over its time budget of {limits.timeout_s:g} s"
            except monty.MontySyntaxError as exc:
                error_kind, error = "syntax", f"SyntaxError: {exc.display('type-msg')}"
            except monty.MontyCrashedError as exc:
                error_kind, error = "crashed", f"the sandbox worker stopped ({exc})"
            except monty.MontyRuntimeError as exc:
                error_kind, error, budget = _runtime_error(exc, limits)
            except monty.MontyError as exc:
                error_kind, error = "error", str(exc)
            except (OSError, RuntimeError) as exc:  # the worker binary is missing or broken
                error_kind = "unavailable"
                error = f"the sandbox could not start ({exc}); reinstall pi-mcp-adapter[script]"
        calls_group.cancel_scope.cancel()
    if run.stopped is not None:
        error_kind, budget, error = "budget", run.stopped.budget, run.stopped.message
    elif scope.cancelled_caught and error_kind is None:
        error_kind, error = "error", "the script was stopped"
    return ScriptRun(
        value=redact_data(plain(value)) if error_kind is None else None,
        output=redact("".join(run.output)),
        error_kind=error_kind,
        error=redact(error),
        budget=budget,
        calls=run.calls,
        bytes_moved=run.bytes_moved,
        duration_ms=(time.perf_counter() - started) * 1000,
    )


async def _feed(monty: Any, code: str, lookup: dict[str, HostFunction], run: _Run) -> Any:
    limits = run.limits
    sandbox_limits = {
        "max_feed_duration_secs": limits.timeout_s,
        "max_memory": limits.max_memory_bytes,
        "max_recursion_depth": limits.max_recursion_depth,
        "max_suspensions": limits.max_calls * _ONE_SANDBOX_CALL + 100,
    }
    async with (
        monty.AsyncMonty(
            min_processes=1, max_processes=1, request_timeout=limits.timeout_s + _POOL_GRACE_S
        ) as pool,
        pool.checkout(script_name="script.py", limits=sandbox_limits) as session,
    ):
        value = await session.feed_run(code, external_lookup=lookup, print_callback=run.printed)
        if value is None and not _ends_with_expression(code):
            # A script may end with ``result = ...`` instead of an expression.
            try:
                value = await session.feed_run("result")
            except monty.MontyRuntimeError:
                value = None
        return value


def _ends_with_expression(code: str) -> bool:
    """Whether the script's last statement is an expression (its value is the result, even
    None). Parsed by the host's parser only to find the statement; nothing is run here."""
    try:
        tree = ast.parse(code)  # top-level ``await`` parses; only compiling refuses it
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return bool(tree.body) and isinstance(tree.body[-1], ast.Expr)


def _runtime_error(exc: Any, limits: ScriptLimits) -> tuple[ScriptErrorKind, str, str | None]:
    """The exception that ended the script, with where it was raised."""
    inner = exc.exception()
    message = exc.display("type-msg")
    if isinstance(inner, MemoryError) and "memory limit" in str(inner):
        return (
            "budget",
            f"the script went over its memory budget of {_size(limits.max_memory_bytes)}",
            "memory",
        )
    if isinstance(inner, TimeoutError) and "time limit" in str(inner):
        return (
            "budget",
            f"the script went over its time budget of {limits.timeout_s:g} s",
            "time",
        )
    where = ""
    frames = exc.traceback()
    if frames:
        last = frames[-1]
        source = (last.source_line or "").strip()
        where = f" (line {last.line}{': ' + source if source else ''})"
    return "error", message + where, None


class Charge:
    """What a host function factory gets: the way to count the bytes its call moves."""

    def __init__(self, run: _Run) -> None:
        self._run = run

    def bytes(self, size: int, what: str) -> None:
        """Count ``size`` bytes moved by ``what``; ends the script past its byte budget."""
        self._run.charge_bytes(size, what)


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON (what moving it costs against the byte budget)."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (ValueError, RecursionError):
        text = str(value)
    return len(text.encode("utf-8", "replace"))


_MAX_PLAIN_DEPTH = 100


def plain(value: Any, depth: int = 0) -> Any:
    """``value`` from the sandbox as JSON-like data: tuples and sets become lists, bytes text,
    anything else its ``str``."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth >= _MAX_PLAIN_DEPTH:
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v, depth + 1) for v in value]
    if isinstance(value, set | frozenset):
        items = [plain(v, depth + 1) for v in value]
        return sorted(items, key=str)
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _size(n_bytes: int) -> str:
    if n_bytes >= _MIB:
        return f"{n_bytes / _MIB:g} MiB"
    if n_bytes >= 1024:
        return f"{n_bytes / 1024:g} KiB"
    return f"{n_bytes} B"
