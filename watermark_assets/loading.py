"""What loading the code location needs before anything else is imported (standard library only)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off inside, back as it was after (also on an error).

    Loading the code location allocates hundreds of thousands of objects that all live on
    (modules, classes, configuration models, Dagster's definitions); each allocation burst
    triggers collections, and the full ones walk every object Dagster's own imports made: a
    tenth of the load (1.26 -> 1.17 s, median of 8 alternated loads in a process that imported
    Dagster first, as a run worker or a code server has). Nothing the load makes is garbage
    worth that; what is, the next collection after the load finds."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
