"""The watermark contract (core/watermark.py): its shape is satisfiable; kinds are registered."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, ClassVar

import pytest

from watermark_assets.core.column.watermark import ColumnWatermark
from watermark_assets.core.errors import UnknownWatermarkKindError, WatermarkKindConflictError
from watermark_assets.core.watermark import Watermark, register, registered_kinds, watermark_kind


def test_a_column_watermark_implements_the_contract() -> None:
    watermark: Watermark[Any] = ColumnWatermark.of(
        {"updated_at": datetime(2026, 4, 3, tzinfo=timezone.utc)}
    )
    assert isinstance(watermark, Watermark)
    assert type(watermark).kind == "column"
    assert not watermark.is_empty
    assert type(watermark).from_json(watermark.to_json()) == watermark
    assert watermark.merge(watermark) == watermark


def test_kinds_are_found_by_name() -> None:
    assert "column" in registered_kinds()
    assert watermark_kind("column") is ColumnWatermark
    stored = {"kind": "column", "value": '{"id": 3}'}
    assert watermark_kind(stored["kind"]).from_json(stored["value"]) == ColumnWatermark.of(
        {"id": 3}
    )


def test_an_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(UnknownWatermarkKindError) as caught:
        watermark_kind("colum")
    assert "column" in caught.value.known


def test_a_taken_kind_name_is_refused() -> None:
    class Impostor:
        kind: ClassVar[str] = "column"

    with pytest.raises(WatermarkKindConflictError):
        register(Impostor)  # type: ignore[type-var]


def test_registering_the_same_class_again_is_harmless() -> None:
    assert register(ColumnWatermark) is ColumnWatermark
