"""The ``kt`` command line: Typer commands over :class:`~knowtology_cli.kb.KnowledgeBase`."""
