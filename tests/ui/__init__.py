"""UI tests: the real ``dagster dev`` driven through GraphQL and a headless Chromium.

A package (unlike ``tests/``) so that its ``conftest.py`` is imported as ``ui.conftest`` and never
shadows the ``conftest`` module that other test helpers import by name.
"""
