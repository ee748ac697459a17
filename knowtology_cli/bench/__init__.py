"""Benchmarks as a product feature (`kt bench ...`): retrieval quality, token economy, speed, trees.

Each module exposes one ``run_*`` function returning a JSON-able dict; ``report`` turns those into
Markdown tables and PNG plots. Nothing here asserts anything: the figures are the output.
"""
