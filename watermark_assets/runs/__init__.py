"""Runs without Dagster: plan -> stage -> decide -> commit.

- file-path pipelines: ``file_plan`` (which files), ``file_stage`` (the source strategy makes the
  data files), ``file_commit`` (exact per file, ONE Delta commit, the checkpoint);
- column pipelines: ``column`` (one run above the watermark), ``column_replay`` (a range in
  chunks);
- shared: ``faults`` (the tests' crash and pause points).
"""
