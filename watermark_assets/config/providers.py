"""Where a column pipeline's watermark is kept (``watermark.provider:``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import ConfigDict, Field

from watermark_assets import names
from watermark_assets.config import registry
from watermark_assets.config.base import Model as _Model

if TYPE_CHECKING:
    from watermark_assets.providers.base import CommitCarriedProvider, WatermarkProvider


class DeltaMetadataProviderConfig(_Model):
    """The watermark travels in the data commit's custom metadata (default): one atomic commit."""

    type: Literal["delta_metadata"] = "delta_metadata"

    def build(
        self, table_uri: str, pipeline: str | None = None
    ) -> WatermarkProvider | CommitCarriedProvider:
        """The provider over the pipeline's target table."""
        return registry.build("provider", self, table_uri, pipeline)  # type: ignore[no-any-return]


class FileProviderConfig(_Model):
    """One JSON file per pipeline under ``uri``, written atomically after the commit."""

    type: Literal["file"] = "file"
    uri: str = Field(description="Folder of the watermark files (local path or fsspec URI).")

    def build(
        self, table_uri: str, pipeline: str | None = None
    ) -> WatermarkProvider | CommitCarriedProvider:
        """The provider (``table_uri`` unused: the file is its own store)."""
        return registry.build("provider", self, table_uri, pipeline)  # type: ignore[no-any-return]


class PostgresProviderConfig(_Model):
    """One row per pipeline in a PostgreSQL table (created on first use), after the commit."""

    type: Literal["postgres"] = "postgres"
    conninfo: str = Field(
        description="libpq connection string or URI, e.g. "
        "'postgresql://postgres@127.0.0.1:5432/test' (use ${ENV} for secrets)."
    )
    table: str = Field(default=names.POSTGRES_TABLE, description="Table of the watermarks.")
    db_schema: str | None = Field(
        default=None, alias="schema", description="Schema of that table (default: search_path)."
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def build(
        self, table_uri: str, pipeline: str | None = None
    ) -> WatermarkProvider | CommitCarriedProvider:
        """The provider (``table_uri`` unused: the database is its own store)."""
        return registry.build("provider", self, table_uri, pipeline)  # type: ignore[no-any-return]


ProviderConfig = Annotated[
    DeltaMetadataProviderConfig | FileProviderConfig | PostgresProviderConfig,
    Field(discriminator="type"),
]


_PROVIDER_TYPES = ("delta_metadata", "file", "postgres")
