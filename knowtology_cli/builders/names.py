"""What a category name may be in one collection, and where the names of a build came from."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..chunking import TITLE_SEPARATOR
from ..ingest import JSONL_SUFFIXES
from ..parsers import COMPRESSED, DOCUMENT_SUFFIXES
from .prompts import EXAMPLE_PATH, TREE_PLACEHOLDERS, TreeCaps, system_prompt
from .validate import NameCheck

if TYPE_CHECKING:
    from .context import BuildStores


def document_title(chunk_title: str) -> str:
    """The document's own title from a chunk's heading trail (``Doc › Section`` → ``Doc``)."""
    return chunk_title.split(TITLE_SEPARATOR.strip(), 1)[0].strip()


def tree_name_check(stores: BuildStores, collection: str, chunk_ids: Iterable[str],
                    meta: dict[str, tuple[str, str]], titles: dict[str, str], caps: TreeCaps = TreeCaps()) -> NameCheck:
    """The :class:`NameCheck` of tree-building replies: the collection's ids, files and titles, the tree prompts.

    The rules come from the collection itself (its chunk ids, files, document titles) and the
    prompts (their example path, placeholders and wording), never from a word list.

    ``meta`` maps the chunks being placed to ``(doc_id, file_name)``, ``titles`` to their heading trails.
    """
    known = {v for pair in meta.values() for v in pair}
    for m in stores.tree.mappings(collection):
        known.update((m.file_name, m.doc_id))
    doc_titles = {meta[c][0] or meta[c][1]: document_title(t) for c, t in titles.items() if c in meta}
    instructions = system_prompt(False, caps) + "\n" + system_prompt(True, caps)
    return NameCheck(chunk_ids=chunk_ids, files=known, examples=[EXAMPLE_PATH], placeholders=TREE_PLACEHOLDERS,
                     instructions=instructions, titles=doc_titles, doc_of={c: d or f for c, (d, f) in meta.items()},
                     extensions=DOCUMENT_SUFFIXES | JSONL_SUFFIXES | {COMPRESSED})


def origins_note(origins: Counter[str]) -> str | None:
    """``names: 41 from the LLM (3 after a re-ask), 2 offline`` (None when no name was made)."""
    if not sum(origins.values()):
        return None
    note = f"names: {origins['llm'] + origins['llm_reasked']} from the LLM"
    if origins["llm_reasked"]:
        note += f" ({origins['llm_reasked']} after a re-ask)"
    if origins["offline"]:
        note += f", {origins['offline']} from the offline builder (refused twice, failed a later check, or the call failed)"
    return note
