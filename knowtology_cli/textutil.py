"""Small text helpers shared by stores and search: tokenising for BM25, term splitting."""

from __future__ import annotations

import re
from functools import lru_cache

_TOKEN = re.compile(r"[0-9a-z]+")
STOP_WORDS = frozenset(
    "a an and are as at be but by for from has have if in into is it its of on or such that the their then"
    " there these they this to was were will with".split()
)


def tokenize(text: str) -> list[str]:
    """Lower-cased alphanumeric tokens without stop words."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOP_WORDS]


def keyword_query(terms: str | list[str]) -> str:
    """Join grep terms (``"7 days, refund"`` or a list) into one keyword query string."""
    if isinstance(terms, str):
        terms = [terms]
    parts = [p.strip() for term in terms for p in term.split(",")]
    return " ".join(p for p in parts if p)


#: A grep term the keyword index splits into words but a reader means whole: words joined by ``_``,
#: ``:``, ``.``, ``-`` or ``/`` (``MAX_RETRY_COUNT``, ``urn:isbn:0451``, ``os.path.join``), a flag
#: (``--dry-run``), or a name with its sigil (a decorator ``@define``, a variable ``$HOME``).
_IDENTIFIER = re.compile(r"(?:-{1,2}[A-Za-z][\w-]*|[@$][A-Za-z_]\w*(?:[_:./-]+\w+)*|\w+(?:[_:./-]+\w+)+)")


def identifier_terms(query: str) -> list[str]:
    """The terms of a keyword query written as identifiers (`_IDENTIFIER`), lower-cased, in order."""
    found = []
    for word in query.split():
        word = word.strip("\"'`,;()[]{}<>%")
        if _IDENTIFIER.fullmatch(word) and word.lower() not in found:
            found.append(word.lower())
    return found


def copy_key(text: str) -> str:
    """What two chunks share when one is a copy of the other: their text, whitespace aside (a site's
    print page, a file kept twice, a paragraph a generator repeats on every page)."""
    return " ".join(text.split())


def first_few(items: list[str], shown: int) -> str:
    """The first ``shown`` items joined by commas, then `` (+N more)`` for the rest."""
    return ", ".join(items[:shown]) + more_suffix(len(items), shown)


def counted(n: int, noun: str) -> str:
    """``1 chunk``, ``3 chunks``, ``2 categories``: a count with its noun in the number it takes."""
    if n == 1:
        return f"{n} {noun}"
    return f"{n} {noun[:-1]}ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else f"{n} {noun}s"


def more_suffix(total: int, shown: int) -> str:
    """`` (+N more)`` when only ``shown`` of ``total`` items are named, else ``""``."""
    return f" (+{total - shown} more)" if total > shown else ""


@lru_cache(maxsize=1)
def _stemmer():  # snowballstemmer ships no types
    import snowballstemmer  # deferred: heavy

    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """The English Snowball (Porter2) stem of a lower-cased word (``policies`` -> ``polici``), the
    stemmer of the full-text index; shared by the namer's term index and pseudo-relevance feedback."""
    stemmed: str = _stemmer().stemWord(word)
    return stemmed
