"""The file-path watermark kind (``file_path``, seed 000): pure, standard library only.

- ``path``: a landing path = partition prefix + name; lexicographic comparison; name ordering.
- ``watermark``: :class:`FileWatermark` (global + per-partition values, Initial/Active/Idle); its
  ``advance`` is the one place this kind moves forward.
- ``listing``: which directories to descend into and which files are above (pruning).
- ``coldstart``: the strftime prefix template + N-day lookback.
- ``timeparts``: a landing partition prefix <-> its datetime (template parsing).
"""
