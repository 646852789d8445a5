"""Runs: plan -> read and stage -> commit, without Dagster (one module per watermark kind for now;
``ingest.py`` holds the file-path kind until the reshape moves it here)."""
