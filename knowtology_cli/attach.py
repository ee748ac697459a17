"""Attach someone else's vector table as a read-only collection (no chunk is copied), or detach it.

The attachment lives in ``CollectionInfo.source``; reads are routed there and writes refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from knowtology_cli.config import validate_name
from knowtology_cli.embedders import canonical_name
from knowtology_cli.errors import ConfigError, EmbeddingError, NotFoundError
from knowtology_cli.models import Record
from knowtology_cli.stores.attached import AttachedLanceStore, ColumnMap
from knowtology_cli.stores.base import CollectionInfo
from knowtology_cli.stores.lance import fts_columns

if TYPE_CHECKING:
    from knowtology_cli.kb import KnowledgeBase


class AttachReport(Record):
    """What ``kt attach`` recorded."""

    collection: str
    table: str
    rows: int
    dimension: int
    embedder: str
    columns: dict[str, str | None]
    table_version: int
    keyword_index: list[str]
    already_attached: bool = False


def _table_uri(table: str) -> str:
    return table if "://" in table else str(Path(table).expanduser().resolve())


def attach_lance_table(
    kb: KnowledgeBase, name: str, table: str, columns: ColumnMap, embedder: str
) -> AttachReport:
    """Record ``table`` (a Lance dataset) as collection ``name``, read-only, embedded with ``embedder``.

    Checks that the mapped columns exist, that the vector column is fixed-size and that the
    embedder's dimension matches it; the table itself is only read.
    """
    name = validate_name("collection", name)
    uri = _table_uri(table)
    store = AttachedLanceStore(uri, columns)
    ds = store.dataset()
    dimension = store.dimension()
    model_name = canonical_name(embedder)
    model = kb.make_embedder(model_name)
    if model.dimension != dimension:
        raise EmbeddingError(
            f"embedder {model_name} makes {model.dimension}-d vectors, column {columns.vector!r} holds {dimension}-d",
            hint="pass the --embedder that produced the table's vectors",
        )
    source: dict[str, Any] = {"kind": "lance", "attached": True, "table": uri, "columns": columns.to_dict(),
                              "version_at_attach": ds.version}
    existing = kb.tree.get_collection(name)
    if existing is not None:
        same = (existing.source or {}).get("table") == uri and (existing.source or {}).get("columns") == source["columns"]
        if not same:
            raise ConfigError(f"collection {name!r} already exists", hint="attach under another name, or "
                              "`kt detach` it first (an attached table is never modified)")
    else:
        kb.tree.ensure_collection(CollectionInfo(name=name, embedder=model_name, dimension=dimension, source=source))
    kb.vectors.forget(name)
    indexed = sorted(fts_columns(ds) & {c for c in (columns.text, columns.title) if c})
    return AttachReport(collection=name, table=uri, rows=ds.count_rows(), dimension=dimension, embedder=model_name,
                        columns=columns.to_dict(), table_version=ds.version, keyword_index=indexed,
                        already_attached=existing is not None)


def detach(kb: KnowledgeBase, name: str) -> str:
    """Forget an attached collection's record and tree; the table is not touched."""
    info = kb.tree.get_collection(name)
    if info is None:
        raise NotFoundError(f"no collection named {name!r}")
    if not (info.source or {}).get("attached"):
        raise ConfigError(f"collection {name!r} is not attached", hint="only `kt attach`ed collections detach")
    kb.tree.drop_collection(name)
    kb.vectors.forget(name)
    return name
