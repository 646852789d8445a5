"""A copy of the repository and the commands a user types in its root, as subprocesses.

The copy holds what a checkout needs to be a code location, a ``dg`` project and its own Dagster
instance: the package, ``pyproject.toml``, ``workspace.yaml``, ``.env`` (which names the
instance, ``.dagster_home``) and ``.dagster_home/dagster.yaml``. Commands run as typed in a
shell in the copy's root: DAGSTER_HOME unset, PWD the root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
#: What a copy of the repository needs to be a dg project, a code location and an instance.
REPOSITORY_FILES = ("pyproject.toml", "workspace.yaml", ".env", ".dagster_home/dagster.yaml")


def repository_copy(root: Path) -> Path:
    """The package and the repository's project files, copied to ``root`` (an empty
    ``watermark_assets/dg_defs``, as in git)."""
    root.mkdir(parents=True)
    for name in REPOSITORY_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, root / name)
    shutil.copytree(
        REPO_ROOT / "watermark_assets",
        root / "watermark_assets",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    defs_folder = root / "watermark_assets" / "dg_defs"
    for entry in defs_folder.iterdir():  # a checkout with a scaffolded folder of its own
        if entry.name != "__init__.py":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    return root


def command_env(root: Path) -> dict[str, str]:
    """The environment of a shell in ``root``: no DAGSTER_HOME (the .env names the instance),
    nor the project's variables; the copy's package first on the path."""
    unset = ("WATERMARK_ASSETS_CONFIG", "WATERMARK_ASSETS_DATA", "PYTHONPATH", "DAGSTER_HOME")
    env = {name: value for name, value in os.environ.items() if name not in unset}
    env.update(
        PYTHONPATH=str(root),  # the copy's package, whatever the editable install points at
        PWD=str(root),
        DAGSTER_DISABLE_TELEMETRY="1",
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


class Repository:
    """A copy of the repository and the commands a user types in its root."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = repository_copy(tmp_path / "repository")
        self.env = command_env(self.root)

    @property
    def instance_home(self) -> Path:
        """The copy's Dagster instance (DAGSTER_HOME in its .env)."""
        return self.root / ".dagster_home"

    def run(self, *command: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / command[0]), *command[1:]],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def output(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr
