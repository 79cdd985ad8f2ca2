"""The ``pi-mcp`` entry point: a short command runs in the warm process of its agent dir when
one serves it and may run it, else here (cold).

Everything about the warm process (the client, the process itself, how it is found and
recognised) lives in :mod:`pi_mcp_adapter._warm`; this module only chooses, and runs the cold
command line the same way a warm process's fork does (:mod:`pi_mcp_adapter._warm._run`).
"""

from __future__ import annotations

import os
import sys

from pi_mcp_adapter._warm._client import (
    run_warm,
    start_warm_process,
    warm_agent_dir,
    warm_start_wanted,
)

__all__ = ["main", "run_warm"]


def main() -> None:
    """Run ``pi-mcp`` with ``sys.argv`` (in the warm process when it can)."""
    args = sys.argv[1:]
    try:
        os.getcwd()
    except OSError:
        # Python would fail on the first relative path with a traceback; the person needs the
        # one fact that matters.
        sys.stderr.write(
            "pi-mcp: the current directory no longer exists; cd to an existing directory\n"
        )
        sys.exit(1)
    agent_dir = warm_agent_dir(args)
    if agent_dir is not None:
        code = run_warm(args)
        if code is not None:
            sys.exit(code)
        if warm_start_wanted():
            start_warm_process(agent_dir)
    from pi_mcp_adapter._warm._run import run_to_exit_code
    from pi_mcp_adapter.cli import main as cli_main

    sys.exit(run_to_exit_code(cli_main))
