"""Wiring an adapter to a host, once, for every binding.

:func:`attach` binds the host to the engine (notices, the status line, lifecycle events) and
registers the surfaces with it. :class:`AdapterBinding` is what the Python runtime bindings
(pydantic-ai, openai-agents) share: opening an adapter with the binding over it, closing, the
``/mcp`` commands, the turn hook, and following config edits on request.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Self

import anyio

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter.engine import Host, McpAdapter, NotifyLevel, Sample
from pi_mcp_adapter.surface import SurfaceKind, Surfaces, register_surfaces

from ._answers import elicit_or_decline

if TYPE_CHECKING:
    from ._export import ExportHost


def attach(
    adapter: McpAdapter,
    host: Host,
    *,
    surface: SurfaceKind | None = None,
    commands: bool = True,
    notices: bool = True,
) -> Surfaces:
    """Register the adapter's surfaces with ``host`` and, with ``notices`` (the default),
    make ``host`` the one the engine tells about events. A host that serves many clients (the
    gateway) binds one notice sink itself and attaches each client's host with
    ``notices=False``."""
    if notices:
        adapter.bind_host(host)
    return register_surfaces(adapter, host, surface=surface, commands=commands)


class AdapterBinding:
    """The parts every Python runtime binding shares. Subclasses set :attr:`adapter`,
    :attr:`host` (an ``ExportHost``) and :attr:`surfaces` in ``__init__``."""

    adapter: McpAdapter
    host: ExportHost
    surfaces: Surfaces

    def __init__(self, adapter: McpAdapter, **options: Any) -> None:
        raise NotImplementedError  # each binding takes its own options

    @classmethod
    @asynccontextmanager
    async def open(
        cls, *, watch_config: bool = False, sampling_model: Any = None, **options: Any
    ) -> AsyncIterator[Self]:
        """Open an adapter (``McpAdapter(**adapter_options)``) and the binding over it; both
        close when the block ends, in the task that entered it. Options the binding's own
        constructor takes (``surface``, ``on_notify``...) go to it, the rest to the adapter.
        ``watch_config=True`` reloads the configuration when a file that was read changes.

        ``elicit(server, params)`` answers the forms and URLs servers ask the person for during
        a call (form defaults are filled in for fields the answer leaves out); without it they
        are declined, with a notice. ``sample(server, params)`` answers their LLM completion
        requests; without it servers are not told this client can sample.
        ``sampling_model`` answers them with a model of the binding's runtime instead
        (:meth:`sampler`)."""
        if sampling_model is not None:
            if options.get("sample") is not None:
                raise UsageError("give sampling_model or sample, not both")
            options["sample"] = cls.sampler(sampling_model)
        own = set(inspect.signature(cls.__init__).parameters) - {"self", "adapter"}
        binding_options = {k: v for k, v in options.items() if k in own}
        adapter_options = {k: v for k, v in options.items() if k not in own}
        opened: list[McpAdapter] = []

        def notify(message: str, level: NotifyLevel) -> None:
            if opened:
                opened[0].notices.notify(message, level)

        # Without an ``elicit`` callback a server's form is declined, and the person is told
        # how to answer next time, through the binding's notices.
        adapter_options["elicit"] = elicit_or_decline(
            adapter_options.get("elicit"), f"{cls.__name__}.open(elicit=...) answers it", notify
        )
        async with McpAdapter(**adapter_options) as adapter, anyio.create_task_group() as tg:
            opened.append(adapter)
            binding = cls(adapter, **binding_options)
            if watch_config:
                tg.start_soon(adapter.watch_config)
            try:
                # An agent built in the block reads its tool list at once: on a fresh machine
                # the direct tools of servers still starting would be missing from it.
                await binding.ready()
                yield binding
            finally:
                binding.close()
                tg.cancel_scope.cancel()

    @classmethod
    def sampler(cls, model: Any) -> Sample:
        """The ``sample`` function that answers servers' sampling requests with ``model``, a
        model of the binding's runtime (each binding's ``sampling_with``)."""
        raise UsageError(f"{cls.__name__} has no sampling model")

    async def ready(self) -> None:
        """Wait until the tools shown up front are registered: the direct tools and the tools
        of eager servers, each server bounded by its start-up timeout (:meth:`open` waits for
        them before it yields). Instant once the servers are in the metadata cache."""
        await self.surfaces.ready()

    def close(self) -> None:
        """Stop following catalog changes (the adapter itself is closed by its owner)."""
        self.surfaces.close()

    async def command(self, name: str, args: str = "") -> str:
        """Run ``/mcp args`` (``name="mcp"``) or ``/mcp-auth args`` and return its text."""
        return await self.host.run_command(name, args)

    async def turn_end(self) -> None:
        """The engine's turn hook (eager servers that dropped reconnect); call after a run."""
        await self.adapter.end_turn()
