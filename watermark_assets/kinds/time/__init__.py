"""The time kind (``watermark.kind: time``): one partition per window, re-run while the grace
period holds, due by the cut-off its tick computes.

- ``kind.py``: its ``PipelineKind``; ``run.py``: a run of windows (the column engine reads them,
  ``runs/window_commit.py`` commits them at once);
- ``defs.py``: its asset, sensor, schedule and checks.
"""
