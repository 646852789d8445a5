"""A file-path pipeline's state: the Delta log is the truth, the checkpoint the fast path.

- ``commit_metadata``: what each commit records in its commitInfo (:class:`CommitMetadata`), the
  txn app ids, and the pipeline's commits read back from the log.
- ``load``: :func:`load_state`, the checkpoint plus the commits newer than it, merged.
- ``horizons``: how far back the listing looks and where per-partition watermarks are pruned.
- ``quarantine``: completing a data commit's quarantine commit after a crash between the two.
- ``checkpoint``: writing the checkpoint (never older than the one on storage).
"""
