"""Tool calls that a server runs as durable tasks (the ``io.modelcontextprotocol/tasks``
extension, SEP-2663, on 2026-07-28 connections).

A server that advertises the extension may answer ``tools/call`` with a task handle
(``resultType: "task"``) instead of the result. The call then lives on the server: the client
polls ``tasks/get`` (no faster than the handle's ``pollInterval``) until the task is
``completed`` (its ``result`` is the tool's result), ``failed`` (its ``error`` is the JSON-RPC
error the call would have had) or ``cancelled``. A task in ``input_required`` carries
``inputRequests`` (elicitation, sampling or roots requests, the shapes the 2026-07-28 era
embeds instead of sending its own requests); the answers go back with ``tasks/update``. A
client that stops waiting sends ``tasks/cancel`` so the server stops the work.

The SDK knows the extension only as far as its extension interface goes: a
:class:`~mcp.client.extension.ResultClaim` makes it advertise the extension on 2026-07-28
connections and parse the handle; following the task is ours, because the answers to
``inputRequests`` must reach the person behind the call that started it (the relay of that
call) and cancelling must reach the server.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from pydantic import Discriminator, Tag, TypeAdapter

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

DEFAULT_POLL_INTERVAL_S = 0.5
"""Between two ``tasks/get`` when the server names no ``pollInterval``."""

MIN_POLL_INTERVAL_S = 0.01
MAX_POLL_INTERVAL_S = 10.0
"""A server's ``pollInterval`` is respected within these bounds: a zero would spin, and an
hour would leave a finished result waiting that long."""

TASK_HANDLE_GRACE_S = 1.0
"""How long a ``tools/call`` the caller gave up on still listens for its answer where the server
may have turned it into a task: a handle already on its way names the task to cancel, and
without it the task would run on, unseen, until its ttl."""

CANCEL_TIMEOUT_S = 5.0
"""Upper bound for telling the server to cancel a task the caller gave up on; the caller is
already leaving and must not wait on an unresponsive server."""


class TaskHandle(types.Result):
    """The ``tools/call`` answer that says the call became a task."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str = "working"
    status_message: str | None = None
    poll_interval: float | None = None
    """Milliseconds the server asks the client to wait between polls."""


class TaskSnapshot(types.Result):
    """A ``tasks/get`` answer: where the task stands, with its outcome once it has one."""

    task_id: str
    status: str
    status_message: str | None = None
    poll_interval: float | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: types.InputRequests | None = None


class _TaskIdParams(types.RequestParams):
    task_id: str


class _TaskUpdateParams(types.RequestParams):
    task_id: str
    input_responses: types.InputResponses | None = None


class GetTaskRequest(types.Request[_TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class UpdateTaskRequest(types.Request[_TaskUpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class CancelTaskRequest(types.Request[_TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


def _result_type(value: Any) -> str:
    tag = (
        value.get("resultType") if isinstance(value, dict) else getattr(value, "result_type", None)
    )
    return "task" if tag == "task" else "core"


CallToolOutcome = types.CallToolResult | types.InputRequiredResult | TaskHandle
CALL_TOOL_OUTCOME: TypeAdapter[CallToolOutcome] = TypeAdapter(
    Annotated[
        Annotated[types.CallToolResult | types.InputRequiredResult, Tag("core")]
        | Annotated[TaskHandle, Tag("task")],
        Discriminator(_result_type),
    ]
)
"""What ``tools/call`` may answer on a 2026-07-28 connection: the result, a result that
embeds questions, or (where the extension was declared) a task handle."""


async def _resolve_unattended(handle: TaskHandle, context: ClaimContext) -> types.CallToolResult:
    """The claim's resolver, for ``Client.call_tool``: follow the task with nobody to ask."""

    async def refuse(requests: types.InputRequests) -> types.InputResponses:
        raise MCPError(
            code=types.INVALID_REQUEST, message="the task needs input and nobody can give it"
        )

    return await follow_task(context.session, handle, answer=refuse)


class TasksExtension(ClientExtension):
    """Advertises the tasks extension and lets the SDK parse task handles."""

    identifier = TASKS_EXTENSION

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=_resolve_unattended)]


@dataclass(slots=True, eq=False)
class RunningTask:
    """A task a call of ours is following, for status displays."""

    server: str
    tool: str
    task_id: str
    status: str
    started_at: float
    """In the seconds of the clock of the connection that follows it."""


_Outcome = TypeVar("_Outcome")

InputAnswerer = Callable[[types.InputRequests], Awaitable[types.InputResponses]]


async def follow_task(
    session: ClientSession,
    handle: TaskHandle,
    *,
    answer: InputAnswerer,
    record: RunningTask | None = None,
    on_question: Callable[[float], None] | None = None,
) -> types.CallToolResult:
    """Poll the task ``handle`` names until it ends and return the tool's result.

    ``answer`` turns a task's ``inputRequests`` into responses (it may take as long as a person
    takes); ``on_question`` is told how many seconds each answer took, so that a deadline can
    leave them out. ``record.status`` follows the task. Leaving early (cancellation, a
    deadline, an error while answering) tells the server to cancel the task.

    Raises:
        MCPError: the task failed (its own error) or the server cancelled it.
    """
    task_id = handle.task_id
    status = handle.status
    interval = _poll_interval_s(handle.poll_interval)
    ended = False
    answered: set[str] = set()
    try:
        while True:
            if status == "working":
                await anyio.sleep(interval)
            snapshot = await session.send_request(
                GetTaskRequest(params=_TaskIdParams(task_id=task_id)), TaskSnapshot
            )
            status = snapshot.status
            if record is not None:
                record.status = status
            if snapshot.poll_interval is not None:
                interval = _poll_interval_s(snapshot.poll_interval)
            if status == "completed":
                ended = True
                return types.CallToolResult.model_validate(snapshot.result or {"content": []})
            if status == "failed":
                ended = True
                error = snapshot.error or {}
                raise MCPError(
                    code=int(error.get("code", types.INTERNAL_ERROR)),
                    message=f"task {task_id} failed: {error.get('message', 'no reason given')}",
                    data=error.get("data"),
                )
            if status == "cancelled":
                ended = True
                raise MCPError(
                    code=types.INTERNAL_ERROR,
                    message=f"the server cancelled task {task_id}"
                    + (f": {snapshot.status_message}" if snapshot.status_message else ""),
                )
            # Keys name questions for the task's lifetime (as the official tasks client reads
            # them): one the server still lists until it processes the answer is not asked
            # again.
            questions = {
                key: request
                for key, request in (snapshot.input_requests or {}).items()
                if key not in answered
            }
            if status == "input_required" and questions:
                asked_at = anyio.current_time()
                responses = await answer(questions)
                if on_question is not None:
                    on_question(anyio.current_time() - asked_at)
                await session.send_request(
                    UpdateTaskRequest(
                        params=_TaskUpdateParams(task_id=task_id, input_responses=responses)
                    ),
                    types.EmptyResult,
                )
                answered.update(responses)
                # The answer may finish the task at once: look again without waiting.
                status = "answered"
            elif status in ("working", "input_required"):
                status = "working"
            else:
                raise MCPError(
                    code=types.INTERNAL_ERROR,
                    message=f"task {task_id} reported an unknown status {status!r}",
                )
    finally:
        if not ended:
            await _cancel_quietly(session, task_id)


async def _cancel_quietly(session: ClientSession, task_id: str) -> None:
    # The caller is already leaving with its own error; a server that cannot cancel (or is
    # gone) lets the task expire by its ttl.
    with (
        anyio.CancelScope(shield=True),
        anyio.move_on_after(CANCEL_TIMEOUT_S),
        contextlib.suppress(Exception),
    ):
        await session.send_request(
            CancelTaskRequest(params=_TaskIdParams(task_id=task_id)), types.EmptyResult
        )


async def send_cancelling_late_task(
    session: ClientSession, send: Callable[[], Awaitable[_Outcome]]
) -> _Outcome:
    """Run ``send`` (a ``tools/call`` on a connection where the server may answer with a task
    handle) so that cancelling the caller cancels the task a handle names.

    A caller cancelled while the request is in flight leaves ``send`` running, for at most
    :data:`TASK_HANDLE_GRACE_S`: the server may have started the task and sent its handle
    already, and a cancelled request's late answer is dropped by the SDK. A handle that
    arrives then gets ``tasks/cancel``; a request still unanswered is cancelled as any other
    (``notifications/cancelled``), which a server that had not yet made a task heeds.
    """
    request_scope = anyio.CancelScope(shield=True)
    finished = anyio.Event()
    answers: list[_Outcome] = []
    failures: list[Exception] = []

    async def run() -> None:
        try:
            with request_scope:
                answers.append(await send())
        except Exception as exc:  # raised in the caller's task below, not as a group
            failures.append(exc)
        finally:
            finished.set()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            try:
                await finished.wait()
            except anyio.get_cancelled_exc_class():
                request_scope.deadline = anyio.current_time() + TASK_HANDLE_GRACE_S
                raise
    except anyio.get_cancelled_exc_class():
        late = answers[0] if answers else None
        if isinstance(late, TaskHandle):
            await _cancel_quietly(session, late.task_id)
        raise
    if failures:
        raise failures[0]
    return answers[0]


def _poll_interval_s(poll_interval_ms: float | None) -> float:
    if poll_interval_ms is None or not math.isfinite(poll_interval_ms):
        return DEFAULT_POLL_INTERVAL_S
    return min(max(poll_interval_ms / 1000, MIN_POLL_INTERVAL_S), MAX_POLL_INTERVAL_S)
