"""Seed-compatible storage names (``knowtology.adapters.*``) over the stores of ``knowtology_cli.stores``.

``base`` has the ABCs (``TreeStore``, ``VectorStore``, ``TextStore``), ``memory`` the in-memory
stores, ``pg`` and ``qdrant`` the scale-out backends (imported on first use).
"""
