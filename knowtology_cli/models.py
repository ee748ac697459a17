"""Typed records shared by the library, the CLI JSON, FastAPI, MCP and LangChain."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: The path that names the top of a tree (``kt browse root``).
ROOT = "root"


def split_path(path: str) -> list[str]:
    """Segments of a tree path, blanks around ``/`` trimmed (``root`` and empty mean the top)."""
    path = (path or "").strip().strip("/")
    if path in ("", ROOT):
        return []
    return [seg.strip() for seg in path.split("/") if seg.strip()]


class Record(BaseModel):
    """Base of every record: frozen, extra keys rejected."""

    # defer_build: a record's validator is built on first use, not at import (kt browse uses 3 of them)
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Chunk(Record):
    """One chunk as stored in the vector table (text lives only there)."""

    chunk_id: str
    text: str
    doc_id: str = ""
    file_name: str = ""
    chunk_index: int = 0
    title: str = ""
    content_hash: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)


class TreeNode(Record):
    """A category of the tree; ``path`` is ``A/B/C`` with 1-3 segments."""

    id: int
    collection: str
    parent_id: int | None
    name: str
    description: str = ""
    level: int
    path: str
    chunk_count: int = 0
    named_count: int | None = None  # members when the node was last named (None: not recorded)
    churn: int = 0  # members added, moved in or out, changed or removed since then
    #: why the node carries the offline builder's name in place of an LLM name that failed (None: it
    #: does not); the next hybrid ``kt build`` asks the model for it again
    name_fallback: str | None = None


class ChunkMapping(Record):
    """Where one chunk sits in the tree, with its one-line snippet."""

    collection: str
    chunk_id: str
    tree_node_id: int
    snippet: str
    doc_id: str = ""
    file_name: str = ""
    chunk_index: int = 0
    path: str = ""
    section: str = ""
    lines: tuple[int, int] | None = None
    pages: tuple[int, int] | None = None


class NodeSummary(Record):
    """A child category as ``browse`` lists it."""

    path: str
    name: str
    description: str = ""
    level: int
    chunk_count: int


class ChunkLead(Record):
    """A chunk shown at a leaf while browsing: id and snippet, never text.

    ``section`` is the heading trail of a document chunk; ``lines`` / ``pages`` its source range
    (first, last), so it can be cited and opened; all empty for chunks ingested as JSONL.
    """

    chunk_id: str
    snippet: str
    section: str = ""
    lines: tuple[int, int] | None = None
    pages: tuple[int, int] | None = None


class BrowseResult(Record):
    """The children of a path with counts; at a leaf, its chunks' snippets."""

    collection: str = "default"
    path: str
    description: str = ""
    chunk_count: int = 0
    children: list[NodeSummary] = Field(default_factory=list)
    chunks: list[ChunkLead] = Field(default_factory=list)
    unmapped: int = Field(default=0, description="At the root: chunks no category holds yet (run kt build).")


class Hit(Record):
    """One search or grep result: a lead, never full text."""

    chunk_id: str
    path: str
    snippet: str
    score: float
    doc_id: str = ""
    file_name: str = ""
    chunk_index: int = 0
    section: str = ""
    lines: tuple[int, int] | None = None
    pages: tuple[int, int] | None = None
    #: ``[start, end)`` character spans of the snippet that matched the query (grep / keyword hits).
    marks: list[tuple[int, int]] = Field(default_factory=list)
    #: with ``explain``: the score (and rank) each search stage gave this hit, by stage name.
    explain: dict[str, float] | None = None
    #: other chunks with this hit's text (a print page, a file kept twice), folded into this hit.
    copies: list[str] = Field(default_factory=list)


class SearchResult(Record):
    """Hits of ``search`` or ``grep``."""

    collection: str = "default"
    query: str
    mode: str = "hybrid"
    under: str | None = None
    hits: list[Hit] = Field(default_factory=list)
    preset: str | None = None
    reranker: str | None = None
    #: whether the reranker's order was applied (False: its call failed or its reply was unusable,
    #: and the hits keep the incoming order; None: no reranker ran).
    reranked: bool | None = None
    #: one-line warnings (an LLM rerank that fell back to the incoming order).
    warnings: list[str] = Field(default_factory=list)
    #: with ``explain`` and the feedback stage: the weighted query RM3 sent to the keyword index.
    expansion: dict[str, float] | None = None


class ReadChunk(Record):
    """Full text of one chunk, or ``already_read`` with no text."""

    chunk_id: str
    path: str
    text: str | None
    already_read: bool = False
    doc_id: str = ""
    file_name: str = ""
    chunk_index: int = 0
    title: str = ""
    section: str = ""
    lines: tuple[int, int] | None = None
    pages: tuple[int, int] | None = None
    #: set on a neighbouring chunk returned by ``read(..., context=N)``: the id it is context for.
    context_of: str | None = None
    #: on a repeat that is a copy: the chunk of the same text the session read (so it is known which)
    same_as: str | None = None


#: What to do about a chunk id the collection does not hold.
MISSING_HINT = ("its file was renamed, or removed by an ingest or rm, or the id is mistyped: kt grep or kt search "
                "finds the text; copy ids from their output")
#: What to do when a read names no chunk id.
NO_IDS_HINT = "copy ids from search, grep or browse output"
#: What to do when a keyword search names no term.
NO_KEYWORDS_HINT = 'e.g. kt grep "7 days, refund"'


class ReadResult(Record):
    """What ``read`` returned, in request order."""

    collection: str = "default"
    session: str = "default"
    chunks: list[ReadChunk] = Field(default_factory=list)
    #: requested ids the collection does not hold (a file renamed or removed since, a mistyped id)
    missing: list[str] = Field(default_factory=list)
    #: for a missing id with a likely meaning: the hint naming it (the document's chunk range, a close id)
    missing_hints: dict[str, str] = Field(default_factory=dict)


class IngestReport(Record):
    """Summary of one ``ingest`` run."""

    collection: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    total: int = 0
    #: texts sent to the embedder: new or changed chunks, each distinct title and text once
    embedded: int = 0
    skipped: int = 0
    junk_merged: int = 0
    junk_dropped: int = 0
    problems: list[str] = Field(default_factory=list)
    embedder: str = ""
    seconds: float = 0.0
    sources: list[str] = Field(default_factory=list)  # the sources this run read
    no_text: list[str] = Field(default_factory=list)  # documents of only markup or headings, or empty
    #: files of the ingested folders that are no document kt reads (images, scripts…): extension -> count
    not_documents: dict[str, int] = Field(default_factory=dict)
    #: symbolic links to nothing, skipped: ``link → target``
    broken_links: list[str] = Field(default_factory=list)
    #: hidden folders (a leading ``.``) of the ingested folders, skipped: ``kt ingest`` one by name to read it
    hidden_folders: list[str] = Field(default_factory=list)
    #: files a ``.ktignore`` (gitignore syntax) in the ingested folders leaves out, not read
    excluded: list[str] = Field(default_factory=list)
    #: of those, files indexed before: still found until ``--prune`` (which removes them)
    excluded_indexed: list[str] = Field(default_factory=list)
    redirects: dict[str, str] = Field(default_factory=dict)  # HTML pages that only redirect: page -> address
    #: files read as part of the documents that include them (reST ``include``), not indexed alone:
    #: fragment -> the first document that includes it
    included: dict[str, str] = Field(default_factory=dict)
    #: includes that were not read (outside the ingested folder, missing, circular): document -> notes
    unread_includes: dict[str, list[str]] = Field(default_factory=dict)
    #: directives that insert the docstrings of code Sphinx imports (``.. autoclass::``,
    #: ``.. automodule::`` …), whose text is not read (Knowtology imports no code): document -> how many
    unread_docstrings: dict[str, int] = Field(default_factory=dict)
    #: links to another file of the same folder, not read twice: link -> the file read
    linked: dict[str, str] = Field(default_factory=dict)
    #: chunks embedded from nothing new: text another stored chunk had (renamed, moved or copied files)
    #: or another new chunk of the same run has (a page shipped twice), embedded once
    reused: int = 0
    #: sources whose folder is gone from disk while their text came in again under another source
    #: (a folder moved without --source NAME --replace): source -> chunks of its text added
    moved_sources: dict[str, int] = Field(default_factory=dict)
    #: files of the folders read that are gone from disk, their chunks kept (no --prune): source/path
    gone: list[str] = Field(default_factory=list)


class SourceSummary(Record):
    """A registered source: the first segment of its documents' ids, and the folder they come from."""

    name: str
    root: str
    kind: str = "dir"  # dir (the folder was ingested whole), files (single files of it) or stdin
    files: int = 0
    chunks: int = 0
    created_at: float = 0.0
    last_ingest: float = 0.0


class SourcesReport(Record):
    """``kt sources``: the sources of one collection; ``unregistered`` counts chunks stored before
    sources were recorded (they join a source when it is ingested again)."""

    collection: str
    sources: list[SourceSummary] = Field(default_factory=list)
    unregistered: int = 0
    #: when an ingest stopped before it finished: what to run (its chunks are not counted in a source yet)
    interrupted: str = ""


class RemoveReport(Record):
    """``kt rm``: what left the collection (or would, with ``dry_run``)."""

    collection: str
    dry_run: bool = False
    removed: int = 0  # chunks
    files: list[str] = Field(default_factory=list)  # source/path of each file removed
    sources: list[str] = Field(default_factory=list)  # sources forgotten
    total: int = 0  # chunks left
    nodes: int = 0  # categories left
    #: removed files still in their source's folder: its next ingest reads them again (unless a
    #: ``.ktignore`` there leaves them out)
    on_disk: list[str] = Field(default_factory=list)


class DropReport(Record):
    """``kt drop``: a collection removed whole (or what would go, with ``dry_run``)."""

    collection: str
    dry_run: bool = False
    chunks: int = 0
    nodes: int = 0
    sources: int = 0


class BuildReport(Record):
    """Summary of one ``build`` run (or its plan with ``dry_run``)."""

    collection: str = "default"
    builder: str
    nodes: int = 0
    mapped: int = 0
    unmapped: int = 0
    llm_calls: int = 0
    cached_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    dry_run: bool = False
    batches: int = 0
    model: str | None = None
    seconds: float = 0.0
    notes: list[str] = Field(default_factory=list)
    #: where category names came from: ``llm`` (first answer), ``llm_reasked`` (after a re-ask),
    #: ``offline`` (the offline builder's name, after the LLM's was refused twice or its call failed)
    name_origins: dict[str, int] = Field(default_factory=dict)
    rejected_names: int = 0  # proposed names refused by validation (chunk ids, file paths, markup, …)
    #: categories whose LLM naming failed (its name refused twice, or its call failed) after this build,
    #: by path, with why; each carries the offline builder's name until the next ``kt build`` retries it
    fallback_names: dict[str, str] = Field(default_factory=dict)
    naming_failed: int = 0  # len(fallback_names)
    estimated_calls: int = 0  # calls whose usage the server did not report (counted with the tokenizer)


class CollectionStatus(Record):
    """Counts and health of one collection."""

    name: str
    chunks: int
    mapped: int
    unmapped: int
    nodes: int
    embedder: str | None = None
    dimension: int | None = None
    #: mapped chunks whose text changed since they were placed: with ``unmapped``, what ``kt build`` places
    changed: int = 0
    stale: bool = False
    builder: str | None = None
    state: str = ""  # current, unmapped, stale, empty, unbuilt
    stale_nodes: list[str] = Field(default_factory=list)  # categories whose members changed materially
    drift: float = 0.0  # share of the map placed or removed since the last full build
    rebuild_advised: bool = False
    advice: str = ""  # what to run, in words
    #: indexed files no longer on disk (``source/path``): still searchable until ``kt ingest --prune``
    gone: list[str] = Field(default_factory=list)
    #: document files written, added or moved in since their source's last ingest: ``kt ingest`` reads them
    newer: list[str] = Field(default_factory=list)


class StatusReport(Record):
    """``status`` over the whole store."""

    store: str
    collections: list[CollectionStatus] = Field(default_factory=list)


class Category(Record):
    """LLM wire contract: a category the model proposes."""

    path: str
    description: str = ""


class Assignment(Record):
    """LLM wire contract: one chunk placed at a leaf with a snippet."""

    chunk_id: str
    path: str
    snippet: str = ""


class TreeReply(Record):
    """LLM wire contract: the one JSON object every build call returns."""

    categories: list[Category] = Field(default_factory=list)
    assignments: list[Assignment] = Field(default_factory=list)


class TreeExport(Record):
    """One rendering of a collection's tree (``kt export``): the text and what it holds."""

    collection: str
    path: str = "root"
    format: str
    text: str
    nodes: int = 0
    chunks: int = 0
    warnings: list[str] = Field(default_factory=list)


class TreeImportReport(Record):
    """What ``kt import-tree`` did: the tree now in the store and where the document and store differ."""

    collection: str
    source: str = ""
    builder: str | None = None
    replaced: bool = False
    nodes: int = 0
    mapped: int = 0
    dropped_nodes: int = 0
    missing_from_store: list[str] = Field(default_factory=list)
    unmapped_in_store: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)
    #: chunks found under another id by their text (ids an edit shifted, a renamed file): document id -> store id
    relinked: dict[str, str] = Field(default_factory=dict)
