"""The ``spark:`` block: the Spark session all ingestion runs share."""

from __future__ import annotations

from pydantic import Field, model_validator

from watermark_assets.config.base import Model as _Model
from watermark_assets.spark.cds import ENABLED_KEY
from watermark_assets.spark.session import connect_address, with_delta_spark


class SparkConfig(_Model):
    """The Spark session all ingestion runs share (one per process)."""

    master: str = Field(
        default="local[2]",
        description="Spark master URL: local[N], spark://HOST:7077, yarn, k8s://...",
    )
    remote: str | None = Field(
        default=None,
        description="Spark Connect server, sc://HOST:PORT: runs start no JVM of their own "
        "(instead of master)",
    )
    conf: dict[str, str] = Field(
        default_factory=dict, description="Any spark.* setting, e.g. for S3A or a cluster."
    )
    delta_spark: bool = Field(
        default=False,
        description="Add delta-spark (Maven io.delta:delta-spark_2.13:<installed delta-spark "
        "version>) and its SQL extension and catalog, for format('delta') in Spark",
    )
    prestart: bool = Field(
        default=True,
        description="In a Dagster run worker, start the Spark session in the background as the "
        "code location loads (the JVM starts beside the imports and the planning); false: on "
        "first use",
    )
    class_data_sharing: bool = Field(
        default=True,
        description="Start the driver JVM with Spark's classes mapped from a class-data sharing "
        "archive (built once per Java and Spark, in the cache folder: about half the start-up); "
        "false: read them from the jars",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> SparkConfig:
        for key in self.conf:
            if not key.startswith("spark."):
                raise ValueError(
                    f"spark.conf key {key!r} is not a Spark setting; Spark settings start with "
                    "'spark.' (e.g. spark.executor.memory)"
                )
        for key, field in (("spark.master", "master"), ("spark.remote", "remote")):
            if key in self.conf:
                raise ValueError(
                    f"spark.conf holds {key}={self.conf[key]!r}; write it as spark.{field}"
                )
        if self.remote is None:
            return self
        if "master" in self.model_fields_set:
            raise ValueError(
                f"spark.master {self.master!r} and spark.remote {self.remote!r} are both set; "
                "they exclude each other: keep master (this process starts Spark) or remote "
                "(a Spark Connect server runs it), not both"
            )
        connect_address(self.remote)  # ValueError: names the URL and the form sc://HOST:PORT
        if self.delta_spark:
            raise ValueError(
                f"spark.delta_spark: true with spark.remote {self.remote!r}: a Connect client "
                "cannot add jars to a running server; start the server with delta-spark "
                "(spark-submit --packages io.delta:delta-spark_2.13:VERSION --conf "
                "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension --conf "
                "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog"
                ") and set delta_spark: false"
            )
        return self

    def settings(self) -> dict[str, str]:
        """Every setting as flat ``spark.*`` keys, for ``spark.session.spark_from_settings``:
        ``spark.master`` or ``spark.remote``, ``conf``, and delta-spark's when asked."""
        where = {"spark.remote": self.remote} if self.remote else {"spark.master": self.master}
        merged = {**where, **self.conf}
        if not self.class_data_sharing:
            merged[ENABLED_KEY] = "false"
        return with_delta_spark(merged) if self.delta_spark else merged
