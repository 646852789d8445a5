"""This repository's ``dg`` defs folder (``[tool.dg.project] defs_module``).

Empty, the code location serves the configuration file ($WATERMARK_ASSETS_CONFIG, else the
demo). ``dg scaffold defs watermark_assets.WatermarkPipelines NAME`` (run in the repository root)
writes ``NAME/defs.yaml`` here; once this folder declares anything, the code location is this
folder's definitions instead (``watermark_assets/definitions.py``).
"""
