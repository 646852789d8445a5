"""One engine for every kind of pipeline (docs/design.md, "One pipeline model").

- ``plan``: the run's plan (:class:`~watermark_assets.engine.plan.RunPlan`): what to read
  (:class:`~watermark_assets.engine.plan.ReadSlice`), how to write (the write mode), what to
  record (:class:`~watermark_assets.engine.plan.RecordPlan`) and where the run started
  (:class:`~watermark_assets.engine.plan.PlannedOn`).
- ``write``: the run's ONE Delta commit: its staged files moved into the table and committed with
  a write mode (:class:`~watermark_assets.engine.write.Append`,
  :class:`~watermark_assets.engine.write.Replace`, :class:`~watermark_assets.engine.write.Merge`)
  and the run's record (txns, commitInfo entries, lineage).
- ``execute``: the staged reads of a plan committed (:func:`~watermark_assets.engine.execute.
  commit_reads`), in the one attempt loop (:func:`~watermark_assets.engine.execute.execute`:
  stale outcomes planned and staged again).
"""
