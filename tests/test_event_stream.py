"""The event-time aggregate on Spark Structured Streaming, against the batch engine (issue 9 §4).

Oracle test: the same events, fed in three runs with out-of-order and late records, go (a) as
NDJSON landing files to a real streaming query (file source, withWatermark, window aggregation,
availableNow, foreachBatch committing to Delta with deltalake) and (b) as appends to a Delta table
that the batch engine reads. Both output tables must hold the same windows with the same
aggregates and the same watermarks, the same late records must be kept (the streaming engine
reads again the files of each micro-batch and keeps the rows Spark drops), and Spark must drop
as many rows as the batch engine keeps as late. (Spark counts its dropped rows after its
partial aggregation, one per late window and task; here each late event is alone in its window,
so the counts are equal.)
"""

from __future__ import annotations

import gzip
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from test_event_window import MIN, T0, append, event, make_spec

from watermark_assets.kinds.event_time.stream import StreamSpec, run_window_stream
from watermark_assets.kinds.event_time.window import run_window_batch
from watermark_assets.spark.window_agg import Aggregate

AGGREGATES = (
    Aggregate.parse("events", "count"),
    Aggregate.parse("amount", "sum(user_id)"),
    Aggregate.parse("first_user", "min(user_id)"),
)

#: Three runs: in order; out of order (12:12 arrives after 12:21) with a late one (12:03 after the
#: watermark reached 12:11); and a jump forward that closes everything before 12:30.
RUNS = [
    [event(1, 0, 1), event(2, 3, 2), event(3, 9, 3), event(4, 16, 4), event(5, 21, 5)],
    [event(6, 12, 6), event(7, 3, 7), event(8, 24, 8), event(9, 27, 9)],
    [event(10, 2, 10), event(11, 31, 11), event(12, 44, 12)],
]


def land(folder: Path, number: int, rows: list[dict[str, Any]]) -> None:
    """One gzip NDJSON landing file (the upstream file pipeline's landing folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps({**r, "event_time": r["event_time"].isoformat(), "event_date": None})
        for r in rows
    ]
    with gzip.open(folder / f"part-{number:03d}.ndjson.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")


def windows(uri: str) -> list[tuple[str, int, int, int]]:
    rows = DeltaTable(uri).to_pyarrow_table().to_pylist()
    return sorted(
        (f"{r['window_start']:%H:%M}", r["events"], r["amount"], r["first_user"]) for r in rows
    )


@pytest.mark.spark
def test_structured_streaming_and_the_batch_engine_emit_the_same_windows_and_late_rows(
    spark: Any, tmp_path: Path
) -> None:
    batch_spec = make_spec(tmp_path, aggregates=AGGREGATES)
    stream_spec = make_stream_spec(tmp_path)
    late_batch = dropped_stream = 0
    for number, rows in enumerate(RUNS):
        append(tmp_path / "events", *rows)
        land(tmp_path / "landing", number, rows)
        now = T0 + timedelta(hours=number + 1)
        batched = run_window_batch(spark, batch_spec, now=now, run_id=f"b{number}")
        late_batch += batched.late_rows
        streamed = run_window_stream(spark, stream_spec, now=now, run_id=f"s{number}")
        dropped_stream += streamed.late_dropped
        assert windows(stream_spec.output_uri) == windows(batch_spec.output_uri), number
        # the same watermark, committed with the windows it closed
        assert streamed.watermark_ms == batched.watermark_after.watermark_ms, number

    assert late_batch == dropped_stream == 2  # 12:03 in run 2 and 12:02 in run 3
    # the same late records, kept by both engines with the same reason
    kept = {
        name: sorted(
            (r["id"], r["_late_reason"])
            for r in DeltaTable(uri).to_pyarrow_table(columns=["id", "_late_reason"]).to_pylist()
        )
        for name, uri in (("batch", batch_spec.late_uri), ("stream", stream_spec.late_uri))
    }
    assert kept["stream"] == kept["batch"]
    assert [i for i, _ in kept["batch"]] == [7, 10]
    assert [w for w, *_ in windows(batch_spec.output_uri)] == [
        "12:00",
        "12:05",
        "12:10",
        "12:15",
        "12:20",
        "12:25",
    ]
    # a replayed trigger (nothing new) adds nothing
    version = DeltaTable(stream_spec.output_uri).version()
    run_window_stream(spark, stream_spec, now=T0 + timedelta(hours=5), run_id="again")
    assert DeltaTable(stream_spec.output_uri).version() == version


def test_count_distinct_is_refused_on_a_stream_with_the_fix() -> None:
    with pytest.raises(ValueError, match="use engine: batch"):
        StreamSpec(
            pipeline="p",
            landing_uri="/x",
            file_format="json",
            schema_ddl="t TIMESTAMP, u BIGINT",
            event_column="t",
            delay_ms=0,
            window_ms=MIN,
            aggregates=(Aggregate.parse("users", "count_distinct(u)"),),
            output_uri="/y",
        )


STREAM_CRASH_SCRIPT = """
import sys
from datetime import datetime
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_event_stream import make_stream_spec
from watermark_assets.kinds.event_time.stream import run_window_stream
from watermark_assets.spark.session import get_spark
spark = get_spark("local[1]", {{"spark.ui.enabled": "false"}})
run_window_stream(spark, make_stream_spec(Path({root!r})),
                  now=datetime.fromisoformat("2024-01-30T14:00:00+00:00"), run_id="victim")
"""


def make_stream_spec(root: Path) -> StreamSpec:
    return StreamSpec(
        pipeline="events_5min_stream",
        landing_uri=str(root / "landing"),
        file_format="json",
        schema_ddl="id BIGINT, event_time TIMESTAMP, user_id BIGINT, event_date STRING",
        event_column="event_time",
        delay_ms=10 * MIN,
        window_ms=5 * MIN,
        aggregates=AGGREGATES,
        output_uri=str(root / "stream" / "events_5min"),
    )


@pytest.mark.spark
@pytest.mark.parametrize(
    "crash_at",
    ["event_stream_after_late", "event_stream_after_output"],
    ids=[
        "killed after the late commit, before the windows' commit",
        "killed after the windows' commit, before Spark's commit log (the checkpoint)",
    ],
)
def test_a_stream_killed_mid_micro_batch_replays_it_and_commits_everything_once(
    spark: Any, tmp_path: Path, crash_at: str
) -> None:
    import os
    import subprocess
    import sys

    spec = make_stream_spec(tmp_path)
    land(tmp_path / "landing", 0, RUNS[0])
    run_window_stream(spark, spec, now=T0, run_id="first")
    land(tmp_path / "landing", 1, RUNS[1])  # holds the late 12:03
    script = STREAM_CRASH_SCRIPT.format(tests=str(Path(__file__).parent), root=str(tmp_path))
    env = {**os.environ, "WATERMARK_ASSETS_CRASH_AT": crash_at, "PYSPARK_PYTHON": sys.executable}
    killed = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert killed.returncode == -9, killed.stderr[-2000:]

    run_window_stream(spark, spec, now=T0 + timedelta(hours=5), run_id="again")  # Spark replays
    batch_spec = make_spec(tmp_path / "oracle", aggregates=AGGREGATES)
    for number, rows in enumerate(RUNS[:2]):
        append(tmp_path / "oracle" / "events", *rows)
        run_window_batch(spark, batch_spec, now=T0 + timedelta(hours=number), run_id="oracle")
    assert windows(spec.output_uri) == windows(batch_spec.output_uri)  # every window once
    late = DeltaTable(spec.late_uri).to_pyarrow_table(columns=["id"])["id"].to_pylist()
    assert late == [7]  # every late record once


@pytest.mark.spark
def test_a_landing_folder_named_with_a_space_and_a_star_is_streamed_literally(
    spark: Any, tmp_path: Path
) -> None:
    """The stream source is the folder itself (a '*' in its name is no glob), and the files a
    micro-batch read, logged as URIs (a space is %20), are read again for its late rows."""
    spec = make_stream_spec(tmp_path / "landing with space * star")
    for number, rows in enumerate(RUNS[:2]):
        land(tmp_path / "landing with space * star" / "landing", number, rows)
        run_window_stream(spark, spec, now=T0 + timedelta(hours=number), run_id=f"s{number}")
    late = DeltaTable(spec.late_uri).to_pyarrow_table(columns=["id"])["id"].to_pylist()
    assert late == [7]
    assert [w for w, *_ in windows(spec.output_uri)] == ["12:00", "12:05", "12:10"]
