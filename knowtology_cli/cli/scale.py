"""Scale-out commands: ``kt attach`` / ``kt detach`` an existing vector table as a read-only collection."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import JsonOpt, StoreOpt, console, emit_json, handled, open_kb


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""

    @app.command()
    def attach(
        name: Annotated[str, typer.Argument(help="Collection name to give the attached table.")],
        table: Annotated[str, typer.Option("--table", help="The Lance dataset: a path to NAME.lance or s3://…/NAME.lance.")],
        id_column: Annotated[str, typer.Option("--id-column", help="Column holding the chunk id.")],
        text_column: Annotated[str, typer.Option("--text-column", help="Column holding the chunk text.")],
        vector_column: Annotated[str, typer.Option("--vector-column", help="Fixed-size vector column.")],
        embedder: Annotated[str, typer.Option("--embedder", help="Embedder that made the vectors (e.g. local, openai:text-embedding-3-small).")],
        doc_column: Annotated[str | None, typer.Option("--doc-column", help="Document id column.")] = None,
        file_column: Annotated[str | None, typer.Option("--file-column", help="File / source name column.")] = None,
        index_column: Annotated[str | None, typer.Option("--index-column", help="Chunk position column.")] = None,
        title_column: Annotated[str | None, typer.Option("--title-column", help="Title / heading column.")] = None,
        store: StoreOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Attach an existing Lance table read-only (no chunk is copied); then `kt build -c NAME`."""
        from ..attach import attach_lance_table  # deferred: loads numpy
        from ..stores.attached import ColumnMap  # deferred: loads numpy

        columns = ColumnMap(id=id_column, text=text_column, vector=vector_column, doc=doc_column,
                            file=file_column, index=index_column, title=title_column)
        with handled(as_json):
            kb = open_kb(store, None)
            try:
                report = attach_lance_table(kb, name, table, columns, embedder)
            finally:
                kb.close()
        if as_json:
            return emit_json(report)
        out = console()
        verb = "already attached" if report.already_attached else "attached"
        out.print(f"{report.collection}: {verb} {report.table} (version {report.table_version}) — {report.rows} rows, "
                  f"{report.dimension}-d, embedder {report.embedder}; read-only", markup=False)
        if report.keyword_index:
            out.print(f"keyword search uses the table's full-text index on {', '.join(report.keyword_index)}",
                      markup=False)
        else:
            out.print("no full-text index on the text column: `kt grep` needs one (or use --regex)", markup=False)
        out.print(f"next: kt build -c {report.collection}", markup=False)

    @app.command()
    def detach(
        name: Annotated[str, typer.Argument(help="The attached collection.")],
        store: StoreOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Forget an attached collection and its tree (the table itself is never touched)."""
        from ..attach import detach as detach_collection  # deferred: loads numpy

        with handled(as_json):
            kb = open_kb(store, None)
            try:
                detach_collection(kb, name)
            finally:
                kb.close()
        if as_json:
            return emit_json({"detached": name})
        console().print(f"{name}: detached", markup=False)
