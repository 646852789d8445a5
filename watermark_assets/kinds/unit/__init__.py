"""The unit kind (``watermark.kind: unit``): one partition per unit id, each read and replaced
once; with ``time``, a grid of time windows by units (time x unit).

- ``kind.py``: its ``PipelineKind``; ``run.py``: a run of units; ``grid_run.py``: a run of cells
  (a time window of one unit: it builds on the time kind's ``run.py``);
- ``defs.py`` and ``grid_defs.py``: their Dagster objects (the grid's partitions are the time
  kind's windows by the units).
"""
