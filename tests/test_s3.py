"""S3 as a storage location, on moto's real S3 server (127.0.0.1, a free port, every request
recorded: tests/s3_server.py).

What is specified here: the project's storage settings reach s3fs and delta-rs; a poll sees every
key written since the last one; a partition with a watermark is listed from its last file on
(ListObjectsV2 StartAfter), so LIST requests grow with the new keys and the active partitions,
never with the keys already processed; checkpoint-like files are written with conditional puts
and a writer that loses a race reads again; Delta commits from two committers at once land once.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pytest
import yaml
from s3_server import S3Server, load_keys

from watermark_assets import storage
from watermark_assets.config import parse_config
from watermark_assets.config.storage import MASK, StorageConfig
from watermark_assets.core.filepath.listing import plan_listing
from watermark_assets.core.filepath.path import NameOrdering
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.delta.committer import DeltaCommitter, TxnVersion, describe_data_files
from watermark_assets.exceptions import ConcurrentWriteError, ConfigError
from watermark_assets.providers.file import FileWatermarkProvider

SUFFIXES = (".ndjson.gz",)


@pytest.fixture
def landing(s3_storage: S3Server) -> str:
    """An empty landing root in a new bucket, the server's settings installed."""
    return f"s3://{s3_storage.new_bucket()}/landing"


def put(root: str, *paths: str) -> None:
    """Put each landing file through s3fs (as a producer would)."""
    fs, base = storage.filesystem(root)
    for path in paths:
        fs.pipe_file(f"{base}/{path}", b"{}\n")


def list_above(root: str, watermark: FileWatermark | None = None, **options: Any) -> Any:
    plan = plan_listing(watermark or FileWatermark.initial(), None)
    return storage.list_files_above(
        root, plan, suffixes=SUFFIXES, ordering=NameOrdering.AUTO, **options
    )


def bucket_of(uri: str) -> str:
    return uri.removeprefix("s3://").split("/")[0]


# ------------------------------------------------------------------------------------ settings


@pytest.mark.parametrize(
    ("uri", "endpoint", "region", "key"),
    [
        # the project's block applies everywhere on S3...
        ("s3://any-bucket/x", "http://127.0.0.1:9000", "eu-west-1", "project-key"),
        # ...a location overrides it field by field, the longest prefix winning...
        ("s3://partner/in/2024/a.json", "http://127.0.0.1:9000", "us-east-2", "partner-key"),
        ("s3://partner/in-other/a.json", "http://127.0.0.1:9000", "eu-west-1", "project-key"),
        ("s3a://partner/in/deep/a.json", "http://127.0.0.1:9000", "us-east-2", "partner-key"),
        # ...and only the longest: a location's unset fields are the project's, not a shorter's
        ("s3://partner/in/deep/b.json", "http://127.0.0.1:9001", "eu-west-1", "deep-key"),
    ],
)
def test_the_settings_of_a_uri_come_from_the_project_and_its_longest_location_prefix(
    uri: str, endpoint: str, region: str, key: str
) -> None:
    config = StorageConfig.model_validate(
        {
            "endpoint_url": "http://127.0.0.1:9000",
            "allow_http": True,
            "region": "eu-west-1",
            "access_key_id": "project-key",
            "secret_access_key": "project-secret",
            "locations": {
                "s3://partner/in": {
                    "region": "us-east-2",
                    "access_key_id": "partner-key",
                    "secret_access_key": "partner-secret",
                },
                "s3://partner/in/deep/b.json": {
                    "endpoint_url": "http://127.0.0.1:9001",
                    "allow_http": True,
                    "access_key_id": "deep-key",
                    "secret_access_key": "deep-secret",
                },
            },
        }
    )
    previous = storage.installed()
    storage.configure(config)
    try:
        fs_options = storage.fsspec_options(uri)
        delta = storage.delta_options(uri)
    finally:
        storage.configure(previous)
    assert fs_options["client_kwargs"] == {"endpoint_url": endpoint, "region_name": region}
    assert fs_options["key"] == key
    assert fs_options["use_listings_cache"] is False
    assert delta is not None
    assert (delta["AWS_ENDPOINT_URL"], delta["AWS_REGION"]) == (endpoint, region)
    assert delta["AWS_ACCESS_KEY_ID"] == key
    assert delta["AWS_ALLOW_HTTP"] == "true"
    assert delta["conditional_put"] == "etag"


@pytest.mark.parametrize(
    ("uri", "fs_options", "delta"),
    [
        ("/data/landing", {}, None),
        ("file:///data/landing", {}, None),
        ("memory://landing", {}, None),
        # nothing configured on S3: boto and delta-rs read the AWS_* environment themselves
        ("s3://bucket/landing", {"use_listings_cache": False}, {"conditional_put": "etag"}),
    ],
)
def test_without_settings_nothing_is_passed_but_the_listing_and_commit_safety(
    uri: str, fs_options: dict[str, Any], delta: dict[str, str] | None
) -> None:
    previous = storage.installed()
    storage.configure(None)
    try:
        assert storage.fsspec_options(uri) == fs_options
        assert storage.delta_options(uri) == delta
    finally:
        storage.configure(previous)


def test_credentials_named_by_environment_variables_are_read_when_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = StorageConfig(access_key_id_env="WA_TEST_KEY", secret_access_key_env="WA_TEST_SECRET")
    monkeypatch.setenv("WA_TEST_KEY", "key-from-env")
    monkeypatch.setenv("WA_TEST_SECRET", "secret-from-env")
    # the standard variables lose against the configured ones
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "standard-key")
    settings = config.settings_for("s3://b/x")
    assert (settings.access_key_id, settings.secret_access_key) == (
        "key-from-env",
        "secret-from-env",
    )
    assert "secret-from-env" not in repr(settings)
    monkeypatch.delenv("WA_TEST_SECRET")
    with pytest.raises(ConfigError, match="'WA_TEST_SECRET', which is not set"):
        config.settings_for("s3://b/x")


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"endpoint_url": "http://127.0.0.1:9000"}, "add 'allow_http: true'"),
        ({"endpoint_url": "127.0.0.1:9000"}, "is not an http\\(s\\) URL"),
        ({"access_key_id": "k"}, "add secret_access_key"),
        ({"secret_access_key": "s", "secret_access_key_env": "S"}, "not both"),
        ({"locations": {"bucket/prefix": {}}}, "'bucket/prefix' is not a URI prefix"),
        ({"endpoint": "http://x"}, "endpoint"),  # a typo is refused, never ignored
    ],
)
def test_a_wrong_storage_block_is_refused_at_load_naming_the_value_and_the_fix(
    block: dict[str, Any], message: str
) -> None:
    text = yaml.safe_dump({"storage": block, "pipelines": [minimal_pipeline()]})
    with pytest.raises(ConfigError, match=message):
        parse_config(text, env={}, base=Path.cwd(), origin="test config")


def minimal_pipeline() -> dict[str, Any]:
    return {
        "name": "events",
        "source": {
            "type": "files",
            "uri": "s3://b/landing",
            "format": "ndjson",
            "schema": "id INT",
        },
        "watermark": {"partition_template": "date=%Y-%m-%d"},
        "table": {"uri": "s3://b/delta/events"},
        "partitions": {"granularity": "daily", "start": "2024-01-01"},
    }


def test_loading_the_configuration_installs_its_storage_settings() -> None:
    previous = storage.installed()
    text = yaml.safe_dump(
        {
            "storage": {"region": "eu-north-1", "endpoint_url": "https://s3.example.test"},
            "pipelines": [minimal_pipeline()],
        }
    )
    try:
        config = parse_config(text, env={}, base=Path.cwd(), origin="test config")
        assert storage.installed() == config.storage
        assert storage.delta_options("s3://b/delta/events") == {
            "conditional_put": "etag",
            "AWS_ENDPOINT_URL": "https://s3.example.test",
            "AWS_REGION": "eu-north-1",
        }
    finally:
        storage.configure(previous)


def test_the_portable_settings_carry_credentials_to_another_python_process(
    s3_storage: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Spark executor is another process, without the project's configuration: it installs
    the driver's settings from one text and reads S3 with them (no AWS_* variables)."""
    bucket = s3_storage.new_bucket()
    s3_storage.client().put_object(Bucket=bucket, Key="in/a.json", Body=b"hello")
    script = (
        "import sys; from watermark_assets import storage; "
        "storage.configure_from_portable(sys.stdin.read()); "
        f"print(storage.read_text('s3://{bucket}/in/a.json'))"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "AWS_CONFIG_FILE": "/dev/null"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=storage.portable_settings(),
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "hello"


# ------------------------------------------------------------------------------------- listing


def test_the_listing_returns_what_the_local_one_does(landing: str, tmp_path: Path) -> None:
    """The same landing files on S3 and on disk: the same files above the watermark, and with
    start_after=False (the sweep) the same count at or below each partition watermark."""
    files = [
        "date=2024-01-26/1706227200-aaa.ndjson.gz",
        "date=2024-01-28/1706450100-01926ab0.ndjson.gz",
        "date=2024-01-28/1706450200-01926ab5.ndjson.gz",
        "date=2024-01-28/1706450300-late.ndjson.gz",
        "date=2024-01-28/1706450400-01926abc.ndjson.gz",
        "date=2024-01-28/1706450500-01926abd.ndjson.gz",
        "date=2024-01-28/_SUCCESS.ndjson.gz",
        "date=2024-01-29/1706536800-01926b00.ndjson.gz",
        "date=2024-01-29/event-abc123.ndjson.gz",
        "_delta_log/00000000000000000000.json",
    ]
    local = str(tmp_path / "landing")
    for root in (landing, local):
        fs, base = storage.filesystem(root)
        for path in files:
            fs.makedirs(f"{base}/{path.rsplit('/', 1)[0]}", exist_ok=True)
            fs.pipe_file(f"{base}/{path}", b"{}\n")
    processed = [files[1], files[2], files[4]]
    watermark = FileWatermark.initial().advance(processed)
    on_s3, on_disk = list_above(landing, watermark), list_above(local, watermark)
    assert (
        on_s3.files
        == on_disk.files
        == (
            "date=2024-01-28/1706450500-01926abd.ndjson.gz",
            "date=2024-01-29/1706536800-01926b00.ndjson.gz",
        )
    )
    assert on_s3.unsortable == on_disk.unsortable == ("date=2024-01-29/event-abc123.ndjson.gz",)
    # S3 listed date=2024-01-28 from its watermark on: what lies at or below it is not counted
    assert on_s3.started_after == ("date=2024-01-28",)
    assert on_s3.at_or_below == {}
    assert on_disk.at_or_below == {"date=2024-01-28": 4}
    swept = list_above(landing, watermark, start_after=False)
    assert swept.files == on_disk.files
    assert swept.at_or_below == on_disk.at_or_below
    assert swept.started_after == ()


def test_a_poll_sees_the_keys_written_since_the_previous_poll(landing: str) -> None:
    """s3fs caches listings and instances: each tick must still see every new key, in a
    partition walked as a directory and in one listed from its watermark."""
    first = "date=2024-01-28/1706450100-a.ndjson.gz"
    put(landing, first)
    assert list_above(landing).files == (first,)
    put(landing, "date=2024-01-28/1706450200-b.ndjson.gz", "date=2024-01-29/1706536800-c.ndjson.gz")
    assert len(list_above(landing).files) == 3
    watermark = FileWatermark.initial().advance([first])
    assert list_above(landing, watermark).files == (
        "date=2024-01-28/1706450200-b.ndjson.gz",
        "date=2024-01-29/1706536800-c.ndjson.gz",
    )
    put(landing, "date=2024-01-28/1706450300-d.ndjson.gz")
    assert "date=2024-01-28/1706450300-d.ndjson.gz" in list_above(landing, watermark).files
    assert storage.read_text(storage.join(landing, first)) == "{}\n"


#: (partitions, keys already processed per partition, new keys per partition)
LISTING_CASES = [
    (3, 2_500, [1_500, 0, 0]),
    (3, 2_500, [500, 500, 500]),
    (2, 5_000, [0, 0]),
    (1, 10_000, [2_001]),
    (4, 1_200, [1, 999, 1_000, 1_001]),
]


@pytest.mark.parametrize(("partitions", "old", "new"), LISTING_CASES)
def test_listing_after_the_watermark_costs_the_new_keys_not_the_processed_ones(
    landing: str, s3_storage: S3Server, partitions: int, old: int, new: list[int]
) -> None:
    """LIST requests the server received <= 1 (the root) + per partition max(1, ceil(new/1000));
    a full listing of the same partitions costs ceil((old + new) / 1000) each."""
    bucket = bucket_of(landing)
    names = {
        p: [f"{1706400000 + n:010d}-{p}.ndjson.gz" for n in range(old + new[p])]
        for p in range(partitions)
    }
    load_keys(
        bucket,
        (f"landing/date=2024-01-{10 + p}/{name}" for p in names for name in names[p]),
    )
    processed = [f"date=2024-01-{10 + p}/{names[p][old - 1]}" for p in range(partitions)]
    watermark = FileWatermark.initial().advance(processed)

    s3_storage.reset()
    result = list_above(landing, watermark)
    requests = s3_storage.count("LIST", bucket)

    expected = sorted(f"date=2024-01-{10 + p}/{name}" for p in names for name in names[p][old:])
    assert list(result.files) == expected
    bound = 1 + sum(max(1, math.ceil(count / 1000)) for count in new)
    assert requests <= bound, f"{requests} LIST requests for {sum(new)} new keys"
    assert result.paths_listed <= partitions + sum(new)

    s3_storage.reset()
    full = list_above(landing, watermark, start_after=False)
    assert full.files == result.files
    full_cost = 1 + sum(math.ceil((old + count) / 1000) for count in new)
    assert s3_storage.count("LIST", bucket) == full_cost


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param(999, 0, id="999 committed keys, none new: one request"),
        pytest.param(500, 499, id="a page of keys: one request, as StartAfter"),
        pytest.param(999, 1_001, id="two pages of new keys: one request more at most"),
    ],
)
def test_a_partition_listed_in_full_costs_at_most_one_request_more_and_counts_its_keys(
    landing: str, s3_storage: S3Server, old: int, new: int
) -> None:
    """``full``: a partition whose committed keys fit in one ListObjectsV2 page is listed from
    its first key on (a poll compares its committed files' ETags): the same files above the
    watermark, its keys at or below it counted and each one's ETag returned, for the requests
    StartAfter costs, one more at most."""
    bucket = bucket_of(landing)
    names = [f"{1706400000 + n:010d}-a.ndjson.gz" for n in range(old + new)]
    load_keys(bucket, (f"landing/date=2024-01-10/{name}" for name in names))
    watermark = FileWatermark.initial().advance([f"date=2024-01-10/{names[old - 1]}"])

    s3_storage.reset()
    after = list_above(landing, watermark)
    after_requests = s3_storage.count("LIST", bucket)
    s3_storage.reset()
    full = list_above(landing, watermark, full=frozenset({"date=2024-01-10"}))
    full_requests = s3_storage.count("LIST", bucket)

    assert full.files == after.files and len(full.files) == new
    assert full_requests <= after_requests + 1
    assert full.started_after == () and after.started_after == ("date=2024-01-10",)
    assert full.at_or_below == {"date=2024-01-10": old}
    assert len(full.signatures_at_or_below) == old
    assert all(":" in signature for signature in full.signatures_at_or_below.values())


@pytest.mark.parametrize("days", [25, 100, 250])
def test_the_root_of_a_day_layout_is_listed_from_the_horizon_whatever_the_days_landed(
    landing: str, s3_storage: S3Server, days: int
) -> None:
    """A poll lists the day folders from the listing horizon on (StartAfter on the root): the
    paths it lists stay the same at 25, 100 or 250 landing days, and it returns what a full
    listing returns."""
    bucket = bucket_of(landing)
    first = date(2024, 1, 1)
    folders = [f"date={first + timedelta(days=d):%Y-%m-%d}" for d in range(days)]
    load_keys(bucket, (f"landing/{folder}/1706400000-a.ndjson.gz" for folder in folders))
    ingested = [f"{folder}/1706400000-a.ndjson.gz" for folder in folders]
    put(landing, f"{folders[-1]}/1706400001-a.ndjson.gz")
    horizon = folders[-4]  # late_arrival_days 3
    plan = plan_listing(FileWatermark.initial().advance(ingested), horizon)

    s3_storage.reset()
    result = storage.list_files_above(landing, plan, suffixes=SUFFIXES, ordering=NameOrdering.AUTO)

    assert list(result.files) == [f"{folders[-1]}/1706400001-a.ndjson.gz"]
    assert result.paths_listed <= 4 + 9 + 2  # the days from the horizon (+ its 9 neighbours)
    full = storage.list_files_above(
        landing, plan, suffixes=SUFFIXES, ordering=NameOrdering.AUTO, start_after=False
    )
    assert full.files == result.files and full.paths_listed >= days


# ---------------------------------------------------------------------------- conditional writes


@pytest.fixture(params=["local", "s3"])
def text_root(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "local":
        yield str(tmp_path / "state")
    else:
        server = request.getfixturevalue("s3_storage")
        yield f"s3://{server.new_bucket()}/state"


def test_a_conditional_write_holds_only_while_the_file_is_as_it_was_read(text_root: str) -> None:
    uri = storage.join(text_root, "_watermarks/p_main_checkpoint.json")
    storage.write_text_atomic(uri, "v1", replacing=None)  # a first version: must not exist
    with pytest.raises(ConcurrentWriteError, match="exists now") as exists:
        storage.write_text_atomic(uri, "other v1", replacing=None)
    assert exists.value.uri == uri
    first = storage.read_versioned(uri)
    assert first is not None and first.text == "v1"
    storage.write_text_atomic(uri, "v2", replacing=first)
    with pytest.raises(ConcurrentWriteError, match=r"'.*p_main_checkpoint.json' was written"):
        storage.write_text_atomic(uri, "v2 from a stale read", replacing=first)
    assert storage.read_text(uri) == "v2"
    storage.write_text_atomic(uri, "v3")  # unconditional
    assert storage.read_text(uri) == "v3"


def test_conditional_writes_on_s3_send_if_none_match_and_if_match(s3_storage: S3Server) -> None:
    """A first version is put with If-None-Match: *, a replacement with If-Match on the ETag
    read (what the server received)."""
    bucket = s3_storage.new_bucket()
    uri = f"s3://{bucket}/state/checkpoint.json"
    s3_storage.reset()
    assert storage.replace_text_unless(uri, "1", keep=lambda current: False)
    first = storage.read_versioned(uri)
    assert first is not None
    assert storage.replace_text_unless(uri, "2", keep=lambda current: False)
    puts = [r for r in s3_storage.requests if r.method == "PUT"]
    assert [(r.headers, r.status) for r in puts] == [
        ({"if-none-match": "*"}, 200),
        ({"if-match": first.tag}, 200),
    ]


@pytest.mark.parametrize(
    ("mine", "theirs", "final", "mine_written"),
    [
        (5, 7, 7, False),  # the other writer's newer watermark stays: never backwards
        (9, 7, 9, True),  # mine is newer: after losing the race it is written over theirs
    ],
)
def test_two_writers_racing_on_one_provider_file_never_lose_the_newest(
    s3_storage: S3Server, mine: int, theirs: int, final: int, mine_written: bool
) -> None:
    """Writer A reads the file and, before A writes, writer B replaces it (B runs inside A's
    ``keep``: the moment between A's read and A's write). A's conditional write loses (412), A
    reads again and decides again on B's content: exactly one write wins each round, and the
    newest watermark is what stays. (On a local disk B would wait for A's lock instead.)"""
    bucket = s3_storage.new_bucket()
    provider = FileWatermarkProvider(f"s3://{bucket}/watermarks")
    provider.update_watermark("orders", "1", job_id="j", dataflow_run_id="r0")
    decisions: list[str] = []

    def a_keeps(current: str) -> bool:
        decisions.append(current)
        if len(decisions) == 1:
            assert provider.update_watermark(
                "orders", str(theirs), job_id="j", dataflow_run_id="rB", keep=newer_or_equal(theirs)
            )
        return int(current) >= mine

    s3_storage.reset()
    written = provider.update_watermark(
        "orders", str(mine), job_id="j", dataflow_run_id="rA", keep=a_keeps
    )
    assert written is mine_written
    assert decisions == ["1", str(theirs)]  # A decided again on B's watermark
    assert provider.get_watermark("orders") == str(final)
    assert s3_storage.count("PUT", bucket, status=412) == 1  # A's first write lost the race
    assert s3_storage.count("PUT", bucket, status=200) == 1 + mine_written


def newer_or_equal(value: int) -> Any:
    return lambda current: int(current) >= value


def test_threads_racing_on_one_checkpoint_leave_the_newest_and_never_go_backwards(
    s3_storage: S3Server,
) -> None:
    """Four writers, each replacing the checkpoint with its own increasing versions unless a
    newer one is there: whatever the interleaving, the last content is the newest version and
    every accepted write was newer than what it replaced (checked by the server's PUT order)."""
    uri = f"s3://{s3_storage.new_bucket()}/_watermarks/events_main_checkpoint.json"
    versions = {w: list(range(w, 80, 4)) for w in range(4)}
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        start.wait()
        for version in versions[w]:
            try:
                storage.replace_text_unless(
                    uri,
                    json.dumps({"v": version}),
                    keep=lambda t, v=version: json.loads(t)["v"] >= v,
                )
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert json.loads(storage.read_text(uri) or "{}") == {"v": 79}


# ------------------------------------------------------------------------------- Delta on S3

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string())])


def write_data_file(table_uri: str, name: str, ids: list[int]) -> str:
    relative = f"day=2024-01-01/{name}.parquet"
    storage.write_parquet(
        storage.join(table_uri, relative), pa.table({"id": ids}, schema=pa.schema([SCHEMA[0]]))
    )
    return relative


@pytest.mark.parametrize(
    ("app_ids", "outcomes"),
    [
        # one Dagster partition, two runs at once: exactly one lands, the other is stale
        (("wa/events/2024-01-01", "wa/events/2024-01-01"), {"landed": 1, "stale": 1}),
        # two partitions at once: both land (delta-rs rebases an append), or one is stale
        (("wa/events/2024-01-01", "wa/events/2024-01-02"), None),
    ],
)
def test_two_committers_at_once_on_s3_land_once_and_a_retry_adds_no_duplicate(
    s3_storage: S3Server, app_ids: tuple[str, str], outcomes: dict[str, int] | None
) -> None:
    table_uri = f"s3://{s3_storage.new_bucket()}/delta/events"
    seed = write_data_file(table_uri, "seed", [0])
    DeltaCommitter(table_uri).commit(
        describe_data_files(table_uri, [seed], ["day"]),
        schema=SCHEMA,
        partition_by=["day"],
        txns=[TxnVersion("wa/seed", 1)],
        custom_metadata={},
    )
    files = [write_data_file(table_uri, f"run{n}", [n * 10, n * 10 + 1]) for n in (1, 2)]
    start = threading.Barrier(2)
    results: dict[int, Any] = {}

    def run(n: int) -> None:
        committer = DeltaCommitter(table_uri)
        described = describe_data_files(table_uri, [files[n]], ["day"])
        txn = TxnVersion.next_of(app_ids[n], committer.transaction_version(app_ids[n]))
        start.wait()
        results[n] = committer.commit(
            described, schema=SCHEMA, partition_by=["day"], txns=[txn], custom_metadata={}
        )

    threads = [threading.Thread(target=run, args=(n,)) for n in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    landed = [n for n, outcome in results.items() if not outcome.skipped]
    stale = [n for n, outcome in results.items() if outcome.stale]
    assert len(landed) + len(stale) == 2, results
    if outcomes is not None:
        assert {"landed": len(landed), "stale": len(stale)} == outcomes, results
    for n in stale:  # the loser decides again from the log: its files are not there, it commits
        committer = DeltaCommitter(table_uri)
        assert not any(
            added.path.endswith(files[n])
            for c in committer.read_commits_after(0)
            for added in c.added
        )
        retry = committer.commit(
            describe_data_files(table_uri, [files[n]], ["day"]),
            schema=SCHEMA,
            partition_by=["day"],
            txns=[TxnVersion.next_of(app_ids[n], committer.transaction_version(app_ids[n]))],
            custom_metadata={},
        )
        assert not retry.skipped, retry
    table = DeltaCommitter(table_uri)._load_table()
    assert table is not None
    ids = sorted(table.to_pyarrow_table(columns=["id"]).column("id").to_pylist())
    assert ids == [0, 10, 11, 20, 21]  # every file once


# ------------------------------------------------------------------------ credentials never leak

DISTINCTIVE_SECRET = "wa-SeCrEt-0f9e8d7c6b5a4-do-not-leak"


def test_the_secret_is_in_no_error_log_commit_or_dump(
    s3_server: S3Server, caplog: pytest.LogCaptureFixture
) -> None:
    """A distinctive secret is configured; listings, reads, writes, a Delta commit and failing
    operations (a bucket that does not exist) run: the secret is in none of the exception texts,
    the log records (DEBUG, every logger), the Delta log's files, nor the configuration's repr
    and JSON dump."""
    caplog.set_level("DEBUG")
    block = {**s3_server.storage_block(), "secret_access_key": DISTINCTIVE_SECRET}
    text = yaml.safe_dump({"storage": block, "pipelines": [minimal_pipeline()]})
    previous = storage.installed()
    config = parse_config(text, env={}, base=Path.cwd(), origin="test config")
    seen: list[str] = [repr(config), str(config), config.model_dump_json(), repr(config.storage)]
    bucket = s3_server.new_bucket()
    table_uri = f"s3://{bucket}/delta/events"
    try:
        put(f"s3://{bucket}/landing", "date=2024-01-28/1706450100-a.ndjson.gz")
        list_above(f"s3://{bucket}/landing")
        storage.replace_text_unless(f"s3://{bucket}/_w/c.json", "{}", keep=lambda t: False)
        relative = write_data_file(table_uri, "a", [1])
        DeltaCommitter(table_uri).commit(
            describe_data_files(table_uri, [relative], ["day"]),
            schema=SCHEMA,
            partition_by=["day"],
            txns=[TxnVersion("wa/events/2024-01-28", 1)],
            custom_metadata={"watermark_assets": "{}"},
        )
        missing = "s3://no-such-bucket-wa/delta/events"
        failures = [
            lambda: storage.write_text_atomic(f"{missing}/x.json", "{}", replacing=None),
            lambda: storage.write_parquet(f"{missing}/a.parquet", pa.table({"id": [1]})),
            lambda: DeltaCommitter(missing).commit(
                [],
                schema=SCHEMA,
                partition_by=["day"],
                txns=[TxnVersion("a", 1)],
                custom_metadata={},
            ),
            lambda: describe_data_files(missing, ["day=2024-01-01/a.parquet"], ["day"]),
        ]
        for failing in failures:
            try:
                failing()
            except Exception as exc:
                seen.extend(chain_texts(exc))
            else:  # pragma: no cover
                pytest.fail("an operation on a bucket that does not exist succeeded")
    finally:
        storage.configure(previous)
    client = s3_server.client()
    for item in client.list_objects_v2(Bucket=bucket, Prefix="delta/events/_delta_log/")[
        "Contents"
    ]:
        seen.append(client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read().decode())
    seen.extend(record.getMessage() for record in caplog.records)
    seen.extend(repr(record.args) for record in caplog.records)
    assert len(seen) > 10
    assert MASK in seen[0]
    leaked = [text[:200] for text in seen if DISTINCTIVE_SECRET in text]
    assert leaked == []


def chain_texts(error: BaseException) -> list[str]:
    """str and repr of an exception and of every exception it chains."""
    texts: list[str] = []
    current: BaseException | None = error
    while current is not None:
        texts += [str(current), repr(current)]
        current = current.__cause__ or current.__context__
    return texts


# ------------------------------------------------------------------- counting staged Parquet files

#: A folder Spark wrote, as (relative path, the `_dagster_partition` values of its rows): the
#: `.crc` file and the leftover under `_temporary` are no data (Spark would not read them).
STAGED = [
    ("event_date=2024-01-28/part-00000-a.snappy.parquet", ["2024-01-28", "2024-01-28"]),
    ("event_date=2024-01-29/part-00001-b.snappy.parquet", ["2024-01-28", "2024-01-29 10:00"]),
    ("event_date=2024-01-29/.part-00001-b.snappy.parquet.crc", ["2024-01-29 10:00"]),
    ("_temporary/0/part-00002-c.snappy.parquet", ["2024-01-28"]),
]


def test_a_staged_folder_s_rows_are_counted_by_one_column(text_root: str) -> None:
    for relative, keys in STAGED:
        table = pa.table({"_dagster_partition": keys, "id": list(range(len(keys)))})
        storage.write_parquet(storage.join(text_root, relative), table)
        # the same rows with the column in their folder, as a table partitioned by it writes them
        for key in set(keys):
            folder = relative.replace("part-", f"_dagster_partition={quote(key, safe='')}/part-")
            rows = pa.table({"id": [i for i, k in enumerate(keys) if k == key]})
            storage.write_parquet(storage.join(f"{text_root}_by_key", folder), rows)

    expected = {"2024-01-28": 3, "2024-01-29 10:00": 1}
    assert storage.count_values(text_root, "_dagster_partition") == expected
    by_key = storage.count_values(f"{text_root}_by_key", "_dagster_partition", in_path=True)
    assert by_key == expected
    assert storage.count_values(f"{text_root}_absent", "_dagster_partition") == {}


def test_a_store_arrow_has_no_filesystem_for_is_counted_through_fsspec() -> None:
    root = f"memory://staged-{uuid.uuid4().hex}"
    for relative, keys in STAGED:
        table = pa.table({"_dagster_partition": keys, "id": list(range(len(keys)))})
        storage.write_parquet(storage.join(root, relative), table)
    assert storage.arrow_filesystem(root) is None
    assert storage.count_values(root, "_dagster_partition") == {
        "2024-01-28": 3,
        "2024-01-29 10:00": 1,
    }
