"""The server pool, one room: the daemon a running gateway serves (``_daemon``) and the client
every other process of the agent dir asks first (``_client``), over one Unix socket.

The pool shares stdio server processes, nothing of the engine, so it lives in the servers
layer. Both sides serve only a caller in their own execution context (see
:mod:`pi_mcp_adapter._execution_context`): a pooled server runs as the pool's child, so a
caller in another sandbox starts its own.
"""

from __future__ import annotations
