"""Reading ingest input: JSONL / BEIR chunk files, stdin, and documents (Markdown, reST, HTML, PDF, text).

Everything is read and validated before anything is written; problems read ``file:line: problem — fix``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import stat
import sys
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

import pathspec

from .chunking import chunk_document
from .errors import ConfigError, ConflictError, InputError, KnowtologyError
from .models import Chunk
from .parsers import COMPRESSED, RST_HEAD, decode_text, detect_format, parse, plain_text_name
from .parsers.base import walk_files
from .textutil import more_suffix

JSONL_SUFFIXES = {".jsonl", ".ndjson"}
#: A file of gitignore patterns in an ingested folder, or in any folder below it: the files it matches
#: (relative to its own folder) are not read (`_Excluded`); ``kt status`` and re-scans agree.
IGNORE_FILE = ".ktignore"
DOC_KINDS = ".md, .rst, .html, .pdf, .txt, .adoc (also .rst.txt, .md.txt, .htm; each also gzipped, .gz)"
MAX_TEXT_CHARS = 1_000_000
#: The most bytes a gzip-compressed document may hold once decompressed (a larger one is reported,
#: not read: a small file that inflates without end is no document).
MAX_INFLATED_BYTES = 256_000_000
MAX_ID_CHARS = 512
MAX_SOURCE_CHARS = 128
#: The root recorded for a source read from standard input.
STDIN_ROOT = "-"
STDIN_SOURCE = "stdin"


def content_hash(text: str, title: str = "", metadata: dict[str, Any] | None = None) -> str:
    """Stable hash of what a row holds; unchanged hash means nothing to re-embed."""
    payload = json.dumps([title, text, metadata or {}], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class Source:
    """Where documents come from: a name (the first segment of their ids) and a resolved root.

    ``kind`` says what a re-scan reads: ``dir`` (the root folder was ingested whole: walk it),
    ``files`` (only single files under the root were ingested: re-read those) or ``stdin``.
    """

    name: str
    root: str
    kind: str = "dir"

    @property
    def path(self) -> Path | None:
        """The root as a path (None for standard input)."""
        return None if self.root == STDIN_ROOT else Path(self.root)


def in_scope(origin: str, prefix: str) -> bool:
    """True when the path ``origin`` inside a source is ``prefix``, lies under it, or ``prefix`` is the root."""
    return not prefix or origin == prefix or origin.startswith(prefix + "/")


def validate_source_name(name: str) -> str:
    """``name`` if it can lead chunk ids (no ``/``, no control characters), else ``ConfigError``."""
    if (not isinstance(name, str) or not name.strip() or name != name.strip() or "/" in name or "#" in name
            or name in {".", ".."} or len(name) > MAX_SOURCE_CHARS or any(ord(ch) < 32 for ch in name)):
        raise ConfigError(
            f"invalid source name {name!r}",
            hint=f"a source name is 1-{MAX_SOURCE_CHARS} characters without '/', '#' or control characters;"
                 " choose one with --source NAME",
        )
    return name


def real_path(path: str | Path) -> Path:
    """``path`` made absolute with its folder's symlinks resolved (a file's own link is kept, so a
    linked file keeps the name it has in the folder). Works for paths that no longer exist."""
    path = Path(path).expanduser()
    if path.is_dir():
        return path.resolve()
    return path.absolute().parent.resolve() / path.name


def locate(path: str | Path, sources: Iterable[Source]) -> tuple[Source, str] | None:
    """The source whose root holds ``path`` (the deepest root wins) and the path inside it ('' = the root)."""
    real = real_path(path)
    best: Source | None = None
    for source in sources:
        root = source.path
        if root is not None and (real == root or root in real.parents):
            if best is None or len(root.parts) > len(Path(best.root).parts):
                best = source
    if best is None:
        return None
    return best, "" if real == Path(best.root) else real.relative_to(best.root).as_posix()


@dataclass
class InputBatch:
    """Chunks read from all inputs, where each came from, and the problems found.

    ``owners`` maps each chunk id to ``(source name, path inside the source)``; ``scopes`` are the
    ``(source, path prefix)`` pairs this run read completely, so with ``--prune`` a stored chunk of
    a scope that was not read again is deleted. ``sources`` are the sources the run touched (new
    ones included); ``files`` the labels (``source/path``) of the files read; ``documents`` those
    parsed whole as documents, whose chunks this run replaces (a page that shrank loses its surplus).
    """

    chunks: list[Chunk] = field(default_factory=list)
    files: set[str] = field(default_factory=set)
    documents: set[str] = field(default_factory=set)
    scopes: set[tuple[str, str]] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)
    owners: dict[str, tuple[str, str]] = field(default_factory=dict)
    sources: dict[str, Source] = field(default_factory=dict)
    junk_merged: int = 0
    junk_dropped: int = 0
    #: paths given that do not exist (no --skip-invalid can help with those)
    missing: list[str] = field(default_factory=list)
    #: documents that parse but hold only markup or headings (a toctree page, an include stub), or
    #: nothing at all (a placeholder): nothing to index, and nothing wrong with them
    no_text: list[str] = field(default_factory=list)
    #: HTML pages that send the reader straight on (``meta refresh``, no delay): document -> address
    redirects: dict[str, str] = field(default_factory=dict)
    #: where each document read from disk is (label -> resolved path), to know included fragments
    locations: dict[str, str] = field(default_factory=dict)
    #: files each document took in whole (reST ``include``, nested ones too): label -> resolved paths
    includes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: fragments read as part of the documents that include them, not indexed alone: label -> includer
    fragments: dict[str, str] = field(default_factory=dict)
    #: includes that could not be read: document -> ``argument (why)`` for each
    unread_includes: dict[str, list[str]] = field(default_factory=dict)
    #: directives inserting docstrings of code (``.. autoclass::``), not read: document -> how many
    unread_docstrings: dict[str, int] = field(default_factory=dict)
    #: links to another file of the folder, read once under the file's own name: link -> file
    linked: dict[str, str] = field(default_factory=dict)
    #: symbolic links to nothing, skipped: ``link → target``
    broken_links: list[str] = field(default_factory=list)
    #: files on disk this run could not read (a problem each): their stored chunks are no "gone" file's
    failed: set[str] = field(default_factory=set)
    #: files of the walked folders that are no document kt reads (images, scripts…): extension -> count
    other_files: dict[str, int] = field(default_factory=dict)
    #: hidden folders (a leading ``.``) the walk skipped, as the user would name them
    hidden_folders: list[str] = field(default_factory=list)
    #: files a `.ktignore` (`IGNORE_FILE`) left out, by label (``source/path``)
    excluded: list[str] = field(default_factory=list)

    def not_a_document(self, name: str) -> None:
        """Count a file of the walked folders that kt does not read, by its kind (`_kind`)."""
        kind = _kind(name)
        self.other_files[kind] = self.other_files.get(kind, 0) + 1

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
    paths: Iterable[str],
    *,
    stdin: IO[str] | None = None,
    max_tokens: int = 450,
    target_tokens: int = 300,
    sources: Mapping[str, Source] | None = None,
    source_name: str | None = None,
    replace: bool = False,
) -> InputBatch:
    """Read every path (file, directory or ``-``) into one validated batch.

    Identity. Every input belongs to a *source*: a name and a resolved root folder (symlinks followed),
    recorded in the tree store. A document's id is ``<source name>/<path inside the root>#<n>``, so
    the same folder reached through any spelling or working directory yields the same ids. A folder
    argument is a source of its own (default name: the folder's name) unless it lies inside a
    registered root, in which case it is that part of the registered source; a single file belongs
    to the registered root that holds it, else to its folder. The deepest registered root wins, so a
    folder that holds another source's root leaves those files to that source. Standard input is the
    source ``stdin`` unless named. A name already registered for another root is a conflict
    (:class:`~knowtology_cli.errors.ConflictError`), raised before any file is read, unless
    ``replace`` re-points the name at the new root.

    Duplicate chunk ids within one run: the first occurrence wins and every later one is a problem
    (an error unless ``--skip-invalid``). Across runs a chunk id belongs to the source that stored
    it; :meth:`KnowledgeBase.ingest` refuses ids another source owns unless told to replace them.

    Args:
        paths: what to read.
        stdin: the stream ``-`` reads (default: ``sys.stdin``).
        sources: the collection's registered sources by name.
        source_name: the name to register or use for the (single) path, instead of its folder's name.
        replace: let a name registered for another root point at the new one.

    A folder's files matched by an `IGNORE_FILE` (gitignore syntax) in it or in a folder between it
    and the file are not read, and are listed in ``excluded``.

    Raises:
        ConflictError: a source name is registered (or used earlier in ``paths``) for another root.
    """
    paths = list(paths)
    if source_name is not None and len(paths) > 1:
        raise ConfigError(f"--source {source_name} names one source but {len(paths)} paths were given",
                          hint="ingest each folder on its own with its own --source NAME")
    batch = InputBatch()
    registry = dict(sources or {})
    fresh: set[str] = set()
    plans = [_plan(raw, registry, fresh, batch, source_name, replace) for raw in paths]
    for raw, plan in zip(paths, plans):
        if plan is None:
            continue
        source, prefix = plan
        batch.sources[source.name] = source
        if raw == "-":
            batch.scopes.add((source.name, ""))
            _read_owned(batch, source, "",
                        lambda s=source: _read_jsonl_stream(stdin or sys.stdin, "<stdin>", s.name, batch))
            continue
        path = Path(raw)
        if path.is_dir():
            _read_folder(path, source, prefix, registry, batch, max_tokens, target_tokens)
        else:
            batch.scopes.add((source.name, prefix))
            label = f"{source.name}/{prefix}"
            _read_owned(batch, source, prefix,
                        lambda p=path, lb=label, s=source: _read_file(p, lb, batch, max_tokens, target_tokens,
                                                                     root=s.path))
    _set_fragments_aside(batch)
    return batch


def _set_fragments_aside(batch: InputBatch) -> None:
    """Drop the chunks of files another document of this run includes: their text is in that document.

    Sphinx reads ``shared-note.txt`` only where a page includes it, and so does `parse_rst`; indexed
    alone too, the fragment would be a second copy, cut off from the substitutions its pages define.
    The fragment stays among ``documents``, so chunks an earlier run stored for it are removed.
    """
    if not batch.includes:
        return
    # a page no other document includes reads its fragments; files that only include each other (a
    # cycle with no page above it) stay documents, so no text is lost
    taken = {where for label, wheres in batch.includes.items() for where in wheres if where != batch.locations.get(label)}
    pages = [label for label in batch.includes if batch.locations.get(label) not in taken]
    reader: dict[str, str] = {}
    for page in pages:
        for where in batch.includes[page]:
            reader.setdefault(where, page)
    fragments = {label: reader[where] for label, where in batch.locations.items() if where in reader}
    if not fragments:
        return
    gone = {chunk.chunk_id for chunk in batch.chunks if chunk.file_name in fragments}
    batch.chunks = [chunk for chunk in batch.chunks if chunk.chunk_id not in gone]
    for chunk_id in gone:
        batch.origins.pop(chunk_id, None)
        batch.owners.pop(chunk_id, None)
    batch.no_text = [label for label in batch.no_text if label not in fragments]
    batch.fragments.update(fragments)


def read_records(
    records: Iterable[Mapping[str, Any] | Chunk],
    *,
    sources: Mapping[str, Source] | None = None,
    source_name: str | None = None,
    replace: bool = False,
    label: str = "<chunks>",
) -> InputBatch:
    """Read chunks given as Python objects (dicts with a JSONL line's fields, or ``Chunk``s) into
    one validated batch, the way ``-`` reads JSONL lines: the source is ``stdin`` unless named and
    every chunk is checked alike; a problem names ``<label>:N`` (N counts from 1)."""
    batch = InputBatch()
    registry = dict(sources or {})
    if source_name is not None:
        validate_source_name(source_name)
    source = _claim(Source(source_name or STDIN_SOURCE, STDIN_ROOT, "stdin"), registry, set(), STDIN_ROOT, replace,
                    explicit=source_name is not None)
    batch.sources[source.name] = source
    batch.scopes.add((source.name, ""))

    def read() -> None:
        found = False
        for number, record in enumerate(records, start=1):
            found = True
            where = f"{label}:{number}"
            obj = record.model_dump() if isinstance(record, Chunk) else record
            chunk = _chunk_from_object(dict(obj) if isinstance(obj, Mapping) else obj, where, source.name, batch)
            if chunk is not None:
                batch.add(chunk, where)
        batch.files.add(source.name)
        if not found:
            batch.problems.append(f"{label}: no chunks given — pass at least one chunk with a 'text'")

    _read_owned(batch, source, "", read)
    return batch


def _plan(raw: str, registry: dict[str, Source], fresh: set[str], batch: InputBatch, name: str | None,
          replace: bool) -> tuple[Source, str] | None:
    """The source and the path inside it that ``raw`` reads; registers new sources in ``registry``."""
    if name is not None:
        validate_source_name(name)
    if raw == "-":
        wanted = Source(name or STDIN_SOURCE, STDIN_ROOT, "stdin")
        return _claim(wanted, registry, fresh, raw, replace, explicit=name is not None), ""
    path = Path(raw)
    if not path.exists() and not path.is_symlink():
        batch.problems.append(f"{raw}: no such file or directory — check the path")
        batch.missing.append(raw)
        return None
    is_dir = path.is_dir()
    real = real_path(path)
    found = locate(real, registry.values())
    if found is not None and is_dir and not found[1] and found[0].kind != "dir":
        found = (Source(found[0].name, found[0].root, "dir"), "")  # its root folder, ingested whole now
        registry[found[0].name] = found[0]
    if name is None and found is not None:
        return found
    folder = real if is_dir else real.parent
    default = name or folder.name
    if not default:
        raise ConfigError(f"{raw}: the filesystem root has no folder name to use as the source name",
                          hint="name the source: --source NAME")
    validate_source_name(default)
    if found is not None:  # an explicit name for a path another source already holds
        owner, inside = found
        if owner.name == name:
            return found
        where = f"the root of source {owner.name!r}" if not inside else f"inside source {owner.name!r} ({owner.root})"
        raise ConflictError(
            f"{raw} ({real}) is {where}; its files are stored under {owner.name!r}",
            hint=f"drop --source to update them there, or `kt rm --source {owner.name}` first",
        )
    kind = "dir" if is_dir else "files"
    return _claim(Source(default, str(folder), kind), registry, fresh, raw, replace, explicit=name is not None), (
        "" if is_dir else path.name)


def _claim(wanted: Source, registry: dict[str, Source], fresh: set[str], raw: str, replace: bool, *,
           explicit: bool) -> Source:
    """``wanted`` registered under its name, the registered source when it has the same root, or a conflict.

    ``fresh`` holds the names first registered by this run: those never give way to ``replace``.
    """
    known = registry.get(wanted.name)
    if known is None or known.root == wanted.root:
        source = wanted if known is None else Source(known.name, known.root,
                                                     "dir" if "dir" in (known.kind, wanted.kind) else known.kind)
        if known is None:
            fresh.add(source.name)
        registry[source.name] = source
        return source
    what = "input" if STDIN_ROOT in (wanted.root, known.root) else "folder"
    message = f"source {wanted.name!r} is already {known.root}; {raw} is {wanted.root}, a different {what}"
    if wanted.name in fresh:
        raise ConflictError(message + " given in the same command — nothing was written",
                            hint=f"ingest it on its own under another name: kt ingest {raw} --source NAME")
    if replace:
        registry[wanted.name] = wanted
        return wanted
    other = "OTHER_NAME" if explicit else "NAME"
    raise ConflictError(message + " — nothing was written",
                        hint=f"add it under its own name: kt ingest {raw} --source {other}; or pass --replace to"
                             f" point {wanted.name!r} at {wanted.root}")


def _read_owned(batch: InputBatch, source: Source, origin: str, read: Any) -> None:
    """Run ``read`` and record ``(source, origin)`` as the owner of every chunk it added."""
    before = len(batch.chunks)
    read()
    for chunk in batch.chunks[before:]:
        batch.owners[chunk.chunk_id] = (source.name, origin)


def _read_folder(path: Path, source: Source, prefix: str, registry: dict[str, Source], batch: InputBatch,
                 max_tokens: int, target_tokens: int) -> None:
    """Read every document under ``path``; files under a deeper registered root go to that source."""
    real = real_path(path)
    nested = [s for s in registry.values() if s.path is not None and real in s.path.parents]
    batch.scopes.add((source.name, prefix))
    for s in nested:
        batch.scopes.add((s.name, ""))
        batch.sources.setdefault(s.name, s)
    def label(f: Path) -> str:
        return "/".join(p for p in (source.name, prefix, f.relative_to(path).as_posix()) if p)

    left_out: list[Path] = []
    files = _one_name_per_file(sorted(_walk(path, batch, left_out)), batch, label)
    batch.excluded.extend(label(f) for f in sorted(left_out))
    if not files:
        batch.problems.append(_nothing_found(path, batch, len(left_out)))
    folders: dict[Path, tuple[Source, str] | None] = {}
    for file in files:
        owner: tuple[Source, str] | None = None
        if nested:
            if file.parent not in folders:
                folders[file.parent] = locate(file.parent.resolve(), nested)
            inner = folders[file.parent]
            if inner is not None:
                owner = (inner[0], "/".join(p for p in (inner[1], file.name) if p))
        if owner is None:
            owner = (source, "/".join(p for p in (prefix, file.relative_to(path).as_posix()) if p))
        src, origin = owner
        _read_owned(batch, src, origin,
                    lambda f=file, lb=f"{src.name}/{origin}", s=src: _read_file(f, lb, batch, max_tokens,
                                                                             target_tokens, root=s.path))


def _one_name_per_file(files: list[Path], batch: InputBatch, label: Any) -> list[Path]:
    """``files`` with each file once: a link to another file of the folder (``index.html`` ->
    ``reference.html``) is the same document, read under the file's own name (``batch.linked``)."""
    first: dict[Path, Path] = {}
    for file in sorted(files, key=lambda f: (f.is_symlink(), f)):  # a real file wins over links to it
        try:
            first.setdefault(file.resolve(), file)
        except (OSError, RuntimeError):  # a link loop: read (and reported) as it is
            first[file] = file
    kept = set(first.values())
    for file in files:
        if file not in kept:
            batch.linked[label(file)] = label(first[file.resolve()])
    return [file for file in files if file in kept]


def document_files(root: Path) -> Iterator[Path]:
    """The files under ``root`` that `kt ingest ROOT` reads, as it walks them (problems not reported)."""
    return _walk(root, InputBatch())


def _nothing_found(path: Path, batch: InputBatch, left_out: int = 0) -> str:
    """The problem line of a folder without documents; it names the hidden folders that hold some,
    or the `IGNORE_FILE` that left out ``left_out`` files."""
    if left_out and not [h for h in batch.hidden_folders if path in Path(h).parents]:
        return (f"{path}: every document in it is left out by a {IGNORE_FILE} ({left_out} file(s)) — edit the"
                f" {IGNORE_FILE} to read them")
    hidden = [h for h in batch.hidden_folders if path in Path(h).parents]
    holding = {h: n for h in hidden if (n := sum(1 for _ in _walk(Path(h), InputBatch())))}
    if not holding:
        return f"{path}: no {DOC_KINDS} or .jsonl files found — point at documents or chunk files"
    where = ", ".join(f"{h} ({n})" for h, n in holding.items())
    return (f"{path}: its only documents are in hidden folders, which kt skips: {where}"
            f" — name one to read it: kt ingest {next(iter(holding))}")


class _Excluded:
    """Whether a file under ``root`` is left out: matched by the `IGNORE_FILE` of its folder or of a
    folder above it, up to ``root`` (its patterns relative to that folder). Patterns are gitignore's,
    read by pathspec (git's own rules: ``build/``, ``*.log``, ``docs/**/draft-*.md``, ``!keep.md``),
    so they mean what they mean in a ``.gitignore``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[Path, pathspec.GitIgnoreSpec | None] = {}

    def _rules(self, folder: Path) -> pathspec.GitIgnoreSpec | None:
        if folder not in self.files:
            try:
                text = (folder / IGNORE_FILE).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):  # none there (an unreadable one ignores nothing)
                text = ""
            self.files[folder] = pathspec.GitIgnoreSpec.from_lines(text.splitlines()) if text.strip() else None
        return self.files[folder]

    def __call__(self, path: Path) -> bool:
        parts = path.relative_to(self.root).parts
        folder = self.root
        for depth in range(len(parts)):
            rules = self._rules(folder)
            if rules is not None and rules.match_file("/".join(parts[depth:])):
                return True
            folder = folder / parts[depth]
        return False


def _walk(root: Path, batch: InputBatch, left_out: list[Path] | None = None) -> Iterator[Path]:
    def unreadable(error: OSError) -> None:
        batch.problems.append(f"{error.filename}: cannot read directory ({error.strerror}) — fix its permissions")

    def hidden(folder: Path) -> None:
        batch.hidden_folders.append(str(folder))

    excluded = _Excluded(root)
    for path in walk_files(root, unreadable, hidden):
        if excluded(path):
            if left_out is not None:
                left_out.append(path)
            continue
        if path.suffix.lower() in JSONL_SUFFIXES or detect_format(path.name) is not None:
            yield path
        else:
            batch.not_a_document(path.name)


#: An extension as people write them (``.csv``, ``.debian``), not a version's dot (``v2.13-notes``).
_EXTENSION = re.compile(r"\.[a-z][a-z0-9]{0,7}")


def _kind(name: str) -> str:
    """How the ingest note counts a file it does not read: by extension, a compressed one by the
    extension inside too (``.csv.gz``; ``(no extension).gz`` for ``changelog.gz``), so a note never
    reads as if gzip itself were not read."""
    path = PurePosixPath(name.lower())
    if path.suffix != COMPRESSED:
        return path.suffix or "(no extension)"
    inner = PurePosixPath(path.stem).suffix
    return (inner if _EXTENSION.fullmatch(inner) else "(no extension)") + COMPRESSED


def _read_bytes(path: Path, label: str, batch: InputBatch) -> bytes | None:
    try:
        if path.is_symlink() and not path.exists():  # a link to nothing is no document: skipped, named
            batch.broken_links.append(f"{label} → {os.readlink(path)}")
            return None
        if path.exists() and not path.is_dir() and not stat.S_ISREG(path.stat().st_mode):
            # a pipe would block the read forever; a device or socket is no document either
            batch.problems.append(f"{label}: not a regular file (a pipe, socket or device) — remove it "
                                  "or save its content to a file")
            return None
        return path.read_bytes()
    except IsADirectoryError:
        batch.problems.append(f"{label}: is a directory — pass it without a trailing file name")
    except OSError as exc:
        batch.problems.append(f"{label}: cannot read ({exc.strerror or exc}) — check permissions")
    return None


def _inflate(data: bytes, label: str, batch: InputBatch) -> bytes | None:
    """The document a gzip-compressed file holds (``guide.rst.gz``), or None with the problem named."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as inflated:
            out = inflated.read(MAX_INFLATED_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        batch.problems.append(f"{label}: not a readable gzip file ({exc}) — decompress it or replace it")
        return None
    if len(out) > MAX_INFLATED_BYTES:
        batch.problems.append(f"{label}: holds more than {MAX_INFLATED_BYTES:,} bytes once decompressed — "
                              "split it, or ingest the parts you need")
        return None
    return out


def _decode(data: bytes, label: str, batch: InputBatch) -> str | None:
    try:
        return decode_text(data, label)
    except InputError as exc:
        batch.problems.append(exc.message)
        return None


def _read_file(path: Path, label: str, batch: InputBatch, max_tokens: int, target_tokens: int, *,
               root: Path | None = None) -> None:
    problems = len(batch.problems)
    _read_one(path, label, batch, max_tokens, target_tokens, root=root)
    if len(batch.problems) > problems and label not in batch.documents and path.exists():
        batch.failed.add(label)  # on disk but unreadable now: --prune keeps its last good chunks


def _read_one(path: Path, label: str, batch: InputBatch, max_tokens: int, target_tokens: int, *,
              root: Path | None = None) -> None:
    is_jsonl = path.suffix.lower() in JSONL_SUFFIXES
    fmt = None if is_jsonl else detect_format(path.name)
    if not is_jsonl and fmt is None:
        # a gzipped file is named by the type inside it: ".gz" itself is read (DOC_KINDS says so)
        gzipped = path.name.lower().endswith(COMPRESSED)
        suffix = Path(path.name[: -len(COMPRESSED)]).suffix if gzipped else path.suffix
        kind = f"{suffix or '(none)'}{' (gzipped)' if gzipped else ''}"
        batch.problems.append(f"{label}: unsupported file type {kind} — use {DOC_KINDS} or .jsonl")
        return
    data = _read_bytes(path, label, batch)
    if data is not None and not is_jsonl and path.name.lower().endswith(COMPRESSED):
        data = _inflate(data, label, batch)
    if data is None:
        return
    if is_jsonl:
        text = _decode(data, label, batch)
        if text is not None:
            batch.files.add(label)
            _read_jsonl_lines(_jsonl_lines(text), label, label, batch)
        return
    fmt = detect_format(path.name, head=data[:RST_HEAD])
    if fmt is None:  # ``SHA256SUMS.asc``: a PGP signature, not AsciiDoc
        batch.not_a_document(path.name)
        return
    content: bytes | str | None
    if fmt != "pdf" and plain_text_name(path.name):
        try:
            text = decode_text(data, label)
        except InputError:  # a README kt only guessed at by its name, no UTF-8 text: left out, counted
            batch.not_a_document(path.name)
            return
        content = data if fmt == "html" else text
    else:
        content = data if fmt in ("pdf", "html") else _decode(data, label, batch)
    if content is None:
        return
    batch.files.add(label)
    _read_document(content, label, batch, max_tokens, target_tokens, fmt=fmt, path=path, root=root)


def _read_document(
    data: bytes | str, label: str, batch: InputBatch, max_tokens: int, target_tokens: int, *, fmt: str | None = None,
    path: Path | None = None, root: Path | None = None,
) -> None:
    """Parse one document and add its chunks; each carries its section, source range and parser.

    ``path`` is where the file is and ``root`` the folder its includes may read (its source's root).
    """
    if not (data.strip() if isinstance(data, str) else data.strip(b" \t\r\n\xef\xbb\xbf")):
        batch.documents.add(label)  # an empty file (a placeholder) has no text: like a page of headings only
        batch.no_text.append(label)
        return
    try:
        document = parse(data, name=label, format=fmt, path=path, root=root)
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
    batch.documents.add(label)
    if path is not None:
        batch.locations[label] = path.resolve().as_posix()
    if document.includes:
        batch.includes[label] = document.includes
    if document.unread:
        batch.unread_includes[label] = list(document.unread)
    if document.docstrings:
        batch.unread_docstrings[label] = document.docstrings
    batch.junk_merged += result.junk_merged
    batch.junk_dropped += result.junk_dropped
    if not result.chunks:
        if document.redirect:
            batch.redirects[label] = document.redirect
        elif document.format == "pdf":
            batch.problems.append(f"{label}: no extractable text (a scanned PDF?) — run OCR on it or ingest a text version")
        else:
            batch.no_text.append(label)
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
    """Raise ``InputError`` naming the first problem unless ``skip_invalid`` (or when the inputs
    hold documents but not one line of text among them)."""
    if (batch.no_text or batch.redirects or batch.broken_links) and not batch.chunks and not batch.problems:
        empty = [*batch.no_text, *batch.redirects, *batch.broken_links]
        more = more_suffix(len(empty), 1)
        if empty[0] in batch.broken_links:
            link, target = empty[0].split(" → ", 1)
            raise InputError(f"{link}: a broken link (to {target}, which does not exist) — fix or remove the link{more}",
                             hint="nothing was changed")
        why = (f"a page that redirects to {batch.redirects[empty[0]]}" if empty[0] in batch.redirects
               else "only markup or headings, or empty")
        raise InputError(f"{empty[0]}: no text to index, {why}{more}",
                         hint="nothing was changed; point at documents with text of their own")
    if batch.problems and not skip_invalid:
        more = more_suffix(len(batch.problems), 1)
        if batch.missing:  # skipping cannot make a mistyped path appear
            hint = "nothing was changed; check the path" + ("s" if len(batch.missing) > 1 else "") + " and run it again"
        elif not batch.chunks:
            hint = "nothing was changed and no valid rows were found; fix the input and run it again"
        else:
            hint = "fix the input, or pass --skip-invalid to ingest the valid rows and list the rest"
        raise InputError(batch.problems[0] + more, hint=hint, problems=batch.problems)
