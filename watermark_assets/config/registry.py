"""The builders of the strategies a source or provider model describes, registered by the
packages that hold them.

The configuration models are declarative: ``JdbcSourceConfig`` says which table to read,
``sources/jdbc.py`` how. ``config/`` imports neither ``sources/`` nor ``providers/``: each of them
registers, when it is imported, one builder per ``type`` its models are discriminated by
(``sources/__init__.py``, ``providers/__init__.py``), and a model's ``build`` looks it up here.
Adding a source type is its model in ``config/sources.py`` and one ``register`` line in
``sources/__init__.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

#: What is built: a file-path pipeline's source, a column source (column, time, unit pipelines),
#: a unit pipeline's secondary input, or a column watermark's provider.
Role = Literal["file_source", "column_source", "secondary_input", "provider"]

#: The package whose import registers the builders of a role.
_REGISTERED_BY: dict[str, str] = {
    "file_source": "watermark_assets.sources",
    "column_source": "watermark_assets.sources",
    "secondary_input": "watermark_assets.sources",
    "provider": "watermark_assets.providers",
}

_BUILDERS: dict[tuple[str, str], Callable[..., Any]] = {}


def register(role: Role, type_: str, builder: Callable[..., Any]) -> None:
    """``builder`` builds the strategy of a ``role`` model whose ``type`` is ``type_``; it is
    called with the model first, then the arguments of the model's ``build``."""
    _BUILDERS[(role, type_)] = builder


def build(role: Role, model: Any, *args: Any) -> Any:
    """The strategy ``model`` (a source or provider model) describes, built by the builder
    registered for its ``type``."""
    type_ = str(model.type)
    try:
        builder = _BUILDERS[(role, type_)]
    except KeyError:
        raise LookupError(
            f"no {role.replace('_', ' ')} is registered for type {type_!r}; import "
            f"{_REGISTERED_BY[role]} first: it registers its types"
        ) from None
    return builder(model, *args)
