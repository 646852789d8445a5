"""What a code location shows, as plain data: compared between the YAML file's path and the
Component's, in this process and in subprocesses (``python tests/_defs_summary.py`` prints the
summary of ``watermark_assets.definitions`` as JSON).
"""

from __future__ import annotations

import json
from typing import Any

from dagster import Definitions

#: Metadata Dagster's component loader adds on its own (where a definition was declared).
COMPONENT_METADATA = ("dagster/component_origin", "dagster/code_references")


def summary(defs: Definitions) -> dict[str, Any]:
    """Every pipeline's asset (key, description, partitions, freshness policy, metadata, kinds,
    tags), the source locations' external assets,
    check, job, sensor, schedule and resource key of ``defs``."""
    repository = defs.get_repository_def()
    assets = {
        spec.key.to_user_string(): {
            "description": spec.description,
            "partitions": repr(spec.partitions_def),
            "freshness": repr(spec.freshness_policy),
            "metadata": {
                key: repr(value)
                for key, value in sorted(spec.metadata.items())
                if key not in COMPONENT_METADATA
            },
            "kinds": sorted(spec.kinds),
            "tags": dict(sorted(spec.tags.items())),
        }
        for spec in defs.resolve_all_asset_specs()
        if spec.key.path[0] != "source"
    }
    return {
        "assets": dict(sorted(assets.items())),
        # the external assets of the source locations the pipelines read (defs/upstreams.py)
        "sources": sorted(
            spec.key.to_user_string()
            for spec in defs.resolve_all_asset_specs()
            if spec.key.path[0] == "source"
        ),
        "checks": sorted(
            f"{key.asset_key.to_user_string()}:{key.name}"
            for key in repository.asset_graph.asset_check_keys
        ),
        "jobs": sorted(name for name in repository.job_names if not name.startswith("__")),
        "sensors": sorted(sensor.name for sensor in repository.sensor_defs),
        "schedules": sorted(
            f"{schedule.name} {schedule.cron_schedule}" for schedule in repository.schedule_defs
        ),
        "resources": sorted(repository.get_top_level_resources()),
    }


if __name__ == "__main__":
    from watermark_assets.definitions import defs

    print(json.dumps(summary(defs), sort_keys=True))
