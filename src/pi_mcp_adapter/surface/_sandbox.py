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

The script's value is a move too, and the largest one a script controls: it stays in the
sandbox until a measuring function, defined there before the script runs (so the script cannot
replace it or the builtins it uses), has counted its size as JSON against what is left of the
byte budget and checked that it is plain data the host can show. Only then does it cross to
this process, so a script returning ``"x" * 10**8`` costs the host nothing.

Honest limits: a sleep is not cut short (the sandbox's own cap of ten seconds per sleep would
return early without saying so); sleeps count against the time budget, and one that would go
past it ends the script at once, naming it. The worker writes nothing on the host's stderr:
on POSIX it is started through a wrapper that sends its stderr to a private file of the run,
whose last lines explain a crash or a memory refusal in the run's error.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import importlib.util
import json
import math
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
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
    "ValueNotShown",
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
    worker_stderr: str = ""
    """The last lines the worker wrote on its stderr (kept off the host's stderr)."""

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
            except _BudgetExceeded:
                pass  # recorded in ``run.stopped``
            except ValueNotShown as exc:
                error_kind, error = "error", f"the script's value cannot be returned: {exc}"
            except TimeoutError:
                error_kind, budget = "budget", "time"
                error = f"the script went over its time budget of {limits.timeout_s:g} s"
            except monty.MontySyntaxError as exc:
                error_kind, error = "syntax", _syntax_error(exc, code)
            except monty.MontyCrashedError as exc:
                said = f": {run.worker_stderr}" if run.worker_stderr else ""
                error_kind, error = "crashed", f"the sandbox worker stopped ({exc}){said}"
            except monty.MontyRuntimeError as exc:
                error_kind, error, budget = _runtime_error(exc, limits, code, run.worker_stderr)
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
        value=redact_data(value) if error_kind is None else None,
        output=redact("".join(run.output)),
        error_kind=error_kind,
        error=_shortened(redact(error), MAX_ERROR_CHARS),
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
        # Charged before each sleep: one that would go past the time budget fails at once
        # (an uncatchable TimeoutError) instead of waiting to be stopped.
        "max_total_sleep_secs": limits.timeout_s,
    }
    # The sandbox cuts every sleep to ten seconds by default and returns as if it had slept:
    # a script polling with ``time.sleep(30)`` would go on believing it waited.
    os_policy = {"sleep": "system", "sleep_system_max": math.inf}
    # Names the script cannot know (it has no ``globals()`` or ``dir()`` to find them), so it
    # can neither replace the measuring function nor read or overwrite the captured value.
    measure = f"_pi_mcp_measure_{secrets.token_hex(8)}"
    captured = f"_pi_mcp_value_{secrets.token_hex(8)}"
    fed, value_name = capture_value(code, captured)
    with _quiet_worker(monty, run) as binary_path:
        return await _feed_session(
            monty,
            binary_path,
            code,
            fed,
            value_name,
            measure,
            sandbox_limits,
            os_policy,
            lookup,
            run,
        )


async def _feed_session(
    monty: Any,
    binary_path: str | None,
    code: str,
    fed: str,
    value_name: str | None,
    measure: str,
    sandbox_limits: dict[str, Any],
    os_policy: dict[str, Any],
    lookup: dict[str, HostFunction],
    run: _Run,
) -> Any:
    limits = run.limits
    async with (
        monty.AsyncMonty(
            binary_path=binary_path,
            min_processes=1,
            max_processes=1,
            request_timeout=limits.timeout_s + _POOL_GRACE_S,
        ) as pool,
        pool.checkout(
            script_name="script.py", limits=sandbox_limits, os_policy=os_policy
        ) as session,
    ):
        # Defined before the script runs: its defaults bind the real builtins, which the
        # script may shadow afterwards (``len = lambda x: 0``).
        await session.feed_run(_MEASURE_SOURCE.replace("_pi_mcp_measure", measure))
        await session.feed_run(fed, external_lookup=lookup, print_callback=run.printed)
        room = limits.max_bytes - run.bytes_moved
        try:
            size, problem = await session.feed_run(
                f"{measure}({value_name or 'result'}, {room}, {_MAX_PLAIN_DEPTH})"
            )
        except monty.MontyRuntimeError as exc:
            inner = exc.exception()
            if value_name is None and isinstance(inner, NameError):
                _no_value(code)
                return None
            if isinstance(inner, MemoryError | TimeoutError):
                raise  # the memory or time budget, named as such
            raise ValueNotShown(f"measuring it failed ({exc.display('type-msg')})") from None
        if problem:
            raise ValueNotShown(problem)
        if size > room:
            run.charge_bytes(size, "its value")  # ends the run, naming the byte budget
        value = plain(await session.feed_run(value_name or "result"), strict=True)
        # The sandbox's count is a lower bound (JSON escapes are not in it); this one is exact.
        run.charge_bytes(json_size(value), "its value")
        return value


_MEASURE_SOURCE = """
import datetime as _pi_mcp_datetime
import decimal as _pi_mcp_decimal
import dataclasses as _pi_mcp_dataclasses


def _pi_mcp_function():
    pass


def _pi_mcp_measure(
    value, room, max_depth,
    len=len, isinstance=isinstance, str=str, repr=repr, abs=abs, type=type, getattr=getattr,
    list=list, tuple=tuple, dict=dict, set=set, frozenset=frozenset, bytes=bytes, int=int,
    float=float, bool=bool, is_dataclass=_pi_mcp_dataclasses.is_dataclass,
    shown_by_repr=(
        _pi_mcp_datetime.date, _pi_mcp_datetime.datetime, _pi_mcp_datetime.time,
        _pi_mcp_datetime.timedelta, _pi_mcp_datetime.timezone, _pi_mcp_decimal.Decimal,
    ),
    function=type(_pi_mcp_function), complex=type(1j), largest=10**4300,
):
    size = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if item is None or item is ... or isinstance(item, bool):
            size += 5
        elif isinstance(item, str):
            if len(item) > room - size:
                return [room + 1, ""]
            size += len(item.encode("utf-8")) + 2
        elif isinstance(item, int):
            if abs(item) >= largest:
                return [size, "it holds an integer of more than 4300 digits; return str(n) "
                        "for a shorter one, or a float"]
            size += len(str(item))
        elif isinstance(item, float):
            size += 24
        elif isinstance(item, bytes):
            size += 3 * len(item) + 2
        elif isinstance(item, (list, tuple, set, frozenset, dict)) or is_dataclass(item):
            if depth >= max_depth:
                return [size, "it nests deeper than " + str(max_depth) + " levels (does a "
                        "list or dict contain itself?)"]
            size += 2
            if isinstance(item, dict):
                for key in item:
                    stack.append((key, depth + 1))
                    stack.append((item[key], depth + 1))
                    size += 2
            elif is_dataclass(item):
                for key in item.__dataclass_fields__:
                    stack.append((key, depth + 1))
                    stack.append((getattr(item, key), depth + 1))
                    size += 2
            else:
                for element in item:
                    stack.append((element, depth + 1))
                    size += 1
        elif isinstance(item, shown_by_repr) or isinstance(item, (function, complex)):
            size += len(repr(item)) + 2
        else:
            return [size, "it holds a " + type(item).__name__ + " object; return plain data "
                    "(dict, list, str, int, float, bool, None) or a dataclass"]
        if size > room:
            return [size, ""]
    return [size, ""]
"""
"""Counts, inside the sandbox, the JSON bytes of a script's value (a lower bound, stopping as
soon as it passes ``room``) and says what the host could not show. Walks with its own stack,
so neither deep nesting nor the script's recursion budget stops it."""


_WORKER_STDERR_TAIL_BYTES = 2048
"""How much of the worker's stderr a failure quotes: its last lines say why it stopped."""


@contextlib.contextmanager
def _quiet_worker(monty: Any, run: _Run) -> Iterator[str | None]:
    """A ``binary_path`` for the worker pool that starts the real worker with its stderr in a
    private file of this run (None, the default binary, where there is no ``/bin/sh``).

    The worker inherits the host's stderr otherwise, and writes there when the system refuses
    it memory (``monty worker: allocation of ... bytes failed``): a gateway's or a terminal's
    stderr is not the place for it, and the run's error is. The file's tail is kept in
    ``run.worker_stderr`` when the block ends; the directory is removed."""
    shell = "/bin/sh"
    if os.name != "posix" or not os.path.exists(shell):
        yield None
        return
    try:
        from pydantic_monty._binary import find_monty_binary

        binary = find_monty_binary()
    except (ImportError, OSError):
        binary = ""
    if not os.access(binary, os.X_OK):
        yield None  # the pool's own start reports the missing binary, as before
        return
    directory = tempfile.mkdtemp(prefix="pi-mcp-sandbox-")
    try:
        stderr_path = os.path.join(directory, "stderr")
        wrapper = os.path.join(directory, "monty")
        with open(wrapper, "w", encoding="utf-8") as file:
            file.write(f'#!{shell}\nexec {_sh_quote(binary)} "$@" 2>>{_sh_quote(stderr_path)}\n')
        os.chmod(wrapper, 0o700)
        try:
            yield wrapper
        finally:
            run.worker_stderr = _file_tail(stderr_path, _WORKER_STDERR_TAIL_BYTES)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _file_tail(path: str, limit_bytes: int) -> str:
    try:
        with open(path, "rb") as file:
            file.seek(0, os.SEEK_END)
            size = file.tell()
            file.seek(max(0, size - limit_bytes))
            tail = file.read()
    except OSError:
        return ""
    return " ".join(tail.decode("utf-8", "replace").split())


def capture_value(code: str, name: str) -> tuple[str, str | None]:
    """``code`` with its last statement, when it is an expression, assigned to ``name``
    instead (so its value stays in the sandbox), and that name; else ``code`` and None.

    The host's parser (Python 3.11) only locates the statement; the text is kept as it was,
    on the same lines, so the sandbox's messages name the script's own lines. Code the host
    cannot parse (newer syntax) ends with ``pass``: its value cannot cross unmeasured, and
    only a variable ``result`` is taken."""
    try:
        tree = ast.parse(code)  # top-level ``await`` parses; only compiling refuses it
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return code + "\npass\n", None
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return code, None
    last = tree.body[-1]
    if last.end_lineno is None or last.end_col_offset is None:
        return code, None
    lines = code.splitlines(keepends=True)

    def offset(line: int, utf8_column: int) -> int:
        # ``ast`` columns count UTF-8 bytes.
        before = sum(len(text) for text in lines[: line - 1])
        return before + len(lines[line - 1].encode("utf-8")[:utf8_column].decode("utf-8"))

    start = offset(last.lineno, last.col_offset)
    end = offset(last.end_lineno, last.end_col_offset)
    return f"{code[:start]}{name} = ({code[start:end]}){code[end:]}", name


def _no_value(code: str) -> None:
    """No trailing expression and no variable ``result``: the script returns None, unless
    the host could not read it (then its last expression could not be taken)."""
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        why = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
        raise ValueNotShown(
            f"its syntax is newer than this host's Python reads ({why}), so its last "
            "expression is not taken; assign the value to a variable named result"
        ) from None


_REFUSED_ALLOCATION = re.compile(r"allocation of (\d+) bytes failed")
_SLEEP_LIMIT = re.compile(r"sleep limit exceeded: ([0-9.]+)s")


def _runtime_error(
    exc: Any, limits: ScriptLimits, code: str, worker_stderr: str = ""
) -> tuple[ScriptErrorKind, str, str | None]:
    """The exception that ended the script, with where it was raised."""
    inner = exc.exception()
    message = exc.display("type-msg")
    if isinstance(inner, MemoryError) and "memory limit" in str(inner):
        refused = _REFUSED_ALLOCATION.search(worker_stderr)
        if refused:
            # The system said no before the budget did (a memory rlimit, a full machine):
            # naming the budget would send the model looking for the wrong fix.
            return (
                "budget",
                f"the system refused the script {_size(int(refused.group(1)))} of memory, "
                f"within its memory budget of {_size(limits.max_memory_bytes)}",
                "memory",
            )
        return (
            "budget",
            f"the script went over its memory budget of {_size(limits.max_memory_bytes)}",
            "memory",
        )
    if isinstance(inner, TimeoutError):
        asked = _SLEEP_LIMIT.search(str(inner))
        if asked:
            return (
                "budget",
                f"the script went over its time budget of {limits.timeout_s:g} s: its sleeps "
                f"would add up to {float(asked.group(1)):g} s",
                "time",
            )
        if "time limit" in str(inner):
            return (
                "budget",
                f"the script went over its time budget of {limits.timeout_s:g} s",
                "time",
            )
    where = ""
    frames = exc.traceback()
    if frames:
        last = frames[-1]
        # The script's own line: its last one may have been rewritten to keep its value.
        lines = code.splitlines()
        source = (
            lines[last.line - 1] if 0 < last.line <= len(lines) else last.source_line or ""
        ).strip()
        where = f" (line {last.line}{': ' + source if source else ''})"
    return "error", message + where, None


_SYNTAX_LINE = re.compile(r'File "[^"]*", line (\d+)')


def _syntax_error(exc: Any, code: str) -> str:
    """``SyntaxError: <what> (line N: <the line>)``, from the script's own text.

    The sandbox's message names no line; its traceback does. A line past the script's end is
    the ``pass`` that :func:`capture_value` adds to code the host cannot parse: then the host's
    own parser says where the script went wrong."""
    message = str(exc.display("type-msg"))
    found = _SYNTAX_LINE.search(exc.display("traceback"))
    lines = code.splitlines()
    if found and 0 < int(found.group(1)) <= len(lines):
        line = int(found.group(1))
        source = lines[line - 1].strip()
        return f"{message} (line {line}{': ' + source if source else ''})"
    try:
        ast.parse(code)
    except SyntaxError as host:
        line = host.lineno or 0
        source = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        return f"SyntaxError: {host.msg} (line {line}{': ' + source if source else ''})"
    except (ValueError, RecursionError, MemoryError):
        pass
    return message


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
"""How deep a value may nest (a list inside a list...): beyond it, the value is refused."""
MAX_ERROR_CHARS = 4000
"""How much of a failure's message is kept: an exception message can be as long as the
script makes it, and the model needs its start."""
_LARGEST_SHOWN_INT = 10**4300
"""Python converts integers to text only up to 4300 digits (``sys.get_int_max_str_digits``):
beyond, the conversion costs quadratic time, so neither the sandbox nor this process does it."""


class ValueNotShown(ValueError):
    """A value from the sandbox that cannot be shown as JSON; the message says why and what
    to return instead."""


def plain(value: Any, depth: int = 0, *, strict: bool = False) -> Any:
    """``value`` from the sandbox as JSON-like data: tuples and sets become lists, bytes text
    (base64 when they are not UTF-8), NaN and infinities their names, dataclass instances
    dicts of their fields, dates and decimals their ``str``.

    Raises :class:`ValueNotShown` for an integer too long to show; with ``strict``, also for
    nesting deeper than 100 levels (else its ``str``).
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if abs(value) >= _LARGEST_SHOWN_INT:
            raise ValueNotShown(
                "it holds an integer of more than 4300 digits; return str(n) for a shorter "
                "one, or a float"
            )
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth >= _MAX_PLAIN_DEPTH:
        if strict:
            raise ValueNotShown(f"it nests deeper than {_MAX_PLAIN_DEPTH} levels")
        return str(value)
    if isinstance(value, Mapping):
        return {_key(k): plain(v, depth + 1, strict=strict) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v, depth + 1, strict=strict) for v in value]
    if isinstance(value, set | frozenset):
        items = [plain(v, depth + 1, strict=strict) for v in value]
        return sorted(items, key=str)
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(value).decode("ascii")
    attributes = getattr(value, "attributes", None)  # a dataclass instance from the sandbox
    if isinstance(attributes, Mapping) and type(value).__name__ == "MontyClassProxy":
        return plain(attributes, depth, strict=strict)
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    shown = plain(key)
    return shown if isinstance(shown, str) else json.dumps(shown, ensure_ascii=False)


def _shortened(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def _size(n_bytes: int) -> str:
    if n_bytes >= _MIB:
        return f"{n_bytes / _MIB:g} MiB"
    if n_bytes >= 1024:
        return f"{n_bytes / 1024:g} KiB"
    return f"{n_bytes} B"
