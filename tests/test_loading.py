"""loading.collector_paused: the garbage collector is off while the code location loads, and
as it was before afterwards, whatever happens inside."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

import pytest

from watermark_assets.loading import collector_paused


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    was_on = gc.isenabled()
    yield
    if was_on:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.parametrize(
    ("on_before", "fails_inside"),
    [(True, False), (True, True), (False, False), (False, True)],
)
def test_the_collector_is_off_inside_and_as_it_was_after(
    on_before: bool, fails_inside: bool
) -> None:
    if on_before:
        gc.enable()
    else:
        gc.disable()
    inside: list[bool] = []
    failure = pytest.raises(RuntimeError) if fails_inside else contextlib.nullcontext()
    with failure, collector_paused():
        inside.append(gc.isenabled())
        if fails_inside:
            raise RuntimeError("the load failed")
    assert inside == [False]
    assert gc.isenabled() is on_before
