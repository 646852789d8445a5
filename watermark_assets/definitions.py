"""The code location: ``dagster dev`` (workspace.yaml) and ``dg dev`` / ``dg check defs``
([tool.dg] in pyproject.toml) load ``defs`` from here.

One configuration makes it: the components declared in ``watermark_assets/dg_defs/`` (e.g. a
``defs.yaml`` of type ``watermark_assets.WatermarkPipelines``, written by ``dg scaffold defs``)
when that folder declares any, else the configuration file ($WATERMARK_ASSETS_CONFIG, else the
demo); both at once (components and $WATERMARK_ASSETS_CONFIG set) is refused. Both are built by
``defs/build.py``.

In a run worker, Spark starts right after the configuration file is read, before the rest of the
code location is imported (``defs/run_worker.py``): the JVM's start-up runs beside those imports.
Python's cyclic garbage collector pauses while the code location loads
(:func:`~watermark_assets.loading.collector_paused`).
"""

import os
from pathlib import Path

from watermark_assets.loading import collector_paused

#: This repository's ``dg`` defs folder ([tool.dg.project] defs_module).
DG_DEFS = Path(__file__).parent / "dg_defs"


def declared_components(folder: Path) -> list[str]:
    """What ``folder`` declares, as Dagster's loader reads it: its sub-folders and Python
    modules (not ``__init__.py``, bytecode or hidden entries) and a ``defs.yaml`` of its own."""
    if not folder.is_dir():
        return []
    return sorted(
        p.name
        for p in folder.iterdir()
        if not p.name.startswith((".", "__"))
        and (p.is_dir() or p.suffix == ".py" or p.name in ("defs.yaml", "defs.yml"))
    )


with collector_paused():
    from watermark_assets.config import CONFIG_ENV_VAR
    from watermark_assets.exceptions import ConfigError

    components = declared_components(DG_DEFS)
    if components and os.environ.get(CONFIG_ENV_VAR):
        raise ConfigError(
            f"{DG_DEFS} declares components ({', '.join(components)}) and {CONFIG_ENV_VAR} names "
            f"{os.environ[CONFIG_ENV_VAR]!r}: the code location serves one configuration; unset "
            f"{CONFIG_ENV_VAR} to serve the components, or move them out of {DG_DEFS.name}/ to "
            "serve the file",
            key=CONFIG_ENV_VAR,
            value=os.environ[CONFIG_ENV_VAR],
        )
    if components:
        from dagster import load_from_defs_folder

        defs = load_from_defs_folder(path_within_project=DG_DEFS)
    else:
        from watermark_assets.config import load_config
        from watermark_assets.defs.run_worker import prestart_spark, spark_settings

        try:
            config = load_config()
        except ConfigError as refused:
            # Dagster prints a load error with its stack; the message says everything (one block
            # per problem), so the stack is cut to this one line.
            raise refused.with_traceback(None) from refused.__cause__  # the problems: above
        prestart_spark(config.spark.prestart, spark_settings(config))  # only in a run worker
        if not os.environ.get(CONFIG_ENV_VAR):  # the demo: its HTTP API, served while loaded
            from watermark_assets.demo.api import serve_for_code_location

            DEMO_API = serve_for_code_location(os.environ)

        from watermark_assets.defs import build_definitions

        defs = build_definitions(config)
