"""Where a chunk comes from: its section title path and source range, read from chunk metadata."""

from __future__ import annotations

import json
from typing import Any


def _range(value: Any) -> tuple[int, int] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                                   for v in value):
        return int(value[0]), int(value[1])
    return None


def provenance(metadata: dict[str, Any] | str | None) -> dict[str, Any]:
    """``{"section", "lines", "pages"}`` from chunk metadata (a dict or its JSON); absent parts are empty.

    Document chunks carry ``{"section": "A › B", "lines": [first, last], "parser": "markdown/1"}``
    (``"pages"`` for PDF) in their metadata; records expose them as ``section``, ``lines`` and
    ``pages``, and `cite` writes the reference a reader opens: ``guide.md:120-164``, ``manual.pdf:p3-4``.
    """
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata) if metadata else {}
        except ValueError:
            metadata = {}
    if not isinstance(metadata, dict):
        metadata = {}
    section = metadata.get("section")
    return {
        "section": section if isinstance(section, str) else "",
        "lines": _range(metadata.get("lines")),
        "pages": _range(metadata.get("pages")),
    }


def provenance_json(metadata: dict[str, Any] | None) -> str:
    """The compact JSON a tree store keeps beside a mapping ('' when the chunk has no provenance)."""
    found = provenance(metadata)
    kept = {k: list(v) if isinstance(v, tuple) else v for k, v in found.items() if v}
    return json.dumps(kept, ensure_ascii=False, separators=(",", ":")) if kept else ""


def span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def cite(file_name: str, lines: tuple[int, int] | None = None, pages: tuple[int, int] | None = None) -> str:
    """``file.md:120-164`` for lines, ``file.pdf:p3-4`` for pages, the bare name without a range."""
    if lines:
        return f"{file_name}:{span(*lines)}"
    if pages:
        return f"{file_name}:p{span(*pages)}"
    return file_name
