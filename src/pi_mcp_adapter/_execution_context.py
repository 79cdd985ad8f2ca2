"""What a process may do, as the kernel sees it: the execution context a long-lived process
(the warm process, the server pool) must share with a caller before it runs anything for it.

A command handed to the warm process runs in a fork of that process, and a pooled server runs
as a child of the pool: both have the long-lived process's namespaces, cgroup, credentials,
limits and scheduling, not the caller's. A caller inside a sandbox (``unshare -n``, ``ulimit``,
``nice``, a seccomp filter, another cgroup) would otherwise get its command run outside it.
So both sides compare :func:`execution_context` of the caller with their own and serve only on
equality; otherwise the command runs in the caller's own process.

The server side never takes the caller's word: it identifies the peer of the Unix socket with
``SO_PEERCRED`` (pid, uid and gid, filled in by the kernel at ``connect``) and reads that
process's context from ``/proc/<pid>``; the context the caller sends is only checked against
it. The caller reads the server's the same way, so it hands nothing (its environment, its
terminal) to a process that runs elsewhere.

Linux only (``/proc``); where ``/proc`` cannot be read, no context is known and nothing is
served (:func:`execution_context` returns None). Standard library only: the entry point
imports it before anything else.
"""

from __future__ import annotations

import os
import socket
import struct
import time

ExecutionContext = dict[str, str]
"""Named parts of a process's execution context (``"namespace net"``, ``"limit Max open
files"``, ``"nice"``, ...) and their values as ``/proc`` shows them."""

_STATUS_FIELDS = (
    "Umask",
    "Uid",
    "Gid",
    "Groups",
    "NoNewPrivs",
    "Seccomp",
    "Seccomp_filters",
    "CapInh",
    "CapPrm",
    "CapEff",
    "CapBnd",
    "CapAmb",
    "Cpus_allowed_list",
    "Mems_allowed_list",
)
"""``/proc/<pid>/status`` lines that bound a process: credentials, privileges, the seccomp
filter (its mode and count: two different filters of the same count are not told apart), CPU
and memory-node affinity, and the umask its files are created with."""
_STAT_FIELDS = {"nice": 19, "rt_priority": 40, "policy": 41}
"""Scheduling fields of ``/proc/<pid>/stat``, by their number in proc(5)."""
_START_TIME_FIELD = 22
_PEERCRED = struct.Struct("3i")
"""``struct ucred``: pid, uid, gid."""


def execution_context(pid: int | None = None) -> ExecutionContext | None:
    """The execution context of process ``pid`` (default: this one); None when part of it
    cannot be read (another user's process, one that ended, no ``/proc``)."""
    base = f"/proc/{pid if pid is not None else 'self'}"
    context: ExecutionContext = {}
    try:
        # Every namespace the kernel has, including ones newer than this code (time, ...).
        for name in sorted(os.listdir(f"{base}/ns")):
            context[f"namespace {name}"] = os.readlink(f"{base}/ns/{name}")
        root = os.stat(f"{base}/root")  # a chroot: the root directory itself
        context["root"] = f"{root.st_dev}:{root.st_ino}"
        context["cgroup"] = _read(f"{base}/cgroup")
        status = _status_fields(_read(f"{base}/status"))
        for name in _STATUS_FIELDS:
            # A field this kernel does not have is absent on both sides alike.
            context[name] = status.get(name, "")
        context.update(_limits(_read(f"{base}/limits")))
        stat_fields = _stat_fields(_read(f"{base}/stat"))
        for name, number in _STAT_FIELDS.items():
            context[name] = stat_fields[number - 3]
        context["oom_score_adj"] = _read(f"{base}/oom_score_adj").strip()
    except (OSError, IndexError, ValueError):
        return None
    # The security module's label (AppArmor profile, SELinux context); not every kernel has
    # one, which reads as an error the same way for both sides.
    try:
        context["security label"] = _read(f"{base}/attr/current").strip("\0\n ")
    except OSError:
        context["security label"] = ""
    return context


def context_fingerprint(context: ExecutionContext) -> str:
    """One string that is equal for equal contexts: what a caller sends to say where it runs."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(context, sort_keys=True).encode()).hexdigest()


def context_differences(
    mine: ExecutionContext | None, theirs: ExecutionContext | None
) -> list[str]:
    """The names of the parts in which two contexts differ (``["unknown"]`` when either is
    unknown); empty when a command may run in the other process."""
    if mine is None or theirs is None:
        return ["unknown"]
    return sorted(
        name for name in mine.keys() | theirs.keys() if mine.get(name) != theirs.get(name)
    )


def peer_execution_context(connection: socket.socket) -> ExecutionContext | None:
    """The execution context of the process at the other end of the Unix socket
    ``connection``, read from ``/proc`` by the pid the kernel recorded when it connected;
    None when it cannot be known.

    A pid can be reused once its process has ended; a process that started after this call
    began cannot have made the connection, so such a pid, or one whose process changed while
    its context was read, counts as unknown.
    """
    asked_at_ticks = _boot_time_ticks()
    try:
        raw = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    except OSError:
        return None
    pid, uid, gid = _PEERCRED.unpack(raw)
    if pid <= 0:  # the peer runs in a pid namespace this process cannot see into
        return None
    started = _start_time_ticks(pid)
    if started is None or started > asked_at_ticks:
        return None
    context = execution_context(pid)
    if context is None or _start_time_ticks(pid) != started:
        return None
    # The credentials the kernel gave the socket are the ones the process still has.
    if context["Uid"].split()[1:2] != [str(uid)] or context["Gid"].split()[1:2] != [str(gid)]:
        return None
    return context


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def _status_fields(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        name, colon, value = line.partition(":")
        if colon:
            fields[name] = " ".join(value.split())
    return fields


def _limits(text: str) -> dict[str, str]:
    """Every resource limit, soft and hard (a hard limit bounds what a process may raise its
    soft one to)."""
    limits: dict[str, str] = {}
    for line in text.splitlines()[1:]:
        # Columns: the name (26 characters wide), soft, hard, units.
        name, values = line[:26].strip(), line[26:].split()
        if name and len(values) >= 2:
            limits[f"limit {name}"] = f"{values[0]} {values[1]}"
    return limits


def _stat_fields(text: str) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` from the third on (the name before them may hold
    spaces and parentheses)."""
    return text[text.rindex(")") + 1 :].split()


def _start_time_ticks(pid: int) -> int | None:
    try:
        return int(_stat_fields(_read(f"/proc/{pid}/stat"))[_START_TIME_FIELD - 3])
    except (OSError, IndexError, ValueError):
        return None


def _boot_time_ticks() -> int:
    # The clock /proc/<pid>/stat counts a process's start in, in the same ticks; one more tick
    # for the rounding of both.
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * ticks_per_s) + 1
