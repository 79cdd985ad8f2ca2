"""The signals that end a ``pi-mcp`` process, and the one way an async process stops on them.

Every long-running piece (the gateway, a pool served on its own, a one-shot command's event
loop) stops on the same three signals and exits with 128 + the signal's number, as the shell
reports a process the signal ended; the warm process's client forwards the same three to the
command it handed over. Below every layer, so that servers, hosts and the CLI share it.

Standard library only at import (``signal``): the warm process's client reads
:data:`STOP_SIGNALS` before anything else is imported, and a cold command pays for every import.
"""

from __future__ import annotations

import signal

TYPE_CHECKING = False  # not typing's: see the module docstring
if TYPE_CHECKING:
    import logging
    from collections.abc import Callable

    from anyio.abc import TaskStatus

__all__ = ["STOP_SIGNALS", "stop_on_signal"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Ctrl-C, a stop request and a closed terminal (SIGHUP): each ends a ``pi-mcp`` process,
which then exits with 128 + the signal's number."""


async def stop_on_signal(
    stop: Callable[[], None],
    received: list[signal.Signals],
    logger: logging.Logger | None = None,
    closing: str = "stopping",
    *,
    task_status: TaskStatus[None],
) -> None:
    """On the first of :data:`STOP_SIGNALS`, note it in ``received``, log ``closing`` and call
    ``stop`` once; then return, which gives the signals back to the handlers they had before.

    Run it with ``await task_group.start(...)``: it reports started once the handlers are in
    place, so whoever learns of the process from then on (an announced address) may signal it.
    """
    import anyio  # here, not at import: see the module docstring

    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        task_status.started()
        async for signum in signals:
            stopped_by = signal.Signals(signum)
            received.append(stopped_by)
            if logger is not None:
                logger.info("received %s: %s", stopped_by.name, closing)
            stop()
            return
