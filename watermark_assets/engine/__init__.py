"""One engine for every kind of pipeline (docs/design.md, "One pipeline model").

- ``write``: the run's ONE Delta commit: its staged files moved into the table and committed with
  a write mode (:class:`~watermark_assets.engine.write.Append`,
  :class:`~watermark_assets.engine.write.Replace`, :class:`~watermark_assets.engine.write.Merge`)
  and the run's record (txns, commitInfo entries, lineage).
"""
