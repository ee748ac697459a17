"""Parts of speech of English words: Brill's tagger lexicon (Brown corpus + Penn Treebank), as
TextBlob ships it; read from the installed package's folder, without importing TextBlob (or NLTK)."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

__all__ = ["is_noun", "lexicon_tag"]

_PACKAGE = "textblob"
_FILE = ("en", "en-lexicon.txt")
#: Penn Treebank tags of nouns; foreign words (FW: "versus", "status quo") are read as names too.
NOUN_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS", "FW"})
#: The gerund: a verb form the lexicon gives words it mostly saw as "-ing" verbs ("learning",
#: "running"); as a heading it names an activity, so it says neither yes nor no.
GERUND = "VBG"


def _path() -> Path | None:
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)), *_FILE)


@functools.cache
def _lexicon() -> dict[str, str]:
    path = _path()
    if path is None or not path.is_file():
        return {}
    out: dict[str, str] = {}
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.startswith(";;;"):
                continue
            word, _, tag = line.rstrip("\n").partition(" ")
            if word and tag:
                out.setdefault(word, tag.split("|", 1)[0])
    return out


def lexicon_tag(word: str) -> str | None:
    """The word's most frequent Penn Treebank tag (as written, else in lower case), or None."""
    lexicon = _lexicon()
    return lexicon.get(word) or lexicon.get(word.lower())


def is_noun(word: str) -> bool | None:
    """Whether English mostly uses ``word`` as a noun ("refund", "logging"; not "forgot", "warm" or
    "manually", which name a topic less well); None when the lexicon does not know it (jargon,
    identifiers) or lists it as a gerund."""
    tag = lexicon_tag(word)
    if tag is None or tag == GERUND:
        return None
    return tag in NOUN_TAGS
