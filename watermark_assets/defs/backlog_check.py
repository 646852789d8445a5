"""The asset check ``backlog_within_limits``: a pipeline's backlog numbers against the limits of
its ``backlog_limits:`` key (``config/backlog.py``).

Dagster's ``build_metadata_bounds_checks`` reads the numbers of the asset's latest
materialization; a backlog is measured where no run happens (a file-path pipeline's sensor tick,
on an observation), so the sensor reports the check's evaluation itself beside its observation,
and an event-time run reports it beside its materialization. One verdict function serves both.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    MetadataValue,
    asset_check,
)

from watermark_assets import vocabulary as v
from watermark_assets.config import Pipeline
from watermark_assets.config.backlog import BacklogLimits, FileBacklogLimits
from watermark_assets.core.clock import Clock
from watermark_assets.defs.backlog import (
    BYTES_PENDING,
    FILES_PENDING,
    LISTING_CAPPED,
    OLDEST_PENDING_TIME,
    Backlog,
)

BACKLOG_CHECK = "backlog_within_limits"

#: the measured value of each limit's name is a number of seconds
_SECONDS = ("oldest_pending_age", "event_time_lag")


@dataclass(frozen=True)
class BacklogVerdict:
    """The backlog against its limits: ``breaches`` names each limit passed."""

    passed: bool
    breaches: tuple[str, ...]
    metadata: Mapping[str, Any]
    severity: AssetCheckSeverity

    @property
    def description(self) -> str:
        if self.passed:
            return "The backlog is within its limits."
        return "Backlog over its limits: " + "; ".join(self.breaches)

    def _said(self, asset_key: AssetKey) -> dict[str, Any]:
        return {
            "asset_key": asset_key,
            "check_name": BACKLOG_CHECK,
            "passed": self.passed,
            "metadata": dict(self.metadata),
            "severity": self.severity,
            "description": self.description,
        }

    def evaluation(self, asset_key: AssetKey) -> AssetCheckEvaluation:
        """For a sensor's ``SensorResult(asset_events=...)``."""
        return AssetCheckEvaluation(**self._said(asset_key))

    def result(self, asset_key: AssetKey) -> AssetCheckResult:
        """For a run's asset body that declares :func:`backlog_check_spec`."""
        return AssetCheckResult(**self._said(asset_key))


def _shown(name: str, value: float) -> str:
    if name in _SECONDS:
        return f"{value:,.0f} s"
    return f"{value:,.0f}"


def backlog_verdict(limits: BacklogLimits, measured: Mapping[str, float]) -> BacklogVerdict:
    """``measured``: the backlog's numbers by limit name (durations in seconds). A limit whose
    number was not measured (no file pending has a landing time) is not passed."""
    breaches = []
    metadata: dict[str, Any] = {}
    for name, maximum in limits.maxima().items():
        value = measured.get(name)
        metadata[f"{name}/limit"] = MetadataValue.float(maximum)
        if value is None:
            continue
        metadata[name] = MetadataValue.float(float(value))
        if value > maximum:
            breaches.append(f"{name} {_shown(name, value)} > limit {_shown(name, maximum)}")
    severity = AssetCheckSeverity.ERROR if limits.severity == "error" else AssetCheckSeverity.WARN
    return BacklogVerdict(not breaches, tuple(breaches), metadata, severity)


def file_backlog_verdict(
    limits: FileBacklogLimits, backlog: Backlog, now: datetime
) -> BacklogVerdict:
    """A file-path pipeline's backlog (one sensor tick's listing) against its limits."""
    measured: dict[str, float] = {
        "files_pending": backlog.files,
        "bytes_pending": backlog.bytes,
    }
    if backlog.oldest is not None:
        measured["oldest_pending_age"] = backlog.age_seconds(now)
    return backlog_verdict(limits, measured)


def backlog_check_spec(asset_key: AssetKey, limits: BacklogLimits) -> AssetCheckSpec:
    """The check's spec on a pipeline's asset (its description names the limits)."""
    named = ", ".join(f"{name} <= {value}" for name, value in _limit_texts(limits).items())
    return AssetCheckSpec(
        BACKLOG_CHECK,
        asset=asset_key,
        description=f"The backlog is within its limits ({named}); evaluated by the pipeline's "
        "sensor on every tick that measures it, or by its runs.",
    )


def _limit_texts(limits: BacklogLimits) -> dict[str, str]:
    return {
        name: str(getattr(limits, name))
        for name in limits.limit_names()
        if getattr(limits, name) is not None
    }


def latest_backlog(instance: Any, asset_key: AssetKey, *, scan: int = 50) -> Backlog | None:
    """The backlog of the newest observation that measured it (the sensor's), or None."""
    records = instance.fetch_observations(asset_key, limit=scan).records
    for record in records:
        observation = record.asset_observation
        entries = {} if observation is None else observation.metadata
        if FILES_PENDING not in entries:
            continue
        oldest = entries.get(OLDEST_PENDING_TIME)
        return Backlog(
            files=int(entries[FILES_PENDING].value),
            bytes=int(entries[BYTES_PENDING].value),
            oldest=None if oldest is None else v.parse_time_text(str(oldest.value)),
            oldest_file=None,
            capped=bool(getattr(entries.get(LISTING_CAPPED), "value", False)),
        )
    return None


def build_file_backlog_check(
    pipeline: Pipeline, asset_key: AssetKey, clock: Clock
) -> AssetChecksDefinition | None:
    """``backlog_within_limits`` of a file-path pipeline with ``backlog_limits`` (else None).
    Its sensor reports an evaluation on every tick whose backlog or verdict changed; executed
    by hand, it evaluates the sensor's latest measurement at the current time (the age of the
    oldest waiting file grows between ticks)."""
    limits = pipeline.backlog_limits
    if limits is None:
        return None
    spec = backlog_check_spec(asset_key, limits)

    @asset_check(
        asset=asset_key,
        name=BACKLOG_CHECK,
        description=spec.description,
        blocking=False,
    )
    def backlog_within_limits(context: AssetCheckExecutionContext) -> AssetCheckResult:
        backlog = latest_backlog(context.instance, asset_key)
        if backlog is None:
            return AssetCheckResult(
                passed=True,
                description=f"No backlog measured yet: {pipeline.name}_sensor measures it on "
                "its ticks (turn it on, or run `watermark-assets run-sensors`).",
            )
        return file_backlog_verdict(limits, backlog, clock()).result(asset_key)

    return backlog_within_limits
