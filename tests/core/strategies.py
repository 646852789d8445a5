"""Hypothesis strategies shared by the core tests: small alphabets so that collisions happen."""

from __future__ import annotations

from hypothesis import strategies as st

from watermark_assets.core.filepath.watermark import FileWatermark

PREFIXES = [
    "",
    "date=2024-01-27",
    "date=2024-01-28",
    "date=2024-01-28/hour=13",
    "date=2024-01-28/hour=14",
    "date=2024-01-29/hour=00",
    "date=2024-01-29-late",
]

prefixes = st.sampled_from(PREFIXES)
names = st.text(alphabet="0123456789ab-.", min_size=1, max_size=4)


@st.composite
def paths(draw: st.DrawFn) -> str:
    prefix = draw(prefixes)
    name = draw(names)
    return f"{prefix}/{name}" if prefix else name


@st.composite
def watermarks(draw: st.DrawFn) -> FileWatermark:
    """A watermark reached through the public operations: batches of new files, idle polls."""
    watermark = FileWatermark.initial()
    for batch in draw(st.lists(st.lists(paths(), max_size=5), max_size=4)):
        watermark = watermark.advance([p for p in batch if watermark.is_above(p)])
        if draw(st.booleans()):
            watermark = watermark.mark_idle()
    return watermark
