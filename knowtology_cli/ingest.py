"""Reading ingest input: JSONL / BEIR chunk files, stdin, and documents (Markdown, reST, HTML, PDF, text).

Everything is read and validated before anything is written, so bad input changes nothing.
Problems read ``file:line: what is wrong — what to do``.

Duplicate chunk ids: within one run the first occurrence wins and every later one is a problem
(an error unless ``--skip-invalid``); across runs a chunk id is a key, so re-ingesting it from
another file replaces the stored row (last write wins).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .errors import InputError, KnowtologyError
from .models import Chunk
from .parsers import detect_format

DOC_SUFFIXES = {".md", ".markdown", ".mdown", ".mkd", ".txt", ".text", ".rst", ".rest", ".html", ".htm", ".xhtml", ".pdf"}
JSONL_SUFFIXES = {".jsonl", ".ndjson"}
DOC_KINDS = ".md, .rst, .html, .pdf, .txt (also .rst.txt, .md.txt, .htm)"
MAX_TEXT_CHARS = 1_000_000
MAX_ID_CHARS = 512


def content_hash(text: str, title: str = "", metadata: dict[str, Any] | None = None) -> str:
    """Stable hash of what a row holds; unchanged hash means nothing to re-embed."""
    payload = json.dumps([title, text, metadata or {}], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


@dataclass
class InputBatch:
    """Chunks read from all inputs, the files they came from, and the problems found.

    ``scopes`` are the file-name prefixes of directory inputs (``dirname/``): with ``--prune`` a
    stored document under a scope whose file is gone is deleted too.
    """

    chunks: list[Chunk] = field(default_factory=list)
    files: set[str] = field(default_factory=set)
    scopes: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)
    junk_merged: int = 0
    junk_dropped: int = 0

    def add(self, chunk: Chunk, where: str) -> None:
        if chunk.chunk_id in self.origins:
            self.problems.append(
                f"{where}: duplicate chunk_id {chunk.chunk_id!r} (first at {self.origins[chunk.chunk_id]})"
                " — give each chunk a unique id"
            )
            return
        self.origins[chunk.chunk_id] = where
        self.chunks.append(chunk)


def read_inputs(
    paths: Iterable[str], *, stdin: IO[str] | None = None, max_tokens: int = 450, target_tokens: int = 300
) -> InputBatch:
    """Read every path (file, directory or ``-``) into one validated batch."""
    batch = InputBatch()
    for raw in paths:
        if raw == "-":
            _read_jsonl_stream(stdin or sys.stdin, "<stdin>", "stdin", batch)
            continue
        path = Path(raw)
        if not path.exists() and not path.is_symlink():
            batch.problems.append(f"{raw}: no such file or directory — check the path")
            continue
        if path.is_dir():
            files = sorted(_walk(path, batch))
            prefix = path.resolve().name
            batch.scopes.add(prefix + "/")
            if not files:
                batch.problems.append(
                    f"{raw}: no {DOC_KINDS} or .jsonl files found — point at documents or chunk files"
                )
            for file in files:
                _read_file(file, f"{prefix}/{file.relative_to(path).as_posix()}", batch, max_tokens, target_tokens)
        else:
            _read_file(path, path.name if path.is_absolute() else path.as_posix(), batch, max_tokens, target_tokens)
    return batch


def _walk(root: Path, batch: InputBatch) -> Iterator[Path]:
    seen: set[tuple[int, int]] = set()
    for directory, dirnames, filenames in os.walk(root, followlinks=True, onerror=lambda e: batch.problems.append(
        f"{e.filename}: cannot read directory ({e.strerror}) — fix its permissions")):
        try:
            stat = os.stat(directory)
        except OSError:
            continue
        key = (stat.st_dev, stat.st_ino)
        if key in seen:  # a symlink loop or a second link to the same directory
            dirnames[:] = []
            continue
        seen.add(key)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            if Path(name).suffix.lower() in JSONL_SUFFIXES or detect_format(name) is not None:
                yield Path(directory, name)


def _read_bytes(path: Path, label: str, batch: InputBatch) -> bytes | None:
    try:
        return path.read_bytes()
    except IsADirectoryError:
        batch.problems.append(f"{label}: is a directory — pass it without a trailing file name")
    except OSError as exc:
        batch.problems.append(f"{label}: cannot read ({exc.strerror or exc}) — check permissions")
    return None


def _decode(data: bytes, label: str, batch: InputBatch) -> str | None:
    from .parsers import decode_text

    try:
        return decode_text(data, label)
    except InputError as exc:
        batch.problems.append(exc.message)
        return None


def _read_file(path: Path, label: str, batch: InputBatch, max_tokens: int, target_tokens: int) -> None:
    is_jsonl = path.suffix.lower() in JSONL_SUFFIXES
    fmt = None if is_jsonl else detect_format(path.name)
    if not is_jsonl and fmt is None:
        batch.problems.append(f"{label}: unsupported file type {path.suffix or '(none)'} — use {DOC_KINDS} or .jsonl")
        return
    data = _read_bytes(path, label, batch)
    if data is None:
        return
    if is_jsonl:
        text = _decode(data, label, batch)
        if text is not None:
            batch.files.add(label)
            _read_jsonl_lines(_jsonl_lines(text), label, label, batch)
        return
    fmt = detect_format(path.name, head=data[:4096])
    content: bytes | str | None = data if fmt in ("pdf", "html") else _decode(data, label, batch)
    if content is None:
        return
    batch.files.add(label)
    _read_document(content, label, batch, max_tokens, target_tokens, fmt=fmt)


def _read_document(
    data: bytes | str, label: str, batch: InputBatch, max_tokens: int, target_tokens: int, *, fmt: str | None = None
) -> None:
    """Parse one document and add its chunks; each carries its section, source range and parser."""
    from .chunking import chunk_document
    from .parsers import parse

    if not (data.strip() if isinstance(data, str) else data.strip(b" \t\r\n\xef\xbb\xbf")):
        batch.problems.append(f"{label}: empty document — remove it or add text")
        return
    try:
        document = parse(data, name=label, format=fmt)
    except InputError as exc:
        batch.problems.append(exc.message)
        return
    except KnowtologyError as exc:  # e.g. the format's optional parser is not installed
        batch.problems.append(f"{label}: {exc.message}" + (f" — {exc.hint}" if exc.hint else ""))
        return
    except Exception as exc:  # a parser library failing on one file must not stop the others
        batch.problems.append(f"{label}: cannot parse as {fmt or 'a document'} ({type(exc).__name__}: {exc}) — "
                              "check the file opens in its usual viewer")
        return
    result = chunk_document(document, file_name=label, max_tokens=max_tokens, target_tokens=target_tokens)
    batch.junk_merged += result.junk_merged
    batch.junk_dropped += result.junk_dropped
    if not result.chunks:
        if document.format == "pdf":
            batch.problems.append(f"{label}: no extractable text (a scanned PDF?) — run OCR on it or ingest a text version")
        else:
            batch.problems.append(f"{label}: no text to index, only markup or headings — add content or remove the file")
        return
    for piece in result.chunks:
        metadata: dict[str, Any] = {"section": piece.section, f"{piece.unit}s": [piece.start, piece.end],
                                    "parser": result.parser}
        chunk = Chunk(
            chunk_id=f"{label}#{piece.index}",
            text=piece.text,
            doc_id=label,
            file_name=label,
            chunk_index=piece.index,
            title=piece.title,
            content_hash=content_hash(piece.text, piece.title, metadata),
            metadata=metadata,
        )
        batch.add(chunk, f"{label}#{piece.index}")


def _read_jsonl_stream(stream: IO[str], label: str, file_name: str, batch: InputBatch) -> None:
    try:
        lines = _jsonl_lines(stream.read().lstrip("\ufeff"))
    except UnicodeDecodeError as exc:
        batch.problems.append(f"{label}: not valid UTF-8 ({exc.reason}) — re-encode the input as UTF-8")
        return
    batch.files.add(file_name)
    _read_jsonl_lines(lines, label, file_name, batch)


def _jsonl_lines(text: str) -> list[str]:
    """Lines split on LF (CRLF too) only: U+2028, U+0085 and lone CR are legal inside JSON strings."""
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]


def _read_jsonl_lines(lines: list[str], label: str, file_name: str, batch: InputBatch) -> None:
    found = False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        found = True
        where = f"{label}:{number}"
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            batch.problems.append(f"{where}: invalid JSON ({reason}) — fix or remove the line")
            continue
        chunk = _chunk_from_object(obj, where, file_name, batch)
        if chunk is not None:
            batch.add(chunk, where)
    if not found:
        batch.problems.append(f"{label}: empty file, no chunks — add one JSON object per line")


def _chunk_from_object(obj: Any, where: str, file_name: str, batch: InputBatch) -> Chunk | None:
    if not isinstance(obj, dict):
        batch.problems.append(f"{where}: expected a JSON object, got {type(obj).__name__} — one object per line")
        return None
    text = obj.get("text")
    if not isinstance(text, str):
        what = "missing" if text is None else f"a {type(text).__name__}, not a string"
        batch.problems.append(f"{where}: 'text' is {what} — every line needs a string 'text'")
        return None
    text = text.replace("\r\n", "\n")
    if not text.strip():
        batch.problems.append(f"{where}: 'text' is empty — remove the line or add text")
        return None
    if len(text) > MAX_TEXT_CHARS:
        batch.problems.append(
            f"{where}: 'text' has {len(text):,} characters (max {MAX_TEXT_CHARS:,}) — split it into smaller chunks"
        )
        return None
    title = obj.get("title") or ""
    metadata = obj.get("metadata") or {}
    if not isinstance(title, str):
        batch.problems.append(f"{where}: 'title' must be a string — fix or drop the title")
        return None
    if not isinstance(metadata, dict):
        batch.problems.append(f"{where}: 'metadata' must be a JSON object — wrap the values in {{...}} or drop it")
        return None
    doc_id = obj.get("doc_id")
    index = obj.get("chunk_index")
    if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
        batch.problems.append(f"{where}: 'chunk_index' must be a non-negative integer — fix or drop it")
        return None
    raw_id = next((obj[k] for k in ("chunk_id", "_id", "id") if obj.get(k) not in (None, "")), None)
    if raw_id is not None and not isinstance(raw_id, (str, int)) or isinstance(raw_id, bool):
        batch.problems.append(f"{where}: 'chunk_id' must be a string or integer — fix the id or drop it")
        return None
    if raw_id is None:
        if doc_id not in (None, "") and index is not None:
            raw_id = f"{doc_id}#{index}"
        else:
            raw_id = "h-" + content_hash(text, title)[:20]
    chunk_id = str(raw_id)
    if len(chunk_id) > MAX_ID_CHARS or any(ord(ch) < 32 for ch in chunk_id):
        batch.problems.append(
            f"{where}: chunk_id is longer than {MAX_ID_CHARS} characters or has control characters — shorten it"
        )
        return None
    return Chunk(
        chunk_id=chunk_id,
        text=text,
        doc_id=str(doc_id) if doc_id not in (None, "") else str(obj.get("_id") or chunk_id),
        file_name=str(obj.get("file_name") or file_name),
        chunk_index=int(index or 0),
        title=title,
        content_hash=content_hash(text, title, metadata),
        metadata=metadata,
    )


def require_valid(batch: InputBatch, skip_invalid: bool) -> None:
    """Raise ``InputError`` naming the first problem unless ``skip_invalid``."""
    if batch.problems and not skip_invalid:
        more = f" (+{len(batch.problems) - 1} more)" if len(batch.problems) > 1 else ""
        raise InputError(
            batch.problems[0] + more,
            hint="fix the input, or pass --skip-invalid to ingest the valid rows and list the rest",
            problems=batch.problems,
        )
