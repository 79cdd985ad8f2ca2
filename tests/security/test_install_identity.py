"""What tells one installation from another (``_warm.install_identity``): the warm process
runs a command only for the installation that started it, and the status and search facts
are kept under it. A library installed, upgraded or removed beneath the package changes it;
nothing that differs between two commands of one installation does."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from pi_mcp_adapter._warm import install_identity


@pytest.fixture
def library_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This environment's library folder, as a folder the test may change."""
    folder = tmp_path / "site-packages"
    (folder / "pydantic-2.9.2.dist-info").mkdir(parents=True)
    (folder / "pydantic").mkdir()
    paths = {**sysconfig.get_paths(), "purelib": str(folder), "platlib": str(folder)}
    monkeypatch.setattr(sysconfig, "get_paths", lambda: paths)
    return folder


def test_a_library_installed_upgraded_or_removed_changes_the_identity(
    library_folder: Path,
) -> None:
    seen = [install_identity()]
    assert install_identity() == seen[0]

    (library_folder / "pydantic-2.9.2.dist-info").rename(
        library_folder / "pydantic-2.10.0.dist-info"
    )
    seen.append(install_identity())
    (library_folder / "anyio-4.6.0.dist-info").mkdir()
    seen.append(install_identity())
    (library_folder / "anyio-4.6.0.dist-info").rmdir()

    assert install_identity() == seen[1]
    assert len({identity[-1] for identity in seen}) == 3


def test_the_identity_is_the_same_however_a_command_is_started(tmp_path: Path) -> None:
    # `python -m` puts the current folder first on sys.path, `-c` an empty entry, a console
    # script its own folder: the warm process and its clients start in each of these ways.
    script = "from pi_mcp_adapter._warm import install_identity; print(install_identity())"
    module = tmp_path / "identity_probe.py"
    module.write_text(script, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    runs = [
        [sys.executable, "-c", script],
        [sys.executable, "-m", "identity_probe"],
        [sys.executable, str(module)],
    ]
    found = {
        subprocess.run(
            run, cwd=tmp_path, env=env, capture_output=True, text=True, check=True, timeout=60
        ).stdout
        for run in runs
    }
    assert len(found) == 1
