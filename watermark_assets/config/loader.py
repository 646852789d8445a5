"""Loading the configuration file: ``${VAR}`` interpolation, relative paths, legacy spellings,
the accepted types, and pydantic's errors as one block per problem (``problems.py``).

The file is the repo's demo file by default (``watermark_assets/demo/pipelines.yaml``), another one
through the ``WATERMARK_ASSETS_CONFIG`` environment variable. ``${VAR}`` and ``${VAR:-default}`` are
interpolated from the environment before parsing. Relative local paths are resolved against the
current working directory when the file is loaded.

Every validation error names the pipeline, the key, the bad value and the fix.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from watermark_assets import storage
from watermark_assets.config.problems import did_you_mean, problems_of
from watermark_assets.config.project import WATERMARK_KINDS, ProjectConfig
from watermark_assets.config.providers import _PROVIDER_TYPES
from watermark_assets.config.sources import (
    _PAGINATION_TYPES,
    FILE_SOURCE_TYPES,
    TIME_SOURCE_TYPES,
)
from watermark_assets.core.errors import UnitIdError
from watermark_assets.exceptions import ConfigError

CONFIG_ENV_VAR = "WATERMARK_ASSETS_CONFIG"
DEFAULT_CONFIG_PATH = Path(__file__).parent.parent / "demo" / "pipelines.yaml"

_ENV_PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def interpolate_env(text: str, env: Mapping[str, str]) -> str:
    """Replace ``${VAR}`` and ``${VAR:-default}``; an unset variable without default is an error."""

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise ConfigError(
            f"environment variable {name!r} is not set; set it or write ${{{name}:-default}}",
            key=name,
        )

    return _ENV_PATTERN.sub(replace, text)


def _resolve_local(uri: str, base: Path) -> str:
    if "://" in uri and not uri.startswith("file://"):
        return uri
    path = Path(uri.removeprefix("file://"))
    return str(path if path.is_absolute() else (base / path).resolve())


def _resolve_paths(raw: Any, base: Path) -> Any:
    for pipeline in raw.get("pipelines") or []:
        if not isinstance(pipeline, dict):
            continue
        for section, key in (
            ("source", "uri"),
            ("table", "uri"),
            ("table", "quarantine_uri"),
            ("table", "late_uri"),
            ("table", "state_uri"),
            ("replay", "target_table"),
        ):
            block = pipeline.get(section)
            if isinstance(block, dict) and isinstance(block.get(key), str):
                block[key] = _resolve_local(block[key], base)
        watermark = pipeline.get("watermark")
        provider = watermark.get("provider") if isinstance(watermark, dict) else None
        if isinstance(provider, dict) and isinstance(provider.get("uri"), str):
            provider["uri"] = _resolve_local(provider["uri"], base)
        listing = watermark.get("secondary_input") if isinstance(watermark, dict) else None
        if isinstance(listing, dict) and listing.get("type") in ("file", "delta_table"):
            key = "path" if listing.get("type") == "file" else "uri"
            if isinstance(listing.get(key), str):
                listing[key] = _resolve_local(listing[key], base)
    return raw


#: Keys of a file-path pipeline that moved from ``source`` to ``watermark`` (legacy ``kind:``).
_FILE_WATERMARK_KEYS = (
    "partition_template",
    "file_name_ordering",
    "cold_start",
    "late_arrival_days",
    "sweep",
)
_LEGACY_SOURCE_TYPES = {"ingest": "files", "commit": "parquet_commit"}


class ConfigDeprecationWarning(UserWarning):
    """A configuration spelled the old way: it loads, and the message says how to write it now."""


def _upgrade_legacy(raw: Any, origin: str) -> None:
    """Rewrite a pipeline's legacy ``kind: ingest|commit|column`` in place, with a warning.

    ``kind: ingest`` is ``source.type: files``, ``kind: commit`` is ``source.type:
    parquet_commit``; their file-watermark keys move from ``source`` to ``watermark``.
    ``kind: column`` is implied by a column source.
    """
    for number, pipeline in enumerate(raw.get("pipelines") or []):
        if not isinstance(pipeline, dict) or "kind" not in pipeline:
            continue
        kind = pipeline.get("kind")
        name = pipeline.get("name") or f"#{number}"
        source = pipeline.get("source")
        if kind == "column":
            del pipeline["kind"]
            fix = "remove it: a column source (source.type) implies the column watermark"
        elif kind in _LEGACY_SOURCE_TYPES and isinstance(source, dict) and "type" not in source:
            del pipeline["kind"]
            source["type"] = _LEGACY_SOURCE_TYPES[kind]
            if kind == "commit" and source.get("format", "parquet") == "parquet":
                source.pop("format", None)  # implied by parquet_commit
            watermark = pipeline.setdefault("watermark", {})
            moved = [key for key in _FILE_WATERMARK_KEYS if key in source]
            if isinstance(watermark, dict):
                for key in moved:
                    watermark.setdefault(key, source.pop(key))
            fix = f"write 'source: {{type: {source['type']}, ...}}'" + (
                f" and move {', '.join(moved)} from source to watermark" if moved else ""
            )
        else:
            raise ConfigError(
                f"{origin}: pipeline {name!r}: kind {kind!r} is not accepted; remove 'kind' and "
                f"set source.type ({_accepted_source_types()})",
                pipeline=str(name),
                key="kind",
                value=kind,
            )
        warnings.warn(
            f"{origin}: pipeline {name!r}: 'kind: {kind}' is deprecated; {fix}",
            ConfigDeprecationWarning,
            stacklevel=3,
        )


def _all_source_types() -> list[str]:
    return list(dict.fromkeys(t for types in WATERMARK_KINDS.values() for t in types))


def _accepted_source_types() -> str:
    kinds: dict[str, list[str]] = {}
    described: dict[str, str] = {}
    for kind, types in WATERMARK_KINDS.items():
        for source_type, what in types.items():
            kinds.setdefault(source_type, []).append(repr(kind))
            described.setdefault(source_type, what)
    return "; ".join(
        f"{t!r} ({described[t]}, watermark.kind {' or '.join(k)})" for t, k in kinds.items()
    )


def _check_types(raw: Any, origin: str) -> None:
    """Every pipeline names an accepted ``source.type``, and a ``watermark.kind`` that takes it
    (pydantic would only say that it cannot find the discriminator)."""
    for number, pipeline in enumerate(raw.get("pipelines") or []):
        if not isinstance(pipeline, dict):
            continue
        name = str(pipeline.get("name") or f"#{number}")
        source = pipeline.get("source")
        source_type = source.get("type") if isinstance(source, dict) else None
        watermark = pipeline.get("watermark")
        kind = watermark.get("kind") if isinstance(watermark, dict) else None
        if kind is not None and kind not in WATERMARK_KINDS:
            raise ConfigError(
                f"{origin}: pipeline {name!r}: watermark.kind {kind!r} is not an accepted value; "
                f"use one of {list(WATERMARK_KINDS)} or leave it out (the source.type implies it)"
                f"{did_you_mean(kind, WATERMARK_KINDS)}",
                pipeline=name,
                key="watermark.kind",
                value=kind,
            )
        implied = next((k for k, types in WATERMARK_KINDS.items() if source_type in types), None)
        if implied is None:
            problem = (
                "source.type is required"
                if not isinstance(source, dict) or "type" not in source
                else f"source.type {source_type!r} is not an accepted value"
            )
            raise ConfigError(
                f"{origin}: pipeline {name!r}: {problem}; set it to one of "
                f"{_accepted_source_types()}, e.g. 'source: {{type: files, uri: data/landing}}'"
                f"{did_you_mean(source_type, _all_source_types())}",
                pipeline=name,
                key="source.type",
                value=source_type,
            )
        if kind is not None and source_type not in WATERMARK_KINDS[kind]:
            raise ConfigError(
                f"{origin}: pipeline {name!r}: a {source_type!r} source takes a {implied!r} "
                f"watermark, not watermark.kind {kind!r}; sources with a {kind!r} watermark: "
                f"{list(WATERMARK_KINDS[kind])}",
                pipeline=name,
                key="watermark.kind",
                value=kind,
            )


def _union_tags() -> set[str]:
    """The tags pydantic writes into an error's location for the configuration's unions."""
    return {
        *WATERMARK_KINDS,
        *FILE_SOURCE_TYPES,
        *TIME_SOURCE_TYPES,
        *_PROVIDER_TYPES,
        *_PAGINATION_TYPES,
    }


class _ConfigLoader(yaml.SafeLoader):
    """``yaml.safe_load``, except that an unquoted date or timestamp that is no real instant
    (``2020-02-30``, ``2020-13-01``, ``2020-01-01 25:00:00``) stays the text written instead of
    raising a bare ``ValueError`` while the file is read: the key it belongs to then refuses it
    like a quoted value, naming the pipeline, the key, the value and the accepted forms."""


def _timestamp_or_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    try:
        return loader.construct_yaml_timestamp(node)
    except ValueError:
        return loader.construct_scalar(node)


_ConfigLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_or_text)


def parse_config(text: str, *, env: Mapping[str, str], base: Path, origin: str) -> ProjectConfig:
    """Parse YAML text into a validated ProjectConfig (errors name pipeline, key, value, fix)."""
    try:
        raw = yaml.load(interpolate_env(text, env), Loader=_ConfigLoader)  # a SafeLoader
    except yaml.YAMLError as error:
        raise ConfigError(f"{origin} is not valid YAML: {error}") from error
    if not isinstance(raw, dict):
        raise ConfigError(f"{origin} must hold a mapping with a 'pipelines' list")
    raw = _resolve_paths(raw, base)
    _upgrade_legacy(raw, origin)
    _check_types(raw, origin)
    try:
        config = ProjectConfig.model_validate(raw)
    except ValidationError as error:
        # One block per problem, and nothing else: pydantic's own report is not chained (it
        # would print every problem a second time, in its words), except a refused unit id.
        unit_id = next(
            (
                found
                for item in error.errors()
                if isinstance(found := (item.get("ctx") or {}).get("error"), UnitIdError)
            ),
            None,
        )
        problems = problems_of(error, raw, ProjectConfig, _union_tags())
        raise ConfigError.of_problems(origin, problems) from unit_id
    storage.configure(config.storage)  # every fsspec/delta-rs call of this process uses it
    return config


def load_config(
    path: str | os.PathLike[str] | None = None, *, env: Mapping[str, str] | None = None
) -> ProjectConfig:
    """Load the configuration: ``path``, else $WATERMARK_ASSETS_CONFIG, else the demo file."""
    env = os.environ if env is None else env
    chosen = Path(path or env.get(CONFIG_ENV_VAR) or DEFAULT_CONFIG_PATH)
    if not chosen.is_file():
        raise ConfigError(
            f"configuration file {str(chosen)!r} does not exist; "
            f"set {CONFIG_ENV_VAR} to a YAML file",
            value=str(chosen),
        )
    return parse_config(
        chosen.read_text(encoding="utf-8"), env=env, base=Path.cwd(), origin=str(chosen)
    )
