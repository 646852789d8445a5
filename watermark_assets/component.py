"""The pipelines as a Dagster Component: ``watermark_assets.WatermarkPipelines``.

A ``defs.yaml`` in a ``dg`` project's defs folder::

    type: watermark_assets.WatermarkPipelines
    attributes:          # exactly what the YAML file holds: spark, storage, pipelines
      pipelines:
        - name: events
          ...

``attributes`` is the configuration file's mapping, read the same way (``config.parse_config``:
the same models, the same messages, ``${VAR}`` / ``${VAR:-default}`` from the environment,
relative paths against the working directory); Dagster's ``{{ env.VAR }}`` and
``{{ context.project_root }}`` templates are rendered first. ``dg check yaml`` / ``dg check
defs`` check it against the JSON schema of the same models (:class:`PipelinesAttributes`). The
definitions are :func:`~watermark_assets.defs.build.build_definitions`'s, the one builder of
the YAML file's path too.

Several components may share a code location when their ``spark`` and ``storage`` agree (its
runs share one Spark session and one storage configuration: :func:`refuse_other_settings`); an
event-time pipeline reads pipelines of its own component.

``dg scaffold defs watermark_assets.WatermarkPipelines PATH`` writes a ``defs.yaml`` holding one
file-path pipeline to edit (:class:`PipelinesScaffolder`).
"""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path
from typing import Any, Self

import yaml
from dagster import (
    Component,
    ComponentLoadContext,
    ComponentTypeSpec,
    Definitions,
    Scaffolder,
    ScaffoldRequest,
    scaffold_with,
)
from pydantic import BaseModel, RootModel

from watermark_assets.config import ProjectConfig, parse_config
from watermark_assets.exceptions import ConfigError

#: The type name a ``defs.yaml`` gives (``watermark_assets/__init__.py`` exports the class).
TYPE_NAME = "watermark_assets.WatermarkPipelines"


class PipelinesAttributes(RootModel[dict[str, Any]]):
    """``defs.yaml``'s ``attributes``: the configuration file's mapping, kept as written and
    parsed by :func:`~watermark_assets.config.parse_config` when the component loads. Its JSON
    schema (what ``dg check yaml`` checks and the UI documents) is
    :class:`~watermark_assets.config.ProjectConfig`'s, its unions written as ``if``/``then`` on
    their tag (:func:`checkable_schema`)."""

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return checkable_schema(ProjectConfig.model_json_schema(*args, **kwargs))


def checkable_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with each union picked by its tag (``if type is X then X's model``) instead
    of ``oneOf``, so that a JSON-schema checker names the key at fault (``'tabel' was
    unexpected``) rather than "not valid under any of the given schemas". A pipeline's model is
    picked as the configuration picks it: ``watermark.kind``, else the kind its ``source.type``
    implies; a value no tag matches is left to the configuration's own message at load."""

    def pick(node: Any) -> Any:
        if isinstance(node, list):
            return [pick(item) for item in node]
        if not isinstance(node, dict):
            return node
        node = {key: pick(value) for key, value in node.items()}
        tag = node.get("discriminator")
        if isinstance(tag, dict) and "oneOf" in node and "mapping" in tag:
            name, mapping = tag["propertyName"], tag["mapping"]
            rest = {k: v for k, v in node.items() if k not in ("oneOf", "discriminator")}
            rules = [_when({name: {"const": value}}, ref) for value, ref in mapping.items()]
            return {**rest, "type": "object", "required": [name], "allOf": rules}
        return node

    checked = pick(schema)
    checked["properties"]["pipelines"]["items"] = _pipeline_rules()
    return dict(checked)


def _when(properties: dict[str, Any], ref: str) -> dict[str, Any]:
    """If the (present) ``properties`` match, the object is checked against ``ref``."""
    return {"if": {"properties": properties}, "then": {"$ref": ref}}


def _pipeline_rules() -> dict[str, Any]:
    """A pipeline: the model of its ``watermark.kind``, else of the kind its ``source.type``
    implies (the first kind of ``WATERMARK_KINDS`` that takes it, as the configuration does)."""
    from typing import get_args

    from watermark_assets.config import WATERMARK_KINDS, AnyPipeline

    models = {}
    for model in get_args(AnyPipeline):
        watermark = model.model_fields["watermark"].annotation
        (kind,) = get_args(watermark.model_fields["kind"].annotation)
        models[kind] = f"#/$defs/{model.__name__}"
    kind_written: dict[str, Any] = {
        "required": ["watermark"],
        "properties": {"watermark": {"type": "object", "required": ["kind"]}},
    }
    rules = []
    for kind, ref in models.items():
        rule = _when({"watermark": {"properties": {"kind": {"const": kind}}}}, ref)
        rule["if"]["allOf"] = [kind_written]
        rules.append(rule)
    implied: dict[str, str] = {}
    for kind, source_types in WATERMARK_KINDS.items():
        for source_type in source_types:
            implied.setdefault(source_type, kind)
    for source_type, kind in implied.items():
        rule = _when({"source": {"properties": {"type": {"const": source_type}}}}, models[kind])
        rule["if"]["required"] = ["source"]
        rule["if"]["not"] = kind_written
        rules.append(rule)
    return {"type": "object", "required": ["name", "source"], "allOf": rules}


class PipelinesScaffolderParams(BaseModel):
    """``dg scaffold defs ... --name NAME``: the example pipeline's name (default: the folder's)."""

    name: str | None = None


def _pipeline_name(request: ScaffoldRequest[PipelinesScaffolderParams]) -> str:
    if request.params.name:
        return request.params.name
    name = re.sub(r"[^a-z0-9_]+", "_", request.target_path.name.lower()).strip("_")
    return name if re.match(r"^[a-z]", name) else f"pipeline_{name}".rstrip("_")


class PipelinesScaffolder(Scaffolder[PipelinesScaffolderParams]):
    """Writes ``defs.yaml`` with one file-path pipeline: NDJSON files landing in
    ``data/landing/NAME/date=YYYY-MM-DD/``, committed to the Delta table ``data/delta/NAME``."""

    @classmethod
    def get_scaffold_params(cls) -> type[PipelinesScaffolderParams]:
        return PipelinesScaffolderParams

    def scaffold(self, request: ScaffoldRequest[PipelinesScaffolderParams]) -> None:
        if request.scaffold_format != "yaml":
            raise ValueError(
                f"{TYPE_NAME} is declared in YAML (defs.yaml); scaffold it without --format python"
            )
        name = _pipeline_name(request)
        text = textwrap.dedent(
            f"""\
            type: {request.type_name}

            # The keys of watermark_assets' configuration file (spark, storage, pipelines),
            # checked by the same models. ${{VAR}} and ${{VAR:-default}} read the environment;
            # relative paths are resolved against the working directory.
            attributes:
              pipelines:
                - name: {name}
                  description: NDJSON files landing in one folder per day.
                  source:
                    type: files
                    uri: ${{WATERMARK_ASSETS_DATA:-data}}/landing/{name}
                    format: ndjson
                    schema: "id BIGINT, updated_at TIMESTAMP"
                  watermark:
                    partition_template: "date=%Y-%m-%d"
                  table:
                    uri: ${{WATERMARK_ASSETS_DATA:-data}}/delta/{name}
                  partitions:
                    granularity: daily
                    start: "2024-01-01"
            """
        )
        path = request.target_path / "defs.yaml"
        mode = "a" if request.append else "w"
        with path.open(mode, encoding="utf-8") as file:
            file.write(("---\n" if request.append else "") + text)


@scaffold_with(PipelinesScaffolder)
class WatermarkPipelines(Component):
    """Watermark pipelines (files, column, time, unit and event-time watermarks) ingesting on
    Spark into Delta Lake, exactly once: per pipeline an asset, its job, checks and sensor (and a
    schedule for time watermarks). ``attributes`` holds watermark_assets' configuration file
    (``spark``, ``storage``, ``pipelines``)."""

    def __init__(self, config: ProjectConfig, origin: str = "WatermarkPipelines") -> None:
        self.config = config
        self.origin = origin  # how messages name it: its defs.yaml

    @classmethod
    def get_model_cls(cls) -> type[BaseModel]:
        return PipelinesAttributes

    @classmethod
    def get_spec(cls) -> ComponentTypeSpec:
        return ComponentTypeSpec(
            tags=["spark", "delta", "ingestion"],
            produces=["asset", "asset_check", "job", "sensor", "schedule", "resource"],
        )

    @classmethod
    def load(cls, attributes: BaseModel | None, context: ComponentLoadContext) -> Self:
        """Render Dagster's templates, then read the mapping as the YAML file is read."""
        from dagster.components.resolved.scopes import LoadContextScope

        raw = attributes.root if isinstance(attributes, PipelinesAttributes) else {}
        templates = LoadContextScope(context)  # type: ignore[no-untyped-call]
        scope = context.with_rendering_scope({"context": templates})
        rendered = scope.resolution_context.at_path("attributes").resolve_value(raw)
        origin = _origin(context)
        try:
            config = from_attributes(rendered, origin=origin)
        except ConfigError as refused:
            # The message holds one block per problem: the stack is cut to this line.
            raise refused.with_traceback(None) from refused.__cause__  # the problems: above
        return cls(config, origin)

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        from watermark_assets.defs import build_definitions

        for other in context.component_tree.get_all_components(of_type=WatermarkPipelines):
            if other is not self:
                refuse_other_settings(self, other)
        return build_definitions(self.config)


def refuse_other_settings(one: WatermarkPipelines, other: WatermarkPipelines) -> None:
    """Several components of one code location share its process: one Spark session and one
    storage configuration. ConfigError naming both when their settings differ."""
    from watermark_assets.defs.run_worker import spark_settings

    for what, mine, theirs in (
        ("spark settings", spark_settings(one.config), spark_settings(other.config)),
        ("storage", one.config.storage, other.config.storage),
    ):
        if mine != theirs:
            raise ConfigError(
                f"{one.origin} and {other.origin} are two WatermarkPipelines components of one "
                f"code location with different {what}: their runs share one process (one Spark "
                "session, one storage configuration); write the same `spark` and `storage` in "
                "both (a JDBC source adds PostgreSQL's driver to the Spark settings), or put "
                "their pipelines in one defs.yaml",
                key="spark" if what == "spark settings" else "storage",
            )


def from_attributes(
    attributes: Any, *, origin: str, env: Any = None, base: Path | None = None
) -> ProjectConfig:
    """The configuration of a ``defs.yaml``'s ``attributes``, read as the configuration file is
    (``parse_config``: ``${VAR}`` from ``env`` (default: the environment), relative paths
    against ``base`` (default: the working directory), every check and message)."""
    text = yaml.safe_dump(attributes if attributes is not None else {}, sort_keys=False)
    return parse_config(
        text,
        env=os.environ if env is None else env,
        base=Path.cwd() if base is None else base,
        origin=origin,
    )


def _origin(context: ComponentLoadContext) -> str:
    """How messages name the component: its ``defs.yaml`` (``attributes``)."""
    path = Path(context.path)
    file = next((path / n for n in ("defs.yaml", "defs.yml") if (path / n).is_file()), path)
    return f"{file} (attributes)"
