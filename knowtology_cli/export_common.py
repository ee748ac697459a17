"""What every rendering of a tree document shares: child lists, source links and labels, titles."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote

from .errors import ConfigError

if TYPE_CHECKING:
    from .export import ChunkEntry, NodeEntry, TreeDocument

#: Link bases may name these schemes (anything else could run script in a browser).
_SAFE_SCHEMES = ("http", "https", "file")


def children_index(doc: TreeDocument) -> tuple[dict[str, list[NodeEntry]], dict[str, list[ChunkEntry]]]:
    """Child categories by parent path (``"root"`` for the top, by name) and chunks by leaf path."""
    kids: dict[str, list[NodeEntry]] = {}
    paths = {n.path for n in doc.nodes}
    for node in doc.nodes:
        parent = node.path.rsplit("/", 1)[0] if "/" in node.path else "root"
        kids.setdefault(parent if parent in paths else "root", []).append(node)
    for value in kids.values():
        value.sort(key=lambda n: n.name)
    leaves: dict[str, list[ChunkEntry]] = {}
    for chunk in doc.chunks:
        leaves.setdefault(chunk.path, []).append(chunk)
    return kids, leaves


def check_link_base(link_base: str) -> str:
    """``link_base`` ending in ``/`` ('' stays ''); a scheme other than http(s) or file is refused."""
    if not link_base:
        return ""
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*):", link_base)
    if scheme and scheme.group(1).lower() not in _SAFE_SCHEMES:
        raise ConfigError(f"unsupported link base {link_base!r}",
                          hint="use an http(s):// or file:// URL, or a relative directory such as ../docs/")
    return link_base if link_base.endswith("/") else link_base + "/"


def source_href(chunk: ChunkEntry, link_base: str = "", roots: Mapping[str, str] | None = None) -> str | None:
    """The link to the chunk's source file (``link_base`` + file, a ``#L`` or ``#page=`` fragment), or None.

    Without a link base, ``roots`` (source name -> its folder, relative to where the export is
    written) turns ``source/path`` into the file's path from there, so the link opens the file.
    """
    if not chunk.file_name:
        return None
    name = chunk.file_name.replace("\\", "/")
    source, _, inside = name.partition("/")
    if not link_base and roots and inside and source in roots:
        name = f"{roots[source].rstrip('/')}/{inside}"
    # quoting ':' keeps any file name relative: it can never become a javascript: or data: URL
    path = quote(name, safe="/")
    path = re.sub(r"^/+", "/", path)
    href = (link_base.rstrip("/") + "/" + path.lstrip("/")) if link_base else path
    if chunk.lines:
        href += f"#L{chunk.lines[0]}-L{chunk.lines[1]}"
    elif chunk.pages:
        href += f"#page={chunk.pages[0]}"
    return href


def source_label(chunk: ChunkEntry) -> str:
    """``file:120-164`` (lines), ``file:p3-4`` (pages), else the file name — the form ``kt read`` cites."""
    label = chunk.file_name or chunk.doc_id
    for prefix, span in (("", chunk.lines), ("p", chunk.pages)):
        if span:
            return f"{label}:{prefix}{span[0]}" + (f"-{span[1]}" if span[1] != span[0] else "")
    return label


def summary_line(doc: TreeDocument) -> str:
    """``232 chunks · 64 categories · built with cluster`` for page and outline headers."""
    parts = [f"{doc.chunk_count} chunks", f"{len(doc.nodes)} categories"]
    if doc.builder:
        parts.append(f"built with {doc.builder}")
    if doc.unmapped:
        parts.append(f"{len(doc.unmapped)} unmapped")
    return " · ".join(parts)


def display_title(doc: TreeDocument) -> str:
    """The collection, and the exported subtree's path when there is one."""
    return doc.collection + ("" if doc.root == "root" else f" › {doc.root.replace('/', ' › ')}")


# CommonMark: these always start inline markup; '_' only at a word edge, '&' only as an entity
