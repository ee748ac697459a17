"""Developer harnesses outside the wheel: kill/stress trials, embedder and clustering checks."""
