"""Markup a reader should never see, counted in the chunks `kt ingest` would store for a folder.

``python -m benchmarks.markup_leftovers FOLDER [FOLDER …]`` parses and chunks every document of each
folder as ingest does (the folder is the root includes and cross-references may read) and prints,
per folder, how many chunks hold each kind of leftover: MyST roles, directive fences and targets,
reST roles and directive lines, MkDocs snippet markers, doc-generator furniture (a rustdoc version
stamp, "Expand description", "Read more", permalink marks) and code fences that name no language.
Run it at two commits (one worktree each) to compare parser versions; it writes nothing.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from knowtology_cli.chunking import chunk_document
from knowtology_cli.ingest import document_files
from knowtology_cli.parsers import parse

#: What each count looks for in a chunk's text (outside nothing: code shown as code counts too).
PATTERNS: dict[str, re.Pattern[str]] = {
    "MyST role": re.compile(r"\{[a-z][\w:.+-]*\}`"),
    "MyST directive fence": re.compile(r"^[ \t]*(?:`{3,}|:{3,})\{[A-Za-z]", re.M),
    "MyST target": re.compile(r"^\([\w.-]+\)=[ \t]*$", re.M),
    "reST role": re.compile(r"(?<![\w`]):[a-z][\w:.+-]*:`"),
    "reST directive": re.compile(r"^[ \t]*\.\. [a-z][\w:-]*::", re.M),
    "snippet marker": re.compile(r"-8<-"),
    "version stamp": re.compile(r"\b\d+\.\d+\.\d+ · "),
    "Expand description": re.compile(r"Expand description"),
    "Read more": re.compile(r"\bRead more\b"),
    "permalink mark": re.compile(r"[§¶ⓘ]"),
}
_FENCE = re.compile(r"^[ \t]*```(\S*)", re.M)


def count(folder: Path) -> tuple[int, int, dict[str, int], tuple[int, int]]:
    """Documents, chunks, chunks per leftover kind, and (fences opened, fences naming no language)."""
    docs = chunks = 0
    found = dict.fromkeys(PATTERNS, 0)
    fences = [0, 0]
    for path in document_files(folder):
        try:
            document = parse(path, root=folder)
        except Exception:  # noqa: BLE001 - a file ingest would report as a problem is no figure here
            continue
        docs += 1
        for piece in chunk_document(document, file_name=path.as_posix()).chunks:
            chunks += 1
            for name, pattern in PATTERNS.items():
                found[name] += bool(pattern.search(piece.text))
            opened = _FENCE.findall(piece.text)[::2]  # every other fence line opens a block
            fences[0] += len(opened)
            fences[1] += sum(1 for language in opened if not language)
    return docs, chunks, found, (fences[0], fences[1])


def main(folders: list[str]) -> None:
    kinds = list(PATTERNS)
    print("| folder | documents | chunks | " + " | ".join(kinds) + " | fences without a language |")
    print("| --- | ---: | ---: | " + " | ".join("---:" for _ in kinds) + " | ---: |")
    for folder in folders:
        docs, chunks, found, (opened, bare) = count(Path(folder))
        print(f"| {Path(folder).name} | {docs} | {chunks} | " + " | ".join(str(found[k]) for k in kinds)
              + f" | {bare} of {opened} |")


if __name__ == "__main__":
    main(sys.argv[1:])
