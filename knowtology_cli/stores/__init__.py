"""Storage backends behind the interfaces of :mod:`.base`: Lance, SQLite, PostgreSQL, Qdrant, in-memory."""
