"""The column kind (``watermark.kind: column``): rows of a table, database or API above a
column watermark; replays of partitions' windows.

- ``kind.py``: its ``PipelineKind``; ``replay.py``: the replay run (the column run itself is the
  column engine every column-reading kind shares, ``runs/column.py``);
- ``defs.py``: its asset, job and checks; ``metadata.py``: what a run shows.
"""
