"""Fault injection for the exactly-once and concurrency tests (never set in production)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


CRASH_ENV_VAR = "WATERMARK_ASSETS_CRASH_AT"


def crash_point(name: str, env: Mapping[str, str] | None = None) -> None:
    """Fault injection for the exactly-once tests: SIGKILL this process at the named point.

    Set WATERMARK_ASSETS_CRASH_AT to ``after_data_written``, ``after_commit``,
    ``after_first_file_moved`` (staging: one file moved into the table, none committed) or
    ``before_atomic_rename`` (storage: an atomic write's temporary file written, not renamed).
    Never set in production; reading one environment variable costs nothing.
    """
    env = os.environ if env is None else env
    if env.get(CRASH_ENV_VAR) == name:
        os.kill(os.getpid(), signal.SIGKILL)


PAUSE_ENV_VAR = "WATERMARK_ASSETS_PAUSE_AT"


PAUSE_DIR_ENV_VAR = "WATERMARK_ASSETS_PAUSE_DIR"


def pause_point(name: str, env: Mapping[str, str] | None = None, *, timeout: float = 300) -> None:
    """Fault injection for the concurrency tests: stop here until the test says go.

    With WATERMARK_ASSETS_PAUSE_AT=``name`` the process writes ``{name}.reached`` into
    WATERMARK_ASSETS_PAUSE_DIR and waits for ``{name}.go`` there (once it exists, later arrivals
    pass at once). Never set in production.
    """
    env = os.environ if env is None else env
    if env.get(PAUSE_ENV_VAR) != name:
        return
    folder = Path(env[PAUSE_DIR_ENV_VAR])
    (folder / f"{name}.reached").touch()
    deadline = time.monotonic() + timeout
    while not (folder / f"{name}.go").exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"pause point {name!r}: no {name}.go in {folder} after {timeout}s")
        time.sleep(0.05)
