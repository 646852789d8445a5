"""Demo landing data: sortable file names, Hive-style folders, a few malformed records."""

from __future__ import annotations

import gzip
import json
import random
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

DEMO_START = datetime(2024, 1, 28, tzinfo=timezone.utc)
ACTIONS = ("view", "cart", "buy", "refund")


def sortable_name(when: datetime, seed: random.Random, suffix: str) -> str:
    """``{unix seconds}-{random hex}{suffix}``: lexicographic order = chronological order."""
    return f"{int(when.timestamp())}-{uuid.UUID(int=seed.getrandbits(128)).hex[:12]}{suffix}"


def event_lines(
    when: datetime, rows: int, seed: random.Random, *, malformed_every: int
) -> list[str]:
    lines = []
    for number in range(rows):
        if malformed_every and number % malformed_every == malformed_every - 1:
            lines.append(
                '{"event_id": "broken", "event_time": "not a time", "user_id": "x"}'
                if number % 2
                else "this line is not JSON"
            )
            continue
        moment = when + timedelta(seconds=seed.randrange(3600))
        lines.append(
            json.dumps(
                {
                    "event_id": uuid.UUID(int=seed.getrandbits(128)).hex,
                    "event_time": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "user_id": seed.randrange(1, 5000),
                    "action": seed.choice(ACTIONS),
                    "amount": round(seed.uniform(1, 500), 2),
                }
            )
        )
    return lines


def write_events(
    root: Path,
    *,
    start: datetime = DEMO_START,
    days: int = 3,
    hours: int = 4,
    files_per_hour: int = 2,
    rows_per_file: int = 500,
    malformed_every: int = 250,
    seed: int = 7,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Gzip NDJSON files under ``root/date=YYYY-MM-DD/hour=HH/``; returns the number of files."""
    rng = random.Random(seed)
    total = days * hours * files_per_hour
    written = 0
    for day in range(days):
        for hour in range(hours):
            when = start + timedelta(days=day, hours=hour * 6)
            folder = root / f"date={when:%Y-%m-%d}" / f"hour={when:%H}"
            folder.mkdir(parents=True, exist_ok=True)
            for number in range(files_per_hour):
                stamp = when + timedelta(minutes=number * 10)
                path = folder / sortable_name(stamp, rng, ".ndjson.gz")
                lines = event_lines(when, rows_per_file, rng, malformed_every=malformed_every)
                with gzip.open(path, "wt", encoding="utf-8") as handle:
                    handle.write("\n".join(lines) + "\n")
                written += 1
                if progress:
                    progress(written, total)
    return written


def write_clicks(
    root: Path,
    *,
    start: datetime = DEMO_START,
    days: int = 3,
    files_per_day: int = 3,
    rows_per_file: int = 200,
    seed: int = 11,
) -> int:
    """Parquet files under ``root/date=YYYY-MM-DD/`` as another writer would put them."""
    rng = random.Random(seed)
    written = 0
    for day in range(days):
        when = start + timedelta(days=day)
        folder = root / f"date={when:%Y-%m-%d}"
        folder.mkdir(parents=True, exist_ok=True)
        for number in range(files_per_day):
            stamp = when + timedelta(hours=number * 4)
            table = pa.table(
                {
                    "click_id": [
                        uuid.UUID(int=rng.getrandbits(128)).hex for _ in range(rows_per_file)
                    ],
                    "clicked_at": pa.array(
                        [
                            stamp + timedelta(seconds=rng.randrange(14400))
                            for _ in range(rows_per_file)
                        ],
                        pa.timestamp("us", tz="UTC"),
                    ),
                    "page": [
                        rng.choice(("/", "/cart", "/product", "/search"))
                        for _ in range(rows_per_file)
                    ],
                }
            )
            pq.write_table(table, folder / sortable_name(stamp, rng, ".parquet"))
            written += 1
    return written


ORDER_STATUSES = ("placed", "paid", "shipped", "delivered")
ORDERS_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("customer_id", pa.int64()),
        ("status", pa.string()),
        ("amount", pa.float64()),
        ("updated_at", pa.timestamp("us", tz="UTC")),
    ]
)


def write_orders(
    uri: Path, *, start: datetime = DEMO_START, days: int = 3, per_day: int = 3000, seed: int = 13
) -> int:
    """The "orders" source: a Delta table written with deltalake, one commit (one file) per day
    of orders, each ``updated_at`` within its day; returns the number of rows."""
    from deltalake import write_deltalake

    rng = random.Random(seed)
    for day in range(days):
        first = day * per_day
        when = start + timedelta(days=day)
        table = pa.table(
            {
                "id": list(range(first, first + per_day)),
                "customer_id": [rng.randrange(1, 2000) for _ in range(per_day)],
                "status": [rng.choice(ORDER_STATUSES[:2]) for _ in range(per_day)],
                "amount": [round(rng.uniform(5, 500), 2) for _ in range(per_day)],
                "updated_at": sorted(
                    when + timedelta(seconds=rng.randrange(86_400)) for _ in range(per_day)
                ),
            },
            schema=ORDERS_SCHEMA,
        )
        write_deltalake(str(uri), table, mode="append")
    return days * per_day


def update_orders(uri: Path, *, fraction: float = 0.01) -> tuple[int, datetime]:
    """Ship ``fraction`` of the orders, picked among the newest day's (orders change while they
    are recent): ``status`` and ``updated_at`` change in ONE new commit of the source table
    (delta-rs rewrites the file holding them; the older days' files are untouched). The new
    ``updated_at`` is an hour after the table's newest one, so every call changes rows above
    any watermark. Returns the number of rows changed and their new ``updated_at``."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    from watermark_assets.delta.read import read_columns

    table = DeltaTable(str(uri))
    rows = read_columns(table, ["id", "updated_at"])
    newest = pc.max(rows.column("updated_at")).as_py()
    recent = rows.filter(
        pc.greater_equal(rows.column("updated_at"), pa.scalar(newest - timedelta(days=1)))
    )
    count = max(1, round(rows.num_rows * fraction))
    rng = random.Random(table.version())
    ids = sorted(rng.sample(recent.column("id").to_pylist(), min(count, recent.num_rows)))
    stamp = (newest + timedelta(hours=1)).astimezone(timezone.utc)
    literal = stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    table.update(
        updates={
            "status": "'shipped'",
            "updated_at": f"arrow_cast('{literal}', 'Timestamp(Microsecond, Some(\"UTC\"))')",
        },
        predicate=f"id IN ({', '.join(map(str, ids))})",
    )
    return len(ids), stamp


# --- the demo's HTTP API (demo/api.py serves these) ---

#: One payment every PAYMENT_EVERY from DEMO_START, for the demo's three days.
PAYMENT_EVERY = timedelta(minutes=10)
PAYMENT_DAYS = 3


def demo_payments(since: datetime | None, until: datetime | None) -> list[dict[str, object]]:
    """The payments whose ``paid_at`` is in ``[since, until)`` (None: unbounded), as JSON
    records, in ``paid_at`` order: the same records on every call (no stored state)."""
    count = int(timedelta(days=PAYMENT_DAYS) / PAYMENT_EVERY)
    records: list[dict[str, object]] = []
    for number in range(count):
        paid_at = DEMO_START + number * PAYMENT_EVERY
        if (since is not None and paid_at < since) or (until is not None and paid_at >= until):
            continue
        rng = random.Random(number)
        records.append(
            {
                "id": number,
                "paid_at": paid_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "customer_id": rng.randrange(1, 2000),
                "amount": round(rng.uniform(5, 500), 2),
            }
        )
    return records


#: The demo's survey ids (the secondary input of the time x unit pipeline ``survey_answers``).
DEMO_SURVEYS = ("onboarding", "nps-2024", "checkout")

ANSWERS_SCHEMA = pa.schema(
    [
        ("answer_id", pa.int64()),
        ("survey_id", pa.string()),
        ("score", pa.int64()),
        ("answered_at", pa.timestamp("us", tz="UTC")),
    ]
)


def write_survey_answers(
    uri: Path,
    ids_path: Path,
    *,
    start: datetime = DEMO_START,
    days: int = 3,
    per_day: int = 200,
    seed: int = 17,
) -> int:
    """The time x unit demo: the "answers" source (a Delta table, answers of each survey spread
    over ``days`` days) and the CSV file listing the survey ids (header ``id``); returns the
    number of answers."""
    from deltalake import write_deltalake

    rng = random.Random(seed)
    rows = days * per_day * len(DEMO_SURVEYS)
    moments = [start + timedelta(seconds=rng.randrange(days * 86_400)) for _ in range(rows)]
    table = pa.table(
        {
            "answer_id": list(range(rows)),
            "survey_id": [DEMO_SURVEYS[i % len(DEMO_SURVEYS)] for i in range(rows)],
            "score": [rng.randrange(0, 11) for _ in range(rows)],
            "answered_at": moments,
        },
        schema=ANSWERS_SCHEMA,
    )
    write_deltalake(str(uri), table, mode="overwrite")
    ids_path.parent.mkdir(parents=True, exist_ok=True)
    ids_path.write_text("id\n" + "".join(f"{s}\n" for s in DEMO_SURVEYS), encoding="utf-8")
    return rows


#: The late file of the event-time demo: it lands after the first aggregate batch.
LATE_FILE_STAMP = DEMO_START + timedelta(days=2, hours=18, minutes=40)


def write_late_events(root: Path, *, seed: int = 13) -> Path | None:
    """One landing file that arrives late, in the last hour folder with a name above every other
    file (so the file watermark takes it): 20 events of 2024-01-28 06:00 (their windows were long
    closed by the event-time watermark: late records) and 30 events of 2024-01-31 00:00-00:30
    (they move the watermark past the end of 2024-01-30). None when it is already there."""
    rng = random.Random(seed)
    folder = root / f"date={LATE_FILE_STAMP:%Y-%m-%d}" / f"hour={LATE_FILE_STAMP:%H}"
    path = folder / sortable_name(LATE_FILE_STAMP, rng, ".ndjson.gz")
    if path.exists():
        return None
    old = DEMO_START + timedelta(hours=6)
    new = DEMO_START + timedelta(days=3)
    moments = [old + timedelta(seconds=rng.randrange(600)) for _ in range(20)]
    moments += [new + timedelta(seconds=rng.randrange(1800)) for _ in range(30)]
    lines = [
        json.dumps(
            {
                "event_id": uuid.UUID(int=rng.getrandbits(128)).hex,
                "event_time": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "user_id": rng.randrange(1, 5000),
                "action": rng.choice(ACTIONS),
                "amount": round(rng.uniform(1, 500), 2),
            }
        )
        for moment in moments
    ]
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return path
