"""The code location: ``dagster dev`` (workspace.yaml) and ``dg dev`` / ``dg check defs``
([tool.dg] in pyproject.toml) load ``defs`` from here.

One configuration makes it: the components declared in ``watermark_assets/dg_defs/`` (e.g. a
``defs.yaml`` of type ``watermark_assets.WatermarkPipelines``, written by ``dg scaffold defs``)
when that folder declares anything, else the configuration file ($WATERMARK_ASSETS_CONFIG, else
the demo). Both are built by ``defs/build.py``.

In a run worker, Spark starts right after the configuration file is read, before the rest of the
code location is imported (``defs/run_worker.py``): the JVM's start-up runs beside those imports.
"""

from pathlib import Path

#: This repository's ``dg`` defs folder ([tool.dg.project] defs_module).
DG_DEFS = Path(__file__).parent / "dg_defs"


def declares_components(folder: Path) -> bool:
    """True when ``folder`` holds anything but its ``__init__.py`` (and bytecode)."""
    ignored = {"__init__.py", "__pycache__"}
    return folder.is_dir() and any(p.name not in ignored for p in folder.iterdir())


if declares_components(DG_DEFS):
    from dagster import load_from_defs_folder

    defs = load_from_defs_folder(path_within_project=DG_DEFS)
else:
    from watermark_assets.config import load_config
    from watermark_assets.defs.run_worker import prestart_spark, spark_settings

    config = load_config()
    prestart_spark(config.spark.prestart, spark_settings(config))  # only in a run worker

    from watermark_assets.defs import build_definitions

    defs = build_definitions(config)
