"""The file-path kind (``watermark.kind: file_path``): files under a landing folder, ingested
above a watermark per Dagster partition (Initial, Active, Idle).

- ``kind.py``: its ``PipelineKind`` (summary, explain, repair, the demo's ticks);
- ``plan.py`` -> ``stage.py`` -> ``commit.py`` (``rewrite.py`` for a file rewritten in place): a
  run without Dagster, its ONE commit through ``engine.write``;
- ``defs.py``: its Dagster objects (``assets.py``: the asset and its body; ``sensors.py``: the
  sensor; ``metadata.py``, ``partition_notes.py``, ``quiet_partitions.py``: what the UI shows).
"""
