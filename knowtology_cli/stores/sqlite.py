"""SQLiteTreeStore: the tree, mappings and LLM call log in ``tree.db`` (WAL, numbered migrations).

Reads use the stdlib ``sqlite3`` (fast start); sqlite-utils loads only to migrate or write in bulk.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ..models import Category, ChunkMapping, TreeNode, split_path
from ..provenance import provenance, provenance_json
from .base import (
    WHOLE_COLLECTION,
    CollectionInfo,
    SourceRecord,
    TreeState,
    TreeStore,
    churn_by_node,
    ensure_path,
    log_row,
    renamed_paths,
    staging_name,
    subtree_counts,
)
from .heavy_imports import import_sqlite_utils

MIGRATIONS: list[str] = [
    # 1: the initial schema
    """
    CREATE TABLE collections (
        name TEXT PRIMARY KEY,
        embedder TEXT NOT NULL,
        dimension INTEGER NOT NULL,
        builder TEXT,
        source TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE tree_nodes (
        id INTEGER PRIMARY KEY,
        collection TEXT NOT NULL,
        parent_id INTEGER REFERENCES tree_nodes(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        level INTEGER NOT NULL CHECK (level BETWEEN 1 AND 3),
        path TEXT NOT NULL,
        chunk_count INTEGER NOT NULL DEFAULT 0,
        UNIQUE (collection, path)
    );
    CREATE INDEX ix_tree_nodes_parent ON tree_nodes (collection, parent_id);
    CREATE TABLE chunk_mappings (
        collection TEXT NOT NULL,
        chunk_id TEXT NOT NULL,
        tree_node_id INTEGER NOT NULL REFERENCES tree_nodes(id),
        snippet TEXT NOT NULL,
        doc_id TEXT NOT NULL DEFAULT '',
        file_name TEXT NOT NULL DEFAULT '',
        chunk_index INTEGER NOT NULL DEFAULT 0,
        content_hash TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (collection, chunk_id)
    );
    CREATE INDEX ix_chunk_mappings_node ON chunk_mappings (tree_node_id);
    CREATE TABLE llm_calls (
        id INTEGER PRIMARY KEY,
        collection TEXT,
        build_id TEXT,
        kind TEXT,
        model TEXT,
        prompt_hash TEXT,
        chunk_count INTEGER,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        status TEXT NOT NULL,
        error TEXT,
        response TEXT,
        seconds REAL,
        created_at REAL NOT NULL
    );
    CREATE INDEX ix_llm_calls_hash ON llm_calls (prompt_hash, status);
    """,
    # 2: where each mapped chunk comes from (section, lines / pages), for browse without the vector store
    """
    ALTER TABLE chunk_mappings ADD COLUMN provenance TEXT NOT NULL DEFAULT ''
    """,
    # 3: the chunk count of each collection, so browse can tell what is not mapped yet
    """
    ALTER TABLE collections ADD COLUMN chunks INTEGER;
    """,
    # 4: sources (a document's identity is its source + path), pending vector removals, and what
    #    the tree looked like when each node was last named (incremental builds refresh names)
    """
    CREATE TABLE sources (
        collection TEXT NOT NULL,
        name TEXT NOT NULL,
        root TEXT NOT NULL,
        kind TEXT NOT NULL,
        created_at REAL NOT NULL,
        last_ingest REAL NOT NULL,
        PRIMARY KEY (collection, name)
    );
    CREATE TABLE source_chunks (
        collection TEXT NOT NULL,
        chunk_id TEXT NOT NULL,
        source TEXT NOT NULL,
        origin TEXT NOT NULL,
        PRIMARY KEY (collection, chunk_id)
    );
    CREATE INDEX ix_source_chunks_source ON source_chunks (collection, source, origin);
    CREATE TABLE pending_removals (
        collection TEXT NOT NULL,
        chunk_id TEXT NOT NULL,
        PRIMARY KEY (collection, chunk_id)
    );
    ALTER TABLE tree_nodes ADD COLUMN named_count INTEGER;
    ALTER TABLE tree_nodes ADD COLUMN churn INTEGER NOT NULL DEFAULT 0;
    UPDATE tree_nodes SET named_count = chunk_count;
    ALTER TABLE collections ADD COLUMN built_chunks INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE collections ADD COLUMN placed_since INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE collections ADD COLUMN removed_since INTEGER NOT NULL DEFAULT 0;
    UPDATE collections SET built_chunks = (SELECT COUNT(*) FROM chunk_mappings m WHERE m.collection = collections.name)
    """,
    # 5: the LLM log says how many attempts a call took and whether its usage was estimated
    """
    ALTER TABLE llm_calls ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE llm_calls ADD COLUMN usage_estimated INTEGER NOT NULL DEFAULT 0
    """,
    # 6: why a node carries the offline name in place of an LLM name that failed (retried by the next build)
    """
    ALTER TABLE tree_nodes ADD COLUMN name_fallback TEXT
    """,
    # 7: where the text of a chunk id that is gone went (a renamed or moved file), for `kt read`'s hint
    """
    CREATE TABLE chunk_successors (
        collection TEXT NOT NULL,
        old_id TEXT NOT NULL,
        new_id TEXT NOT NULL,
        PRIMARY KEY (collection, old_id)
    )
    """,
]


# Rows this store wrote are trusted: model_construct skips re-validating them, which also keeps
# `kt browse` from building pydantic validators (and importing pydantic's plugin loader) at all.
def _node(row: sqlite3.Row) -> TreeNode:
    return TreeNode.model_construct(
        id=row["id"],
        collection=row["collection"],
        parent_id=row["parent_id"],
        name=row["name"],
        description=row["description"],
        level=row["level"],
        path=row["path"],
        chunk_count=row["chunk_count"],
        named_count=row["named_count"],
        churn=row["churn"],
        name_fallback=row["name_fallback"],
    )


def _mapping(row: sqlite3.Row) -> ChunkMapping:
    return ChunkMapping.model_construct(
        collection=row["collection"],
        chunk_id=row["chunk_id"],
        tree_node_id=row["tree_node_id"],
        snippet=row["snippet"],
        doc_id=row["doc_id"],
        file_name=row["file_name"],
        chunk_index=row["chunk_index"],
        path=row["path"],
        **provenance(row["provenance"] if "provenance" in row.keys() else ""),
    )


class SQLiteTreeStore(TreeStore):
    """Tree store in one SQLite file; safe for one writer and many readers (WAL)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None

    # connection ---------------------------------------------------------------------------
    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._open()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        if str(self.path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA busy_timeout = 30000")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version < len(MIGRATIONS):
                if str(self.path) != ":memory:":
                    conn.execute("PRAGMA journal_mode = WAL")
                self._migrate(conn, version)
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{self.path}: cannot open tree store: {exc}",
                hint="restore the file from a backup or delete it and run `kt build --rebuild`",
            ) from exc
        return conn

    def _migrate(self, conn: sqlite3.Connection, version: int) -> None:
        db = import_sqlite_utils().Database(conn)
        for number in range(version, len(MIGRATIONS)):
            with db.conn:
                conn.execute("BEGIN IMMEDIATE")
                current = conn.execute("PRAGMA user_version").fetchone()[0]
                if current > number:  # another process migrated meanwhile
                    continue
                for statement in MIGRATIONS[number].split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {number + 1}")

    def _ready(self) -> bool:
        """True once there is a database to read (reads on a missing file answer empty)."""
        return self._conn is not None or self.path.exists()

    def schema_version(self) -> int:
        """The applied migration number."""
        return self.conn.execute("PRAGMA user_version").fetchone()[0]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _transaction(self) -> _Tx:
        return _Tx(self.conn)

    # collections --------------------------------------------------------------------------
    def get_collection(self, name: str) -> CollectionInfo | None:
        if not self._ready():
            return None
        row = self.conn.execute("SELECT * FROM collections WHERE name = ?", (name,)).fetchone()
        return _collection(row) if row else None

    def ensure_collection(self, info: CollectionInfo) -> CollectionInfo:
        now = time.time()
        with self._transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO collections (name, embedder, dimension, builder, source, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (info.name, info.embedder, info.dimension, info.builder,
                 json.dumps(info.source) if info.source else None, now, now),
            )
        stored = self.get_collection(info.name)
        assert stored is not None
        return stored

    def list_collections(self) -> list[CollectionInfo]:
        if not self._ready():
            return []
        return [_collection(r) for r in self.conn.execute("SELECT * FROM collections ORDER BY name")]

    def set_builder(self, name: str, builder: str | None) -> None:
        with self._transaction() as conn:
            conn.execute(
                "UPDATE collections SET builder = ?, updated_at = ? WHERE name = ?", (builder, time.time(), name)
            )

    def set_chunk_count(self, name: str, chunks: int) -> None:
        with self._transaction() as conn:
            conn.execute("UPDATE collections SET chunks = ? WHERE name = ?", (chunks, name))

    def drop_collection(self, name: str, *, pending: bool = False) -> None:
        with self._transaction() as conn:
            for tree in (name, staging_name(name)):
                conn.execute("DELETE FROM chunk_mappings WHERE collection = ?", (tree,))
                conn.execute("DELETE FROM tree_nodes WHERE collection = ?", (tree,))
            conn.execute("DELETE FROM source_chunks WHERE collection = ?", (name,))
            conn.execute("DELETE FROM sources WHERE collection = ?", (name,))
            conn.execute("DELETE FROM pending_removals WHERE collection = ?", (name,))
            conn.execute("DELETE FROM chunk_successors WHERE collection = ?", (name,))
            conn.execute("DELETE FROM collections WHERE name = ?", (name,))
            if pending:
                conn.execute("INSERT INTO pending_removals (collection, chunk_id) VALUES (?, ?)",
                             (name, WHOLE_COLLECTION))

    # sources ------------------------------------------------------------------------------
    def sources(self, collection: str) -> list[SourceRecord]:
        if not self._ready():
            return []
        rows = self.conn.execute(
            "SELECT s.*, COUNT(c.chunk_id) AS chunks, COUNT(DISTINCT c.origin) AS files FROM sources s"
            " LEFT JOIN source_chunks c ON c.collection = s.collection AND c.source = s.name"
            " WHERE s.collection = ? GROUP BY s.name ORDER BY s.name",
            (collection,),
        )
        return [SourceRecord(name=r["name"], root=r["root"], kind=r["kind"], files=r["files"], chunks=r["chunks"],
                             created_at=r["created_at"], last_ingest=r["last_ingest"]) for r in rows]

    def chunk_owners(self, collection: str, chunk_ids: Iterable[str] | None = None) -> dict[str, tuple[str, str]]:
        if not self._ready():
            return {}
        sql = "SELECT chunk_id, source, origin FROM source_chunks WHERE collection = ?"
        if chunk_ids is None:
            return {r[0]: (r[1], r[2]) for r in self.conn.execute(sql, (collection,))}
        ids, out = list(dict.fromkeys(chunk_ids)), {}
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            for r in self.conn.execute(sql + f" AND chunk_id IN ({','.join('?' * len(part))})", [collection, *part]):
                out[r[0]] = (r[1], r[2])
        return out

    def record_sources(
        self, collection: str, sources: Sequence[tuple[str, str, str]], owners: dict[str, tuple[str, str]]
    ) -> None:
        now = time.time()
        with self._transaction() as conn:
            for name, root, kind in sources:
                conn.execute(
                    "INSERT INTO sources (collection, name, root, kind, created_at, last_ingest)"
                    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (collection, name) DO UPDATE SET root = excluded.root,"
                    " kind = excluded.kind, last_ingest = excluded.last_ingest",
                    (collection, name, root, kind, now, now),
                )
            conn.executemany(
                "INSERT OR REPLACE INTO source_chunks (collection, chunk_id, source, origin) VALUES (?, ?, ?, ?)",
                [(collection, chunk_id, source, origin) for chunk_id, (source, origin) in owners.items()],
            )

    def record_successors(self, collection: str, successors: Mapping[str, str]) -> None:
        if not successors:
            return
        with self._transaction() as conn:
            for old, new in successors.items():
                conn.execute("UPDATE chunk_successors SET new_id = ? WHERE collection = ? AND new_id = ?",
                             (new, collection, old))
            conn.executemany("INSERT OR REPLACE INTO chunk_successors (collection, old_id, new_id) VALUES (?, ?, ?)",
                             [(collection, old, new) for old, new in successors.items()])

    def successors(self, collection: str, chunk_ids: Iterable[str]) -> dict[str, str]:
        ids = list(dict.fromkeys(chunk_ids))
        if not ids or not self._ready():
            return {}
        out: dict[str, str] = {}
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            out.update((r[0], r[1]) for r in self.conn.execute(
                "SELECT old_id, new_id FROM chunk_successors WHERE collection = ?"
                f" AND old_id IN ({','.join('?' * len(part))})", [collection, *part]))
        return out

    def remove_chunks(self, collection: str, chunk_ids: Sequence[str], *, forget_sources: Sequence[str] = ()) -> None:
        ids = list(dict.fromkeys(chunk_ids))
        with self._transaction() as conn:
            before = self._mapped(conn, collection, ids)
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                marks = ",".join("?" * len(part))
                conn.execute(f"DELETE FROM chunk_mappings WHERE collection = ? AND chunk_id IN ({marks})",
                             [collection, *part])
                conn.execute(f"DELETE FROM source_chunks WHERE collection = ? AND chunk_id IN ({marks})",
                             [collection, *part])
            conn.executemany("INSERT OR IGNORE INTO pending_removals (collection, chunk_id) VALUES (?, ?)",
                             [(collection, i) for i in ids])
            for name in forget_sources:
                conn.execute("DELETE FROM source_chunks WHERE collection = ? AND source = ?", (collection, name))
                conn.execute("DELETE FROM sources WHERE collection = ? AND name = ?", (collection, name))
            self._track(conn, collection, before, [], ids)
            _recount(conn, collection)

    def pending_removals(self) -> dict[str, list[str]]:
        if not self._ready():
            return {}
        out: dict[str, list[str]] = {}
        for r in self.conn.execute("SELECT collection, chunk_id FROM pending_removals ORDER BY collection, chunk_id"):
            out.setdefault(r[0], []).append(r[1])
        return out

    def clear_pending(self, collection: str, chunk_ids: Sequence[str] | None = None) -> None:
        with self._transaction() as conn:
            if chunk_ids is None:
                conn.execute("DELETE FROM pending_removals WHERE collection = ?", (collection,))
                return
            conn.executemany("DELETE FROM pending_removals WHERE collection = ? AND chunk_id = ?",
                             [(collection, i) for i in chunk_ids])

    # tree freshness -----------------------------------------------------------------------
    def tree_state(self, collection: str) -> TreeState:
        if not self._ready():
            return TreeState()
        row = self.conn.execute(
            "SELECT built_chunks, placed_since, removed_since FROM collections WHERE name = ?", (collection,)
        ).fetchone()
        return TreeState(*row) if row else TreeState()

    def mark_named(self, collection: str, paths: Sequence[str] | None = None) -> None:
        with self._transaction() as conn:
            if paths is None:
                conn.execute("UPDATE tree_nodes SET named_count = chunk_count, churn = 0 WHERE collection = ?",
                             (collection,))
                conn.execute(
                    "UPDATE collections SET built_chunks = (SELECT COUNT(*) FROM chunk_mappings m WHERE"
                    " m.collection = collections.name), placed_since = 0, removed_since = 0 WHERE name = ?",
                    (collection,),
                )
                return
            conn.executemany(
                "UPDATE tree_nodes SET named_count = chunk_count, churn = 0 WHERE collection = ? AND path = ?",
                [(collection, "/".join(split_path(p))) for p in paths],
            )

    def mark_stale(self, collection: str, paths: Sequence[str]) -> None:
        with self._transaction() as conn:
            conn.executemany(
                "UPDATE tree_nodes SET churn = MAX(churn, named_count, 1) WHERE collection = ? AND path = ?",
                [(collection, "/".join(split_path(p))) for p in paths],
            )

    def rename_nodes(self, collection: str, changes: dict[str, tuple[str | None, str | None]], *,
                     named: Sequence[str] = ()) -> None:
        if not changes and not named:
            return
        with self._transaction() as conn:
            conn.executemany(
                "UPDATE tree_nodes SET named_count = chunk_count, churn = 0 WHERE collection = ? AND path = ?",
                [(collection, "/".join(split_path(p))) for p in named],
            )
            rows = conn.execute("SELECT id, parent_id, path FROM tree_nodes WHERE collection = ?", (collection,))
            paths, parents = {}, {}
            for r in rows:
                paths[r["id"]], parents[r["id"]] = r["path"], r["parent_id"]
            by_path = {p: i for i, p in paths.items()}
            names = {by_path[p]: n for p, (n, _) in changes.items() if p in by_path and n}
            for p, (_, description) in changes.items():
                if p in by_path and description is not None:
                    conn.execute("UPDATE tree_nodes SET description = ? WHERE id = ?", (description, by_path[p]))
            if not names:
                return
            new = renamed_paths(paths, parents, names)
            moved = [i for i in paths if new[i] != paths[i]]
            # two steps, so a swap of sibling names never meets the unique (collection, path) index
            conn.executemany("UPDATE tree_nodes SET path = ? WHERE id = ?", [(f"/renaming/{i}", i) for i in moved])
            conn.executemany("UPDATE tree_nodes SET path = ?, name = ? WHERE id = ?",
                             [(new[i], new[i].rsplit("/", 1)[-1], i) for i in moved])

    # tree ---------------------------------------------------------------------------------
    def get_node(self, collection: str, path: str) -> TreeNode | None:
        if not self._ready():
            return None
        row = self.conn.execute(
            "SELECT * FROM tree_nodes WHERE collection = ? AND path = ?", (collection, "/".join(split_path(path)))
        ).fetchone()
        return _node(row) if row else None

    def children(self, collection: str, path: str | None) -> list[TreeNode]:
        if not self._ready():
            return []
        if not split_path(path or ""):
            rows = self.conn.execute(
                "SELECT * FROM tree_nodes WHERE collection = ? AND parent_id IS NULL ORDER BY name", (collection,)
            )
        else:
            rows = self.conn.execute(
                "SELECT c.* FROM tree_nodes c JOIN tree_nodes p ON c.parent_id = p.id "
                "WHERE p.collection = ? AND p.path = ? ORDER BY c.name",
                (collection, "/".join(split_path(path or ""))),
            )
        return [_node(r) for r in rows]

    def nodes(self, collection: str) -> list[TreeNode]:
        if not self._ready():
            return []
        rows = self.conn.execute("SELECT * FROM tree_nodes WHERE collection = ? ORDER BY path", (collection,))
        return [_node(r) for r in rows]

    def mappings(
        self, collection: str, *, chunk_ids: Iterable[str] | None = None, under: str | None = None
    ) -> list[ChunkMapping]:
        if not self._ready():
            return []
        sql = (
            "SELECT m.*, n.path AS path FROM chunk_mappings m JOIN tree_nodes n ON m.tree_node_id = n.id "
            "WHERE m.collection = ?"
        )
        params: list[Any] = [collection]
        prefix = "/".join(split_path(under or ""))
        if prefix:
            sql += " AND (n.path = ? OR substr(n.path, 1, ?) = ?)"
            params += [prefix, len(prefix) + 1, prefix + "/"]
        if chunk_ids is not None:
            ids = list(dict.fromkeys(chunk_ids))
            out: list[ChunkMapping] = []
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                rows = self.conn.execute(
                    sql + f" AND m.chunk_id IN ({','.join('?' * len(part))})", [*params, *part]
                )
                out.extend(_mapping(r) for r in rows)
            return sorted(out, key=lambda m: (m.file_name, m.chunk_index, m.chunk_id))
        sql += " ORDER BY m.file_name, m.chunk_index, m.chunk_id"
        return [_mapping(r) for r in self.conn.execute(sql, params)]

    def mapping_hashes(self, collection: str) -> dict[str, str]:
        if not self._ready():
            return {}
        rows = self.conn.execute(
            "SELECT chunk_id, content_hash FROM chunk_mappings WHERE collection = ?", (collection,)
        )
        return {r[0]: r[1] for r in rows}

    def apply(
        self,
        collection: str,
        categories: Sequence[Category],
        mappings: Sequence[tuple[ChunkMapping, str]],
        *,
        remove: Sequence[str] = (),
        replace: bool = False,
        track: bool = True,
        fallbacks: Mapping[str, str] | None = None,
    ) -> None:
        with self._transaction() as conn:
            if replace:
                conn.execute("DELETE FROM chunk_mappings WHERE collection = ?", (collection,))
                conn.execute("DELETE FROM tree_nodes WHERE collection = ?", (collection,))
            ids: dict[str, int] = {
                r["path"]: r["id"]
                for r in conn.execute("SELECT id, path FROM tree_nodes WHERE collection = ?", (collection,))
            }

            def insert(parent: int | None, name: str, level: int, prefix: str) -> int:
                cur = conn.execute(
                    "INSERT INTO tree_nodes (collection, parent_id, name, description, level, path)"
                    " VALUES (?, ?, ?, '', ?, ?)",
                    (collection, parent, name, level, prefix),
                )
                assert cur.lastrowid is not None  # an INSERT always sets it
                return cur.lastrowid

            def ensure(path: str, description: str | None) -> int:
                node_id = ensure_path(ids, path, insert)
                if description:
                    conn.execute("UPDATE tree_nodes SET description = ? WHERE id = ?", (description, node_id))
                return node_id

            for category in categories:
                if split_path(category.path):
                    ensure(category.path, category.description)
            before = {} if replace else self._mapped(conn, collection, [*remove, *(m.chunk_id for m, _ in mappings)])
            for chunk_id in remove:
                conn.execute(
                    "DELETE FROM chunk_mappings WHERE collection = ? AND chunk_id = ?", (collection, chunk_id)
                )
            rows = []
            for mapping, content_hash in mappings:
                node_id = ensure(mapping.path, None)
                rows.append(
                    (collection, mapping.chunk_id, node_id, mapping.snippet, mapping.doc_id,
                     mapping.file_name, mapping.chunk_index, content_hash, provenance_json(mapping.model_dump()))
                )
            conn.executemany(
                "INSERT OR REPLACE INTO chunk_mappings (collection, chunk_id, tree_node_id, snippet, doc_id,"
                " file_name, chunk_index, content_hash, provenance) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            if track and not replace:
                self._track(conn, collection, before, [(r[1], r[2], r[7]) for r in rows], remove)
            _recount(conn, collection)
            # nodes made by this write are named for the members they start with
            conn.execute("UPDATE tree_nodes SET named_count = chunk_count, churn = 0"
                         " WHERE collection = ? AND named_count IS NULL", (collection,))
            if replace:
                conn.execute("UPDATE collections SET built_chunks = (SELECT COUNT(*) FROM chunk_mappings m"
                             " WHERE m.collection = collections.name), placed_since = 0, removed_since = 0"
                             " WHERE name = ?", (collection,))
            if fallbacks is not None:
                conn.execute("UPDATE tree_nodes SET name_fallback = NULL WHERE collection = ?"
                             " AND name_fallback IS NOT NULL", (collection,))
                conn.executemany("UPDATE tree_nodes SET name_fallback = ? WHERE collection = ? AND path = ?",
                                 [(why, collection, "/".join(split_path(p))) for p, why in fallbacks.items()])

    def replace_tree(self, collection: str, staged: str, *, builder: str | None = None) -> None:
        with self._transaction() as conn:
            conn.execute("DELETE FROM chunk_mappings WHERE collection = ?", (collection,))
            conn.execute("DELETE FROM tree_nodes WHERE collection = ?", (collection,))
            conn.execute("UPDATE tree_nodes SET collection = ?, named_count = chunk_count, churn = 0"
                         " WHERE collection = ?", (collection, staged))
            conn.execute("UPDATE chunk_mappings SET collection = ? WHERE collection = ?", (collection, staged))
            conn.execute("UPDATE collections SET built_chunks = (SELECT COUNT(*) FROM chunk_mappings m"
                         " WHERE m.collection = collections.name), placed_since = 0, removed_since = 0,"
                         " builder = COALESCE(?, builder), updated_at = ? WHERE name = ?",
                         (builder, time.time(), collection))

    @staticmethod
    def _mapped(conn: sqlite3.Connection, collection: str, chunk_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        """``chunk_id -> (leaf id, content hash)`` of the given ids that are mapped."""
        ids, out = list(dict.fromkeys(chunk_ids)), {}
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            for r in conn.execute(
                "SELECT chunk_id, tree_node_id, content_hash FROM chunk_mappings WHERE collection = ?"
                f" AND chunk_id IN ({','.join('?' * len(part))})", [collection, *part]
            ):
                out[r[0]] = (r[1], r[2])
        return out

    @staticmethod
    def _track(conn: sqlite3.Connection, collection: str, before: dict[str, tuple[int, str]],
               after: Sequence[tuple[str, int, str]], removed: Sequence[str]) -> None:
        """Count membership changes per node (churn), and chunks placed (new or changed content; a
        move is not a placement) or removed since the last full build."""
        parents = {r[0]: r[1] for r in conn.execute("SELECT id, parent_id FROM tree_nodes WHERE collection = ?",
                                                    (collection,))}
        churn = churn_by_node(parents, before, after, removed)
        conn.executemany("UPDATE tree_nodes SET churn = churn + ? WHERE id = ?", [(n, i) for i, n in churn.items()])
        placed = sum(1 for chunk_id, _, h in after if chunk_id not in before or before[chunk_id][1] != h)
        gone = sum(1 for chunk_id in set(removed) if chunk_id in before)
        conn.execute("UPDATE collections SET placed_since = placed_since + ?, removed_since = removed_since + ?"
                     " WHERE name = ?", (placed, gone, collection))

    # llm log ------------------------------------------------------------------------------
    def log_call(self, entry: dict[str, Any]) -> None:
        row = log_row(entry)
        with self._transaction() as conn:
            conn.execute(
                f"INSERT INTO llm_calls ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values())
            )

    def cached_response(self, prompt_hash: str) -> dict[str, Any] | None:
        if not self._ready():
            return None
        row = self.conn.execute(
            "SELECT * FROM llm_calls WHERE prompt_hash = ? AND status = 'ok' AND response IS NOT NULL"
            " ORDER BY id DESC LIMIT 1",
            (prompt_hash,),
        ).fetchone()
        if row is None:
            return None
        out = dict(row)
        out["response"] = json.loads(row["response"])
        return out

    def call_stats(self, collection: str | None = None) -> dict[str, Any]:
        if not self._ready():
            return {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "failed": 0}
        sql = (
            "SELECT COUNT(*) AS calls, COALESCE(SUM(input_tokens), 0) AS input_tokens,"
            " COALESCE(SUM(output_tokens), 0) AS output_tokens, COALESCE(SUM(cost_usd), 0) AS cost_usd,"
            " COALESCE(SUM(status != 'ok'), 0) AS failed FROM llm_calls"
        )
        row = self.conn.execute(sql + (" WHERE collection = ?" if collection else ""),
                                (collection,) if collection else ()).fetchone()
        return dict(row)

    def calls(self, collection: str | None = None, build_id: str | None = None) -> list[dict[str, Any]]:
        """Logged calls (without responses), oldest first."""
        if not self._ready():
            return []
        sql, params = "SELECT * FROM llm_calls WHERE 1=1", list[Any]()
        if collection:
            sql, params = sql + " AND collection = ?", [*params, collection]
        if build_id:
            sql, params = sql + " AND build_id = ?", [*params, build_id]
        return [{k: r[k] for k in r.keys() if k != "response"} for r in self.conn.execute(sql + " ORDER BY id", params)]


class _Tx:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` / ``ROLLBACK`` around a block."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.conn.execute("COMMIT")
        else:
            self.conn.execute("ROLLBACK")


def _collection(row: sqlite3.Row) -> CollectionInfo:
    return CollectionInfo(
        name=row["name"],
        embedder=row["embedder"],
        dimension=row["dimension"],
        builder=row["builder"],
        source=json.loads(row["source"]) if row["source"] else None,
        chunks=row["chunks"],
    )


def _recount(conn: sqlite3.Connection, collection: str) -> None:
    """Recompute chunk_count bottom-up and delete categories left empty."""
    nodes = {
        r["id"]: (r["parent_id"], r["path"])
        for r in conn.execute("SELECT id, parent_id, path FROM tree_nodes WHERE collection = ?", (collection,))
    }
    leaf_counts = {
        row[0]: row[1]
        for row in conn.execute(
            "SELECT tree_node_id, COUNT(*) FROM chunk_mappings WHERE collection = ? GROUP BY tree_node_id",
            (collection,),
        )
    }
    counts, empty = subtree_counts(nodes, leaf_counts)
    conn.executemany("UPDATE tree_nodes SET chunk_count = ? WHERE id = ?", [(c, i) for i, c in counts.items()])
    for node_id in empty:
        conn.execute("DELETE FROM tree_nodes WHERE id = ?", (node_id,))
