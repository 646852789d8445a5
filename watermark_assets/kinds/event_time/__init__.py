"""The event-time kind (``watermark.kind: event_time``): windows of an upstream table's event
time, emitted when the watermark (max event time - delay) passes them; late rows kept apart.

- ``kind.py``: its ``PipelineKind``;
- ``engines.py``: which engine runs (batch or stream); ``window.py`` (batch), ``stream.py``
  (Spark Structured Streaming), ``upstream.py`` (what the upstream appended), ``progress.py``
  (the state), ``recover.py`` (re-reading by event time after the upstream's log was cleaned);
- ``defs.py``: its asset, sensor and checks.
"""
