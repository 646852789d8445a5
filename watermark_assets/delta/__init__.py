"""The Delta side (``deltalake``, no delta-spark jars).

- ``committer``: :class:`DeltaCommitter`, ONE commit of add (and remove) actions with txn actions
  and custom metadata; the create race and stale commits handled.
- ``stats``: add actions from Parquet footers (statistics, Hive partition values).
- ``log``: the transaction log read back (commitInfo metadata, add and txn actions).
- ``replace``: a watermark window replaced in ONE commit (removes, rewrites, adds).
"""
