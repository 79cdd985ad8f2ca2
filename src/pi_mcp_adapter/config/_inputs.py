"""What a configuration was loaded from, as one digest: what a later process compares to know
that loading again would give the same configuration, without loading it.

Loading 19,641 servers costs half a second of Python per process; hashing the files they are
written in costs a hundredth of that. A digest is made only for a load that read nothing but
these inputs (:attr:`LoadedConfig.inputs_known`):

- the options: agent directory, project directory (and where it really lies), ``--config``,
  home directory, platform, ``exclusive``;
- every file layer :func:`~._locations.file_layers` names, by where it really lies and its
  bytes, or as absent; the pi settings files (which must name no package) and the trust
  records;
- the value of every environment variable the load looked up (:class:`RecordingEnviron`
  notes them), and whether ``PI_MCP_SHARED_STATE`` is set;
- the code that loads it (``code``, from the caller: the installation's identity).

A host import, a plugin, a package or a Claude plugin makes the load look in places found
while reading (directories, other hosts' files), so such a configuration has no digest and is
always loaded. The digest holds no value: environment values go into it hashed, together.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from pi_mcp_adapter._files import read_regular_file

from ._locations import Where, file_layers
from ._trust import TRUST_FILE_NAME

__all__ = ["RecordingEnviron", "files_digest", "inputs_digest", "settings_paths", "unrecorded"]

_FORMAT = "pi-mcp config inputs 1"
_SHARED_STATE_VARIABLE = "PI_MCP_SHARED_STATE"
"""Read by the shared state itself, from the process's environment (``_shared_state``)."""


class RecordingEnviron(Mapping[str, str]):
    """An environment that notes every name looked up in it. Listing its names marks it as
    read whole (``listed``): a load that did so depends on every variable."""

    __slots__ = ("_environ", "listed", "read")

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        self.read: set[str] = set()
        self.listed = False

    def __getitem__(self, name: str) -> str:
        self.read.add(name)
        return self._environ[name]

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        self.read.add(name)
        return self._environ.get(name, default)

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str):
            self.read.add(name)
        return name in self._environ

    def __iter__(self) -> Iterator[str]:
        self.listed = True
        return iter(self._environ)

    def __len__(self) -> int:
        self.listed = True
        return len(self._environ)


def unrecorded(environ: Mapping[str, str]) -> Mapping[str, str]:
    """The environment behind a :class:`RecordingEnviron`: for what reads every variable
    without it shaping the configuration (registering its secrets for masking)."""
    return environ._environ if isinstance(environ, RecordingEnviron) else environ


def settings_paths(where: Where, agent_dir: Path) -> tuple[Path, Path]:
    """The pi settings files that may list packages (``_plugins.read_packages``)."""
    return (where.project_dir / ".pi" / "settings.json", agent_dir / "settings.json")


def files_digest(
    *,
    agent_dir: Path,
    project_dir: Path,
    config_path: Path | None,
    home: Path | None,
    environ: Mapping[str, str],
    exclusive: bool | None,
    platform: str | None = None,
    code: Sequence[str] = (),
) -> str:
    """The digest of the options and the files a load with them reads (see the module
    docstring): the part of :func:`inputs_digest` that may change while a load runs, so a
    caller hashes it before and after one. Takes the same options as
    :func:`~._loader.load_config`, ``exclusive`` as given to it (None: from ``environ``).
    ``code``: what identifies the code that loads it, so that an upgrade or an edit of the
    package loads again."""
    where = Where(
        home=home if home is not None else Path.home(),
        project_dir=project_dir,
        platform=platform if platform is not None else sys.platform,
        environ=environ,
    )
    mode = exclusive if exclusive is not None else _exclusive(environ)
    digest = hashlib.sha256()

    def add(*parts: str) -> None:
        for part in parts:
            digest.update(part.encode("utf-8", "surrogatepass"))
            digest.update(b"\0")

    add(_FORMAT, *code, str(agent_dir), str(project_dir), _real(project_dir))
    add(str(config_path), str(where.home), _real(where.home), where.platform, repr(exclusive))
    # Where a trusted project's settings may write (``_loader._project_write_roots``).
    add(tempfile.gettempdir(), str(os.getuid() if hasattr(os, "getuid") else 0))
    layers = file_layers(where, agent_dir=agent_dir, config_path=config_path, exclusive=mode)
    files = [layer.path for layer in layers]
    files += [*settings_paths(where, agent_dir), agent_dir / TRUST_FILE_NAME]
    for path in files:
        add(str(path), _real(path), _file_digest(path))
    return digest.hexdigest()


def inputs_digest(files: str, environ: Mapping[str, str], names: Iterable[str]) -> str:
    """The digest of what a load read: ``files`` (:func:`files_digest`) and the values in
    ``environ`` of ``names``, the variables it looked up (:attr:`RecordingEnviron.read`).
    The values go in hashed together, and no value is kept."""
    digest = hashlib.sha256(files.encode())
    for name in sorted({*names, _SHARED_STATE_VARIABLE}):
        # The shared state reads its variable from the process's own environment.
        value = environ.get(name) if name != _SHARED_STATE_VARIABLE else os.environ.get(name)
        text = f"\0{name}\0{'-' if value is None else '+' + value}"
        digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _exclusive(environ: Mapping[str, str]) -> bool:
    from ._locations import is_exclusive_mode

    return is_exclusive_mode(environ)


def _real(path: Path) -> str:
    try:
        return str(path.resolve())
    except OSError:
        return str(path.absolute())


def _file_digest(path: Path) -> str:
    """The file's bytes hashed; ``absent`` or ``unreadable`` (with the reason's type) when
    there are none to hash."""
    try:
        return hashlib.sha256(read_regular_file(path)).hexdigest()
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        return f"unreadable {type(exc).__name__}"
