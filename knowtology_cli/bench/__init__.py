"""``kt bench``: retrieval quality, token economy, speed and trees, as JSON figures and Markdown tables."""
