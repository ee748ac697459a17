"""Tree export and import: the versioned JSON tree document and its Markdown, Mermaid and HTML renderings."""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import export_page
from .errors import ConfigError, InputError
from .export_common import (
    check_link_base,
    children_index,
    display_title,
    source_href,
    summary_line,
)
from .models import Chunk, ChunkMapping, TreeNode, split_path

SCHEMA: Final = "knowtology-tree"
SCHEMA_VERSION = 1
FORMATS = ("json", "markdown", "mermaid", "html")
MAX_LEVEL = 3
# Mermaid's documented defaults (config schema: maxEdges, maxTextSize); past them a viewer refuses
# to draw the diagram, so the export says so instead of handing over something that will not render.
MERMAID_MAX_EDGES = 500
MERMAID_MAX_TEXT = 50_000
_IDENT = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class _Entry(BaseModel):
    # a v1 reader ignores keys it does not know: later v1 writers may add fields, never remove them
    model_config = ConfigDict(frozen=True, extra="ignore")


class NodeEntry(_Entry):
    """One category: its full path, the last segment as name, level 1-3, chunks under it, child count."""

    path: str
    name: str
    description: str = ""
    level: int = Field(ge=1, le=MAX_LEVEL)
    chunk_count: int = Field(default=0, ge=0)
    child_count: int = Field(default=0, ge=0)


class ChunkEntry(_Entry):
    """One mapped chunk: the leaf it sits in, its snippet and where it came from."""

    chunk_id: str = Field(min_length=1)
    path: str
    snippet: str = ""
    doc_id: str = ""
    file_name: str = ""
    chunk_index: int = 0
    title: str = ""
    content_hash: str = ""
    section: str = ""
    lines: tuple[int, int] | None = None
    pages: tuple[int, int] | None = None


class TreeDocument(_Entry):
    """The exported tree of one collection (or of one subtree when ``root`` is a path)."""

    format: Literal["knowtology-tree"] = SCHEMA
    version: int = Field(default=SCHEMA_VERSION, ge=1)
    generator: str = ""
    collection: str = ""
    root: str = "root"
    builder: str | None = None
    embedder: str | None = None
    chunk_count: int = 0
    nodes: list[NodeEntry] = Field(default_factory=list)
    chunks: list[ChunkEntry] = Field(default_factory=list)
    unmapped: list[str] | None = None

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The document's JSON Schema (committed as docs/tree-document.schema.json)."""
        schema = cls.model_json_schema()
        return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema,
                "title": f"Knowtology tree document, version {SCHEMA_VERSION}"}

    def to_json(self) -> str:
        """The document as indented UTF-8 JSON (stable key and row order, so exports diff well)."""
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False, indent=2) + "\n"


# building the document ------------------------------------------------------------------------

def provenance(chunk: Chunk | None) -> dict[str, Any]:
    """The chunk's place in its file, as ingest records it in the chunk's metadata: ``section``
    (heading trail ``A › B``), ``lines`` or ``pages`` (``[first, last]``, 1-based, inclusive)."""
    meta = chunk.metadata if chunk is not None else {}
    section = meta.get("section")
    return {"section": section if isinstance(section, str) else "",
            "lines": _span(meta.get("lines")), "pages": _span(meta.get("pages"))}


def _span(value: Any) -> tuple[int, int] | None:
    if isinstance(value, list | tuple) and len(value) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return (int(value[0]), int(value[1]))
    return None


def build_document(
    *,
    collection: str,
    root: str,
    nodes: list[TreeNode],
    mappings: list[ChunkMapping],
    chunks: Mapping[str, Chunk],
    builder: str | None,
    embedder: str | None,
    unmapped: list[str] | None,
    generator: str,
) -> TreeDocument:
    """Assemble the document from store records (``chunks`` gives titles, hashes and provenance).

    The JSON document (``format: "knowtology-tree"``, ``version: 1``; schema in docs/export.md) is the
    one shape scripts rely on: every node (path, name, description, level, counts) and every mapped
    chunk (node path, snippet, doc id, file, chunk index, title, content hash, and section and line or
    page range when the chunk carries them). ``import_tree`` turns such a document back into a
    collection's tree, so a tree
    built once (e.g. with an LLM) can ship with its corpus. Nothing here touches a terminal or a store
    directly: ``KnowledgeBase.export_tree`` / ``import_tree`` gather and apply the data.
    """
    child_counts: dict[str, int] = {}
    for node in nodes:
        if "/" in node.path:
            parent = node.path.rsplit("/", 1)[0]
            child_counts[parent] = child_counts.get(parent, 0) + 1
    node_entries = [NodeEntry(path=n.path, name=n.name, description=n.description, level=n.level,
                              chunk_count=n.chunk_count, child_count=child_counts.get(n.path, 0))
                    for n in sorted(nodes, key=lambda n: n.path)]
    chunk_entries = []
    for m in sorted(mappings, key=lambda m: (m.path, m.file_name, m.chunk_index, m.chunk_id)):
        c = chunks.get(m.chunk_id)
        chunk_entries.append(ChunkEntry(
            chunk_id=m.chunk_id, path=m.path, snippet=m.snippet, doc_id=m.doc_id, file_name=m.file_name,
            chunk_index=m.chunk_index, title=c.title if c else "", content_hash=c.content_hash if c else "",
            **provenance(c)))
    return TreeDocument(generator=generator, collection=collection, root=root, builder=builder, embedder=embedder,
                        chunk_count=len(chunk_entries), nodes=node_entries, chunks=chunk_entries,
                        unmapped=sorted(unmapped) if unmapped is not None else None)


# reading a document ---------------------------------------------------------------------------

def parse_document(data: str | bytes | Mapping[str, Any] | TreeDocument, label: str = "<document>") -> TreeDocument:
    """Validate a tree document (JSON text, a decoded object or a ``TreeDocument``).

    Raises:
        InputError: ``label:line:col: problem`` for bad JSON, ``label: field: problem`` for a bad
            field, an unknown format or version, duplicate ids or paths, or a chunk outside a leaf.
    """
    if isinstance(data, TreeDocument):
        doc = data
    else:
        obj: Any = data
        if isinstance(data, bytes | str):
            try:
                obj = json.loads(data)
            except json.JSONDecodeError as exc:
                raise InputError(f"{label}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})",
                                 hint="export the tree again with `kt export --format json -o FILE`") from None
            except UnicodeDecodeError:
                raise InputError(f"{label}: not UTF-8 text", hint="a tree document is UTF-8 JSON") from None
        if not isinstance(obj, Mapping):
            raise InputError(f"{label}: a tree document is a JSON object, got {type(obj).__name__}",
                             hint="export the tree with `kt export --format json -o FILE`")
        if obj.get("format") != SCHEMA:
            raise InputError(f"{label}: 'format' is {obj.get('format')!r}, not {SCHEMA!r} — not a tree document",
                             hint="export the tree with `kt export --format json -o FILE`")
        version = obj.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise InputError(f"{label}: 'version' must be a positive integer, got {version!r}")
        if version > SCHEMA_VERSION:
            raise InputError(f"{label}: tree document version {version} is newer than this kt reads ({SCHEMA_VERSION})",
                             hint="upgrade knowtology-cli")
        try:
            doc = TreeDocument.model_validate(obj)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"]).lstrip(".")
            more = f" (+{exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
            raise InputError(f"{label}: {where}: {first['msg']}{more}",
                             hint="fix the field, or export the tree again") from None
    _check_consistency(doc, label)
    return doc


def _check_consistency(doc: TreeDocument, label: str) -> None:
    if doc.builder is not None and not _IDENT.match(doc.builder):
        raise InputError(f"{label}: builder: {doc.builder!r} is not a plain name")
    paths: set[str] = set()
    for i, node in enumerate(doc.nodes):
        where = f"{label}: nodes[{i}]"
        segments = split_path(node.path)
        if not segments or "/".join(segments) != node.path or len(segments) > MAX_LEVEL:
            raise InputError(f"{where}.path: {node.path!r} is not a category path (1-{MAX_LEVEL} segments joined by /)",
                             hint="write paths like Returns/Refunds, without empty segments or outer spaces")
        if node.level != len(segments):
            raise InputError(f"{where}.level: {node.level} does not match the path {node.path!r} ({len(segments)} segments)")
        if node.name != segments[-1]:
            raise InputError(f"{where}.name: {node.name!r} must equal the last segment of the path {node.path!r}",
                             hint="rename a category by changing its path (and its chunks' paths)")
        for field, value in (("path", node.path), ("description", node.description)):
            if _CONTROL.search(value):
                raise InputError(f"{where}.{field}: contains a control character or line break — keep it on one line")
        if node.path in paths:
            raise InputError(f"{where}.path: {node.path!r} appears twice — each category once")
        paths.add(node.path)
    parents = {p.rsplit("/", 1)[0] for p in paths if "/" in p}
    seen: set[str] = set()
    for i, chunk in enumerate(doc.chunks):
        where = f"{label}: chunks[{i}]"
        if chunk.chunk_id in seen:
            raise InputError(f"{where}.chunk_id: {chunk.chunk_id!r} appears twice — a chunk sits in one leaf")
        seen.add(chunk.chunk_id)
        if chunk.path not in paths:
            raise InputError(f"{where}.path: {chunk.path!r} is not among the document's nodes",
                             hint="add the category to 'nodes' or move the chunk to an existing leaf")
        if chunk.path in parents:
            raise InputError(f"{where}.path: {chunk.path!r} has subcategories; chunks sit in leaves only")
        if _CONTROL.search(chunk.snippet):
            raise InputError(f"{where}.snippet: contains a control character or line break — keep it on one line")


# rendering ------------------------------------------------------------------------------------

_MD_ALWAYS = re.compile(r"([\\`*\[\]<>~])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|&(?=#?\w+;)")
_MD_BLOCK_START = re.compile(r"^(\s*)(?:([#+\-=>|])|(\d+)([.)]))")


def _md(text: str) -> str:
    """``text`` as literal CommonMark inline text (nothing in it becomes markup, a heading or a list)."""
    text = _MD_ALWAYS.sub(lambda m: "\\" + m.group(0), _CONTROL.sub(" ", text))
    return _MD_BLOCK_START.sub(lambda m: m.group(1) + ("\\" + m.group(2) if m.group(2)
                                                        else m.group(3) + "\\" + m.group(4)), text)


def render_markdown(doc: TreeDocument, *, depth: int | None = None, link_base: str = "",
                    roots: Mapping[str, str] | None = None) -> str:
    """A nested list: ``**name** (count) — description``; chunks as ``[id](source) snippet`` under leaves."""
    base = check_link_base(link_base)
    kids, leaves = children_index(doc)
    out = [f"# Knowledge map: {_md(display_title(doc))}", "", _md(summary_line(doc)), ""]
    top_level = min((n.level for n in doc.nodes), default=1)

    def walk(node: NodeEntry, indent: int) -> None:
        desc = f" — {_md(node.description)}" if node.description else ""
        out.append(f"{'  ' * indent}- **{_md(node.name)}** ({node.chunk_count}){desc}")
        if depth is not None and node.level - top_level + 1 >= depth:
            return
        for child in kids.get(node.path, []):
            walk(child, indent + 1)
        for chunk in leaves.get(node.path, []):
            href = source_href(chunk, base, roots)
            ident = f"[{_md(chunk.chunk_id)}](<{href}>)" if href else _md(chunk.chunk_id)
            out.append(f"{'  ' * (indent + 1)}- {ident} {_md(chunk.snippet)}")

    for node in kids.get("root", []):
        walk(node, 0)
    if not doc.nodes:
        out.append("_No tree yet: run `kt build`._")
    return "\n".join(out) + "\n"


def _mermaid_label(text: str) -> str:
    # entity codes are Mermaid's escape inside a quoted label; '#' first so the codes survive
    text = _CONTROL.sub(" ", text).replace("#", "#35;")
    for char, code in (('"', "#quot;"), ("<", "#lt;"), (">", "#gt;"), ("`", "#96;")):
        text = text.replace(char, code)
    return text


def render_mermaid(doc: TreeDocument, *, depth: int | None = None) -> tuple[str, list[str]]:
    """A ``flowchart LR`` of the categories with counts (chunks are left out), and warnings."""
    kids, _ = children_index(doc)
    tops = kids.get("root", [])
    title = _mermaid_label(display_title(doc))
    ids = {"root": "n0"}
    top_level = min((n.level for n in doc.nodes), default=1)
    if doc.root != "root" and len(tops) == 1 and tops[0].path == doc.root:  # a subtree: its node is the root
        ids = {doc.root: "n0"}
        lines = ["flowchart LR", f'  n0["{title} · {tops[0].chunk_count}"]']
        top_level += 1
        tops = kids.get(doc.root, [])
        parent_of_tops = doc.root
    else:
        lines = ["flowchart LR", f'  n0["{title} · {doc.chunk_count}"]']
        parent_of_tops = "root"
    edges = 0

    def walk(parent: str, node: NodeEntry) -> None:
        nonlocal edges
        ids[node.path] = f"n{len(ids)}"
        lines.append(f'  {ids[parent]} --> {ids[node.path]}["{_mermaid_label(node.name)} · {node.chunk_count}"]')
        edges += 1
        if depth is None or node.level - top_level + 1 < depth:
            for child in kids.get(node.path, []):
                walk(node.path, child)

    for node in tops:
        walk(parent_of_tops, node)
    text = "\n".join(lines) + "\n"
    warnings = []
    if edges > MERMAID_MAX_EDGES or len(text) > MERMAID_MAX_TEXT:
        warnings.append(f"the diagram has {edges} edges and {len(text)} characters; Mermaid viewers draw at most "
                        f"{MERMAID_MAX_EDGES} edges and {MERMAID_MAX_TEXT} characters by default — "
                        "export a subtree (kt export PATH) or fewer levels (--depth N)")
    return text, warnings


def render_html(doc: TreeDocument, *, link_base: str = "", roots: Mapping[str, str] | None = None) -> str:
    """One self-contained page (inline CSS and JS, no network): a collapsible tree with counts,
    descriptions and snippets, a filter box, and a link per chunk to its source file."""
    return export_page.render(doc, link_base=check_link_base(link_base), roots=roots)


def render(doc: TreeDocument, fmt: str, *, depth: int | None = None, link_base: str = "",
           roots: Mapping[str, str] | None = None) -> tuple[str, list[str]]:
    """``doc`` in ``fmt`` (json, markdown, mermaid, html) and any warnings about the result.

    ``roots`` (source name -> folder, relative to where the export goes) makes the markdown and html
    links to source files open from there (`source_href`)."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}", hint="use " + ", ".join(FORMATS))
    if depth is not None and fmt in ("json", "html"):
        raise ConfigError(f"--depth does not apply to {fmt}: that export always holds the whole (sub)tree",
                          hint="use --depth with markdown or mermaid, or export a subtree by PATH")
    if depth is not None and depth < 1:
        raise ConfigError(f"--depth must be at least 1, got {depth}")
    if fmt == "json":
        return doc.to_json(), []
    if fmt == "markdown":
        return render_markdown(doc, depth=depth, link_base=link_base, roots=roots), []
    if fmt == "mermaid":
        return render_mermaid(doc, depth=depth)
    return render_html(doc, link_base=link_base, roots=roots), []


# files ----------------------------------------------------------------------------------------

def write_new_file(dest: str | Path, text: str, *, force: bool = False) -> int:
    """Write ``text`` to ``dest`` atomically; an existing file is replaced only with ``force``.

    Returns the number of bytes written. Raises ConfigError when ``dest`` exists and not ``force``.
    """
    target = Path(dest)
    if target.is_dir():
        raise ConfigError(f"{target}: is a directory", hint="give a file name, e.g. -o map.html")
    if target.exists() and not force:
        raise ConfigError(f"{target}: already exists — not overwritten", hint="pass --force to replace it")
    if not target.parent.exists():
        raise ConfigError(f"{target.parent}: no such directory", hint="create it first or write elsewhere")
    data = text.encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes 0600; an export is an ordinary file
        if force:
            os.replace(tmp, target)
        else:
            _link_new(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return len(data)


def _link_new(tmp: str, target: Path) -> None:
    """Give ``tmp`` the name ``target`` unless that name exists (checked atomically where links work)."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise ConfigError(f"{target}: already exists — not overwritten", hint="pass --force to replace it") from None
    except OSError:  # a file system without hard links: check, then rename
        if target.exists():
            raise ConfigError(f"{target}: already exists — not overwritten", hint="pass --force to replace it") from None
        os.replace(tmp, target)


def read_document_file(path: str, stdin: Any = None) -> tuple[bytes | str, str]:
    """The bytes of a tree document file (``-`` reads ``stdin``) and its label for messages."""
    if path == "-":
        return (stdin or sys.stdin).read(), "<stdin>"
    target = Path(path)
    try:
        return target.read_bytes(), path
    except FileNotFoundError:
        raise InputError(f"{path}: no such file", hint="export a tree first: kt export --format json -o FILE") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory", hint="give the JSON file written by kt export") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})", hint="check the path and permissions") from None
