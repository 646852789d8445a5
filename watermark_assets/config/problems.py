"""A refused configuration as one block per problem: where (pipeline and key path), the value,
what is wrong, a "did you mean" for an unknown key, and the fix.

pydantic reports a ``ValidationError`` whose items carry a location (``pipelines.1.file_path.
partitons``), pydantic's own words ("Extra inputs are not permitted") and the input. This module
turns each item into a :class:`Problem` that speaks the file's language: the union tags are
dropped from the key path, an unknown key is compared (``difflib``) with the keys the model
accepts at that place (field names and aliases, e.g. ``from``), and pydantic's "Input should be"
becomes the fix. ``config.loader.parse_config`` raises one :class:`~watermark_assets.exceptions.
ConfigError` carrying every block; no traceback is needed to read it.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

#: how long a shown value may get before it is cut
_VALUE_WIDTH = 100


@dataclass(frozen=True)
class Problem:
    """One refused key: ``where`` (``pipeline 'events'``, or empty for a top-level key), the key
    path inside it, the value written (``shown``: as YAML, empty when absent), what is wrong,
    the closest accepted key for an unknown one, and the fix (empty when ``problem`` names it)."""

    where: str
    key: str
    shown: str
    problem: str
    suggestion: str | None = None
    fix: str = ""

    def block(self) -> str:
        """The problem's lines: the first names pipeline, key, problem and value (as in every
        message of this package: ``pipeline 'events': source.format: ... (got 'xml')``)."""
        head = f"{self.where}: " if self.where else ""
        got = f" (got {self.shown})" if self.shown else ""
        lines = [f"{head}{self.key}: {self.problem}{got}"]
        if self.suggestion:
            lines.append(f"  did you mean `{self.suggestion}`?")
        if self.fix:
            lines.append(f"  fix: {self.fix}")
        return "\n".join(lines)


def problems_of(
    error: ValidationError, raw: Any, root: type[BaseModel], tags: Iterable[str]
) -> list[Problem]:
    """The problems of ``error``, raised validating ``raw`` (the file's mapping) as ``root``;
    ``tags`` are the union tags pydantic puts in a location (``file_path``, ``files``, ...)."""
    tag_set = set(tags)
    items = error.errors()
    problems = [_problem(item, raw, root, tag_set) for item in items]
    # A misspelt required key is one problem: the unknown key's rename also adds the missing one.
    renamed = {
        (tuple(item["loc"][:-1]), problem.suggestion)
        for item, problem in zip(items, problems)
        if item["type"] == "extra_forbidden" and problem.suggestion
    }
    return [
        problem
        for item, problem in zip(items, problems)
        if item["type"] != "missing" or (tuple(item["loc"][:-1]), item["loc"][-1]) not in renamed
    ]


def _problem(item: ErrorDetails, raw: Any, root: type[BaseModel], tags: set[str]) -> Problem:
    loc = list(item["loc"])
    where, rest = "", loc
    if len(loc) >= 2 and loc[0] == "pipelines" and isinstance(loc[1], int):
        pipelines = raw.get("pipelines") if isinstance(raw, Mapping) else None
        entry = pipelines[loc[1]] if isinstance(pipelines, list) and loc[1] < len(pipelines) else {}
        name = entry.get("name") if isinstance(entry, Mapping) else None
        where = f"pipeline {name or '#' + str(loc[1])!r}"
        # The union tags are dropped; ``time`` under ``watermark`` is a key (time x unit).
        rest = [
            part
            for i, part in enumerate(loc[2:])
            if part not in tags or (i and loc[2:][i - 1] == "watermark")
        ]
    key = ".".join(str(part) for part in rest) or "(pipeline)"
    kind, message, value = item["type"], item["msg"], item.get("input")
    if kind == "extra_forbidden":
        accepted = accepted_keys(root, loc[:-1])
        wrong = str(loc[-1])
        close = difflib.get_close_matches(wrong, accepted, n=1, cutoff=0.6)
        if close:
            fix = f"rename {wrong} to {close[0]}"
        elif accepted:
            fix = f"remove it; the keys accepted here: {', '.join(accepted)}"
        else:
            fix = "remove it"
        return Problem(where, key, _shown(value), "unknown key", close[0] if close else None, fix)
    if kind == "missing":
        described = field_description(root, loc)
        fix = f"add {loc[-1]}" + (f" ({described})" if described else "")
        return Problem(where, key, "", "required key is missing", fix=fix)
    if kind in ("value_error", "assertion_error"):
        # This package's own checks: their message names the value and the fix.
        text = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        return Problem(where, key, _shown(value), text)
    fix = ""
    if message.startswith("Input should be "):
        expected = message.removeprefix("Input should be ").split(", unable to ")[0]
        article = expected.startswith(("a ", "an ", "'", '"'))
        fix = f"set {loc[-1]} to {'' if article else 'a value '}{expected}"
    return Problem(where, key, _shown(value), message, fix=fix)


def _shown(value: Any) -> str:
    """The value as the file would write it (flow-style YAML), cut to one short line."""
    if isinstance(value, str):
        text = repr(value)
    else:
        try:
            text = yaml.safe_dump(
                value, default_flow_style=True, width=10_000, sort_keys=False
            ).strip()
        except yaml.YAMLError:
            text = repr(value)
        text = text.removesuffix("\n...").strip()
    return text if len(text) <= _VALUE_WIDTH else text[: _VALUE_WIDTH - 3] + "..."


def did_you_mean(written: object, accepted: Iterable[str]) -> str:
    """``"; did you mean `files`?"`` for a written value close to an accepted one, else ``""``
    (a value no accepted one resembles gets the list alone)."""
    if not isinstance(written, str) or not written:
        return ""
    close = difflib.get_close_matches(written.lower(), list(accepted), n=1, cutoff=0.6)
    return f"; did you mean `{close[0]}`?" if close else ""


# --- the model at a location: the keys it accepts --------------------------------------------


def accepted_keys(root: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """The keys the model at ``loc`` (a pydantic error location, tags included) accepts: field
    names, or their alias when they have one (``from``). Empty when it cannot be told."""
    model = _model_at(root, loc)
    if model is None:
        return []
    return [field.alias or name for name, field in model.model_fields.items()]


def field_description(root: type[BaseModel], loc: Sequence[int | str]) -> str | None:
    """The description of the field ``loc`` names (its last part), if it has one."""
    model = _model_at(root, loc[:-1])
    if model is None:
        return None
    for name, field in model.model_fields.items():
        if loc[-1] in (name, field.alias):
            return field.description
    return None


def _model_at(root: type[BaseModel], loc: Sequence[int | str]) -> type[BaseModel] | None:
    current: Any = root
    for part in loc:
        current = _step(current, part)
        if current is None:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _step(annotation: Any, part: int | str) -> Any:
    """The type one location part below ``annotation`` (a model's field, a list's item, a
    mapping's value, or a union's member named by its tag), None when unknown."""
    annotation = _unwrap(annotation)
    members = _members(annotation)
    if members is not None:
        for tag, member in members:
            if tag == part:
                return member  # the tag is a location part of its own
        models = [m for _, m in members if _step(m, part) is not None]
        return models[0] if len(models) == 1 else None
    origin = get_origin(annotation)
    if origin in (list, tuple, set, frozenset, Sequence) and isinstance(part, int):
        return get_args(annotation)[0] if get_args(annotation) else None
    if origin in (dict, Mapping) and len(get_args(annotation)) == 2:
        return get_args(annotation)[1]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, field in annotation.model_fields.items():
            if part in (name, field.alias):
                return field.annotation
    return None


def _unwrap(annotation: Any) -> Any:
    """``annotation`` without ``Annotated[...]`` and without ``None`` in a union of two."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if _is_union(annotation):
        rest = [a for a in get_args(annotation) if a is not type(None)]
        if len(rest) == 1:
            return _unwrap(rest[0])
    return annotation


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _members(annotation: Any) -> list[tuple[str | None, Any]] | None:
    """A union's members with their tag: a ``Tag`` annotation, else the ``Literal`` default of a
    ``type`` or ``kind`` field (a field discriminator); None when ``annotation`` is no union."""
    if not _is_union(annotation):
        return None
    members: list[tuple[str | None, Any]] = []
    for member in get_args(annotation):
        if member is type(None):
            continue
        tag = None
        if get_origin(member) is Annotated:
            tag = next((m.tag for m in get_args(member)[1:] if hasattr(m, "tag")), None)
        model = _unwrap(member)
        if tag is None and isinstance(model, type) and issubclass(model, BaseModel):
            for name in ("type", "kind"):
                field = model.model_fields.get(name)
                if field is not None and get_origin(field.annotation) is Literal:
                    tag = str(get_args(field.annotation)[0])
                    break
        members.append((tag, model))
    return members
