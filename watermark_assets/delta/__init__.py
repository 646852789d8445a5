"""The Delta side (``deltalake``, no delta-spark jars).

- ``committer``: :class:`DeltaCommitter`, ONE commit of add (and remove) actions with txn actions
  and custom metadata; the create race and stale commits handled.
- ``stats``: add actions from Parquet footers (statistics, Hive partition values).
- ``log``: the transaction log read back (commitInfo metadata, add and txn actions).
- ``rewrite``: what replace and merge share: a plan of removes, rewrites and adds on one
  snapshot, a file rewritten without some rows, the commit pinned to the snapshot.
- ``replace``: a watermark window replaced in ONE commit (removes, rewrites, adds).
- ``merge``: a run's rows upserted on key columns in ONE commit (removes, rewrites, adds).
"""
