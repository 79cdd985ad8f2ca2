"""Facts about the environment a command runs in, read the same way everywhere."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["in_ci_job"]


def in_ci_job(environ: Mapping[str, str]) -> bool:
    """Whether this runs in a CI job: ``CI`` set to anything but ``0`` or ``false``, as CI
    services set it. Such a job has no person to ask and should leave no process behind."""
    return environ.get("CI", "").strip().lower() not in ("", "0", "false")
