"""The Spark resource: dagster-pyspark's lazy session, plus the Java check and this interpreter."""

from __future__ import annotations

from typing import Any

from dagster_pyspark import LazyPySparkResource

from watermark_assets.spark.session import spark_from_settings


class WatermarkSparkResource(LazyPySparkResource):
    """A Spark session started on first use (runs with nothing to ingest never start Spark).

    ``spark_config`` holds flat ``spark.*`` settings (``SparkConfig.settings()``): with
    ``spark.remote`` (``sc://host:port``) the session is a Spark Connect client and no JVM starts
    in the run's process; otherwise ``spark.master`` (default ``local[2]``), Java 17+ is checked
    before Spark starts, and Spark's Python workers run the driver's interpreter.
    """

    def _init_session(self) -> None:
        if self._spark_session is None:
            settings = {str(k): str(v) for k, v in self.spark_config.items()}
            self._spark_session = spark_from_settings(settings)

    @property
    def spark_session(self) -> Any:
        self._init_session()
        return self._spark_session
