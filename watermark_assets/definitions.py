"""The code location: ``dagster dev`` loads ``defs`` from here (see workspace.yaml).

In a run worker, Spark starts right after the configuration is read, before the rest of the code
location is imported (``defs/run_worker.py``): the JVM's start-up runs beside those imports.
"""

from watermark_assets.config import load_config
from watermark_assets.defs.run_worker import prestart_spark, spark_settings

config = load_config()
prestart_spark(config.spark.prestart, spark_settings(config))  # only in a run worker

from watermark_assets.defs import build_definitions  # noqa: E402  (after the prestart)

defs = build_definitions(config)
