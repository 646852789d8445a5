"""The code location: ``dagster dev`` loads ``defs`` from here (see workspace.yaml)."""

from watermark_assets.defs import build_definitions

defs = build_definitions()
