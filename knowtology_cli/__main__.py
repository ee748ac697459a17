"""``python -m knowtology_cli`` runs the CLI."""

from .cli.app import main

main()
