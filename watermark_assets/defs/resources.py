"""The Spark resource: dagster-pyspark's lazy session, plus the Java check and this interpreter."""

from __future__ import annotations

from typing import Any

from dagster_pyspark import LazyPySparkResource

from watermark_assets.spark.session import get_spark


class WatermarkSparkResource(LazyPySparkResource):
    """A Spark session started on first use (runs with nothing to ingest never start Spark).

    ``spark_config`` holds ``spark.*`` settings; ``spark.master`` defaults to ``local[2]``. Java 17+
    is checked before Spark starts, and Spark's Python workers run the driver's interpreter.
    """

    def _init_session(self) -> None:
        if self._spark_session is None:
            conf = {str(k): str(v) for k, v in self.spark_config.items()}
            master = conf.pop("spark.master", "local[2]")
            self._spark_session = get_spark(master, conf)

    @property
    def spark_session(self) -> Any:
        self._init_session()
        return self._spark_session
