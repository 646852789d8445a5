"""The Spark resource: a session started on first use by ``spark.session.start_spark``."""

from __future__ import annotations

import time
from typing import Any

from dagster import ConfigurableResource, get_dagster_logger
from pydantic import PrivateAttr

from watermark_assets.spark.session import start_spark


class WatermarkSparkResource(ConfigurableResource):  # type: ignore[type-arg]
    """A Spark session started on first use, or earlier by ``spark.session.prestart`` (which a
    run worker does when it loads the code location: ``defs/run_worker.py``).

    ``spark_config`` holds flat ``spark.*`` settings (``SparkConfig.settings()``): with
    ``spark.remote`` (``sc://host:port``) the session is a Spark Connect client and no JVM starts
    in the run's process; otherwise ``spark.master`` (default ``local[2]``), ``java`` is looked
    for before Spark starts (a Java below 17 is named if the JVM does not start), and Spark's
    Python workers run the driver's interpreter.

    The same shape as dagster-pyspark's ``LazyPySparkResource`` (``spark_config``,
    ``spark_session``, ``spark_context``) without importing it: that package builds Dagster's
    schema of every Spark property when imported, a tenth of a second or more of every load
    of the code location (a run worker's, a code server's) for a schema nothing here uses.
    """

    spark_config: dict[str, Any]
    _spark_session: Any = PrivateAttr(default=None)

    def _init_session(self) -> None:
        if self._spark_session is None:
            settings = {str(k): str(v) for k, v in self.spark_config.items()}
            began = time.perf_counter()
            self._spark_session, waited = start_spark(settings)
            if waited is None:
                how = f"started in {time.perf_counter() - began:.1f}s"
            else:
                how = (
                    "started in the background while the run worker loaded the code location; "
                    f"the run waited {waited:.1f}s for it"
                )
            get_dagster_logger().info(f"Spark session ready: {how}")

    @property
    def spark_session(self) -> Any:
        self._init_session()
        return self._spark_session

    @property
    def spark_context(self) -> Any:
        return self.spark_session.sparkContext
