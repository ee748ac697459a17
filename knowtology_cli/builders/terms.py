"""Words for the offline tree: one tokenizer and stemmer, a sparse chunk x term index, LSA features."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..textutil import stem
from .lexicon import is_noun
from .params import DEFAULT_PARAMS, TreeParams
from .snippets import GENERIC_TITLES, clean_markdown, clean_parts

__all__ = [
    "PHRASE",
    "STOP_WORDS",
    "TermIndex",
    "build_term_index",
    "corpus_wide_terms",
    "document_weights",
    "join_names",
    "lsa_features",
    "presence",
    "stem",
    "term_counts",
]

# English function words plus words that say how a text is written, not what it is about
# ("following", "example", "page"): a stop list in the style of the classic SMART / Glasgow lists.
STOP_WORDS = frozenset(
    """
    a about above across after afterwards again against all almost alone along already also although
    always am among amongst an and another any anyhow anyone anything anyway anywhere are around as at
    back be became because become becomes becoming been before beforehand behind being below beside
    besides between beyond both but by can cannot could did do does doing done down due during each eg
    either else elsewhere enough etc even ever every everyone everything everywhere except few first
    for former formerly from further had has have having he hence her here hereafter hereby herein
    hereupon hers herself him himself his how however ie if in indeed into is it its itself just last
    latter latterly least less many may me meanwhile might mine more moreover most mostly much must my
    myself namely neither never nevertheless next no nobody none noone nor not nothing now nowhere of
    off often on once one only onto or other others otherwise our ours ourselves out over own per
    perhaps please put rather re same seem seemed seeming seems several she should since so some
    somehow someone something sometime sometimes somewhere still such than that the their theirs them
    themselves then thence there thereafter thereby therefore therein thereupon these they this those
    though through throughout thru thus to together too toward towards under until up upon us very via
    was we well were what whatever when whence whenever where whereafter whereas whereby wherein
    whereupon wherever whether which while whither who whoever whole whom whose why will with within
    without would yet you your yours yourself yourselves
    able across actually add added adding ago allow allowed allows already also always among another
    anything apply applies appropriate ask asked available away based basic best better big certain
    change changed changes clear come comes common consider contain contains continue current
    currently day days describe described describes different does done each easy either example
    examples find following follows found get gets getting give given gives go goes going good got
    great help high however important include included includes including instead keep keeps kind
    know known large later like likely line lines little long look looks low made main make makes
    making mean means need needed needs new note notes number numbers often ok okay old open order
    overview paper part particular particularly present presented problem problems provide provided
    provides rather really related regarding required result results right said say says section
    see seen set sets shall shown shows show side simple since small specific state states sure take
    taken takes tell thing things think three time times top two type types under unless use used
    useful user uses using usual usually value various want way ways whether work works yes
    http https www com org html htm pdf png jpg todo tbd faq table contents page pages introduction
    two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty hundred thousand
    """.split()
)
# English inflection endings of past participles (``painted``) and adverbs (``quickly``): for a word
# the part-of-speech lexicon does not know, the sign that it describes an action or a manner.
_PARTICIPLE = re.compile(r"[a-z]{3,}[^e]ed$")
_ADVERB = re.compile(r"[a-z]{3,}ly$")
# Words that open a noun phrase: a word right after one is a noun (or its modifier), a word
# right before one acts as a verb ("planting the seeds"). English grammar, not any corpus.
DETERMINERS = frozenset("the a an your our their his her its my this these those every each".split())
_SENTENCE_END = re.compile(r"[.!?]\s+|\n")
# Punctuation, a sentence's full stop, a dash between spaces and the dashes of a command-line option
# ("Options --locked" is no phrase) end a phrase.
_PHRASE_BREAK = re.compile(r"[,;:()\[\]{}<>\"“”|\\/=+*#`~&@%^$!?]+|\.(?:\s|$)|\s[-–—]+\s|(?:^|\s)--?(?=[A-Za-z])|\n")
# Identifiers first (snake_case, dotted.names, dunders such as __init__.py and __version__, kebab codes with a
# digit, camelCase, MixedCase,
# MixedCase led by an acronym such as SQLite, OAuth, XMLHttp (but not a plural acronym: APIs),
# words with digits), then plain words (with an apostrophe ending); hyphenated words split.
_TOKEN = re.compile(
    r"(?P<ident>_*[A-Za-z][A-Za-z0-9]*(?:_*[_.][A-Za-z0-9]+)+_*|__[A-Za-z][A-Za-z0-9]*__"
    r"|[A-Za-z]+(?:-[A-Za-z0-9]*\d[A-Za-z0-9]*)+"
    r"|[a-z]+[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*|[A-Z]{2,}(?:[a-z]{2,}|[a-z][A-Z])[A-Za-z0-9]*"
    r"|[A-Za-z]+\d[A-Za-z0-9]*)"
    r"|(?P<word>[A-Z]{2,}s?(?![a-z])|[A-Za-z][a-z]*(?:['’][A-Za-z]+)?)"
)
_TRAIL = re.compile(r"(\s*(?:›|»|\s>\s|\||:|\s[-–—]\s)\s*)")
_TRAIL_MARK = re.compile(r"[›»]")  # the separators a title trail (``Doc › Section``) is joined with
_NUMBER_WORD = re.compile(r"(?<![\w.])\d[\w.]*")  # 2.6, 3.0.1, 2024: no part of a term key
#: What "cargo-tree(1)" or "pytest 9.1.1 (2026-06-19)" leaves once its numbers go: brackets of
#: nothing but punctuation.
_EMPTY_BRACKETS = re.compile(r"\s*[(\[{][\s\-–—/.,:;]*[)\]}]")
#: Punctuation a removed number leaves at a name's end ("pytest-" of "pytest-7.3").
_DANGLING = " -–—/.,:;"
#: A bracket holding a number qualifies a heading ("(January 5, 2023)", "(1)", "[v2]"): no part of
#: its key, and gone whole when the numbers of a heading shared by versions go (no "(January , )").
_NUMBERED_BRACKETS = re.compile(r"\s*[(\[{][^()\[\]{}]*\d[^()\[\]{}]*[)\]}]")
#: Words that number a heading ("Part 3", "Chapter IV").
_NUMBERING_WORDS = "step|part|section|chapter|appendix"
#: A number that ends a heading shared by versions ("Writing your first app, part 3"), with the
#: numbering word before it.
_TRAILING_NUMBER = re.compile(rf"[\s,:]+(?:(?:{_NUMBERING_WORDS}|lesson)\s+)?v?\d+(?:\.\d+)*[a-z]?$", re.I)
_NUMBERING = re.compile(rf"^(?:(?:{_NUMBERING_WORDS})\s*)?[\dIVXivx]+(?:\.\d+)*[.):]?\s+|^[A-Za-z][.)]\s+", re.I)
# the name without its extensions (``.md``, ``.rst.txt``); an extension starts with a letter, so
# ``release-2.6.md`` keeps its version
_FILE_STEM = re.compile(r"^(?:.*/)?([^/]+?)(?:\.[A-Za-z][A-Za-z0-9]{0,7})+$")
_PATH_LIKE = re.compile(r"\S*[/\\]\S*")  # a/b/page, docs\\index.md, https://…
#: A web address is where a text points, not what it says: a term found only in addresses
#: ("changelog.html", "docs.python.org") is a feature of the chunks, never a name.
_URL = re.compile(r"\b(?:https?|ftp)://\S+|\bwww\.\S+")
_ABBREVIATION = re.compile(r"[A-Za-z](?:\.[A-Za-z])+")
_PLAIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_DATE_PREFIX = re.compile(r"^\d{4}[-_]\d{2}[-_]\d{2}[-_ ]*")
PHRASE = "§"  # key prefix of heading phrases


@dataclass(frozen=True)
class Token:
    """One token of a phrase: its term key (``""`` for a stop word), its surface and its kind."""

    key: str
    surface: str
    ident: bool = False


def _token(surface: str, ident: bool, params: TreeParams = DEFAULT_PARAMS) -> Token:
    if ident:
        return Token(surface.lower(), surface, True)
    if "'" in surface or "’" in surface:
        head, _, tail = surface.replace("’", "'").partition("'")
        if tail.lower() != "s":
            return Token("", surface)  # don't, we'll, they've
        surface = head
    lower = surface.lower()
    if len(surface) > 2 and surface.endswith("s") and surface[:-1].isupper():
        lower = lower[:-1]  # URLs -> url
    if lower in STOP_WORDS or (len(lower) < params.min_word_chars and not (len(surface) > 1 and surface.isupper())):
        return Token("", surface)
    return Token(stem(lower), surface)


#: The same surface is the same token: a collection's words repeat, and a term index reads millions.
_known_token = lru_cache(maxsize=1 << 18)(_token)


def phrases(text: str) -> list[list[Token]]:
    """Runs of tokens between punctuation; stop words are kept as tokens with an empty key."""
    out: list[list[Token]] = []
    for part in _PHRASE_BREAK.split(text):
        tokens = [_known_token(m.group(0), m.group("ident") is not None) for m in _TOKEN.finditer(part)]
        if tokens:
            out.append(tokens)
    return out


@dataclass
class _Stats:
    """Collection-wide observations: surfaces of each term, where words sit next to determiners."""

    body: Counter[tuple[str, str]] = field(default_factory=Counter)  # (key, surface) mid-sentence
    code: Counter[tuple[str, str]] = field(default_factory=Counter)  # (key, surface) in code blocks
    other: Counter[tuple[str, str]] = field(default_factory=Counter)  # titles, sentence starts
    seen: Counter[str] = field(default_factory=Counter)
    before_determiner: Counter[str] = field(default_factory=Counter)
    capitalised: set[str] = field(default_factory=set)  # keys of words the text also writes capitalised
    idents: set[str] = field(default_factory=set)
    in_titles: set[str] = field(default_factory=set)  # keys of words found in some title
    words: int = 0  # word tokens seen
    capital_words: int = 0  # of which written with a capital initial
    surface: dict[str, str] = field(default_factory=dict)  # each unigram's most frequent surface
    # bigrams written as two adjacent words somewhere, not only across a title trail's "›"
    # ("Commands and Groups › Multi Command" also counts "group multi", a feature but no name)
    adjacent: set[str] = field(default_factory=set)
    in_prose: set[str] = field(default_factory=set)  # keys found outside code blocks (or in a title)

    def displays(self, keep: set[str]) -> dict[str, str]:
        """Each kept term's most frequent mid-sentence surface (else its most frequent anywhere); a
        heading as a title writes it (with capitals) rather than as a file-name slug."""
        best: dict[str, tuple[bool, int, int, str]] = {}
        for rank, source in ((1, self.body), (0, self.other), (-1, self.code)):
            for (key, surface), count in source.items():
                written = not key.startswith(PHRASE) or surface != surface.lower()
                if key in keep and (written, rank, count, surface) > best.get(key, (False, -1, 0, "")):
                    best[key] = (written, rank, count, surface)
        out = {key: surface for key, (_, _, _, surface) in best.items()}
        # A heading phrase's key leaves numbers out, so "Tool 2.6 Release Notes" and "Tool 3.0 Release
        # Notes" are one term: shown with one of its numbers it would read as one document.
        numbers: dict[str, set[tuple[str, ...]]] = {}
        for key, surface in self.other:  # heading phrases are recorded there
            if key.startswith(PHRASE) and key in out:
                numbers.setdefault(key, set()).add(tuple(_NUMBER_WORD.findall(surface)))
        for key, seen in numbers.items():
            unnumbered = _TRAILING_NUMBER.sub("", _NUMBERED_BRACKETS.sub("", out[key]))
            plain = " ".join(_EMPTY_BRACKETS.sub("", _NUMBER_WORD.sub(" ", unnumbered)).split()).strip(_DANGLING)
            if len(seen) > 1 and plain:
                out[key] = plain
            # a file-name slug ("api", "tmp path") is written as the text writes the same words
            # ("API", the identifier "tmp_path")
            as_text = out.get(key[len(PHRASE):], "")
            if out[key] == out[key].lower() and as_text.lower() == out[key] and as_text != out[key]:
                out[key] = as_text
            elif " " in out[key] and (joined := out[key].replace(" ", "_")).lower() in self.idents:
                out[key] = out.get(joined.lower(), joined)
        return out


def _keys(text: str) -> set[str]:
    """The keys of the words and bigrams (two adjacent content words within a phrase) of ``text``."""
    out: set[str] = set()
    for sentence in _SENTENCE_END.split(text):
        for tokens in phrases(sentence):
            out.update(t.key for t in tokens if t.key)
            out.update(f"{a.key} {b.key}" for a, b in zip(tokens, tokens[1:]) if a.key and b.key and a.key != b.key)
    return out


def _terms(text: str, stats: _Stats, in_title: bool, code: bool = False) -> Counter[str]:
    """Unigram and bigram counts of ``text``; records surfaces and verb evidence in ``stats``. The
    surfaces of ``code`` rank below those of prose and titles: a name is written as the text writes it
    ("Git LFS"), not as a command line does (``git lfs install``)."""
    counts: Counter[str] = Counter()
    for sentence in _SENTENCE_END.split(text):
        first = True
        for tokens in phrases(sentence):
            previous: Token | None = None
            for position, token in enumerate(tokens):
                if token.key:
                    counts[token.key] += 1
                    if in_title:
                        stats.in_titles.add(token.key)
                    (stats.code if code else stats.other if in_title or first else stats.body)[
                        token.key, token.surface] += 1
                    if token.ident:
                        stats.idents.add(token.key)
                    else:
                        stats.seen[token.key] += 1
                        if position + 1 < len(tokens) and tokens[position + 1].surface.lower() in DETERMINERS:
                            stats.before_determiner[token.key] += 1
                        stats.words += 1
                        if token.surface[:1].isupper():
                            stats.capitalised.add(token.key)
                            stats.capital_words += 1
                    if previous is not None and previous.key and previous.key != token.key:
                        bigram = f"{previous.key} {token.key}"
                        counts[bigram] += 1
                        surface = f"{previous.surface} {token.surface}"
                        (stats.code if code else stats.other if in_title or (first and position == 1)
                         else stats.body)[bigram, surface] += 1
                previous = token
                first = False
            first = False
    return counts


def heading_segments(title: str, source: str, params: TreeParams = DEFAULT_PARAMS) -> list[str]:
    """Short segments of a title trail (``Doc › Section``) and the stem of the file name, as written."""
    segments = _trail_segments(title) if title else []
    if source:
        segments.append(_file_stem_raw(source))
    out = []
    for raw in segments:
        segment = _NUMBERING.sub("", clean_markdown(raw, slots=False)).strip(" .-–—")
        # "index", "README", "Overview": a conventional page or section name says nothing of the topic
        if (segment and len(segment) <= params.max_phrase_chars and segment not in out
                and segment.lower() not in GENERIC_TITLES):
            out.append(segment)
    return out


def _trail_segments(title: str) -> list[str]:
    """``title`` split at its trail's separators (`_TRAIL`), except inside brackets: the date in
    "Release 3.22 (release-date: 2013-02-15)" belongs to its bracket, not to a segment of its own."""
    out, current = [], ""
    for i, part in enumerate(_TRAIL.split(title)):
        if i % 2 == 0 or current.count("(") + current.count("[") > current.count(")") + current.count("]"):
            current += part
        else:
            out.append(current)
            current = ""
    out.append(current)
    return out


def _file_stem_raw(source: str) -> str:
    match = _FILE_STEM.match(source.replace("\\", "/").rsplit("/", 1)[-1].strip())
    return _DATE_PREFIX.sub("", match.group(1)).replace("-", " ").replace("_", " ") if match else ""


def file_stem(source: str, params: TreeParams = DEFAULT_PARAMS) -> str:
    """The heading segment the file name ``source`` gives (``seed-trays.md`` -> ``seed trays``), or ``""``."""
    return (heading_segments("", source, params) or [""])[0]


def phrase_key(segment: str, params: TreeParams = DEFAULT_PARAMS) -> str:
    """The term key of a heading segment, ``""`` when it has no content word or too many."""
    tokens = [t for phrase in phrases(segment) for t in phrase]
    content = [t.key for t in tokens if t.key]
    if not 1 <= len(content) <= params.max_phrase_words or len(tokens) > params.max_phrase_tokens:
        return ""
    return PHRASE + " ".join(content)


@dataclass
class TermIndex:
    """A sparse chunk x term matrix (CSR) with display names for the terms.

    ``weight`` is a chunk's presence weight for a term (1.0 in the title, ``body_weight`` in the
    body only), used for naming; ``tf`` holds raw counts (title counted twice), used for LSA
    features; ``nameability`` says how well each term reads as a name on its own (1.0 for a noun-like
    word or phrase); ``words`` are its stems; ``ident`` marks identifiers.
    """

    terms: list[str]
    display: list[str]
    words: list[frozenset[str]]
    nameability: np.ndarray
    ident: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    weight: np.ndarray
    tf: np.ndarray
    n_rows: int
    capitalised: frozenset[str] = frozenset()  # keys of words the text also writes with a capital
    case_folded: bool = False  # the text writes (almost) no capitals: case tells nothing

    @property
    def n_terms(self) -> int:
        return len(self.terms)

    def rows_of_entries(self) -> np.ndarray:
        """The row of every stored entry."""
        return np.repeat(np.arange(self.n_rows), np.diff(self.indptr))

    def row_entries(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of the stored entries of ``rows`` (in order), and how many each row has."""
        starts = self.indptr[rows]
        lengths = self.indptr[rows + 1] - starts
        total = int(lengths.sum())
        if total == 0:
            return np.zeros(0, dtype=np.int64), lengths
        offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        return offsets + np.arange(total), lengths


def _nameability(term: str, ident: bool, stats: _Stats, params: TreeParams, titled: bool = False) -> float:
    """How well a term stands alone as a category name: 1.0 for noun-like terms, lower for verbs and codes."""
    if term.startswith(PHRASE):
        return params.heading_bonus * (params.code_nameability if any(ch.isdigit() for ch in term) else 1.0)
    if term not in stats.in_prose:
        return params.code_only_nameability
    if ident:
        if _ABBREVIATION.fullmatch(term):
            return 0.0  # e.g, i.e, U.S: letters with stops are an abbreviation, no identifier or topic
        return params.code_nameability if any(ch.isdigit() for ch in term) else 1.0

    def noun_like(key: str) -> float:
        seen = stats.seen.get(key, 0)
        share = stats.before_determiner.get(key, 0) / seen if seen else 0.0
        value = max(params.verb_floor, 1.0 - params.verb_penalty * share)
        surface = stats.surface.get(key, key)
        noun = is_noun(surface)
        lower = surface.lower()
        if noun is False or (noun is None and (_PARTICIPLE.fullmatch(lower) or _ADVERB.fullmatch(lower))):
            value *= params.non_noun_nameability
        return value

    words = term.split()
    if len(words) > 1 and term not in stats.adjacent:
        return 0.0  # only ever the last word of one title segment and the first of the next
    # A bigram is a name when its head (the last word) is a noun: "seed tray", not "gardener planted".
    value = noun_like(words[-1])
    # Titles are names people wrote: where chunks have them, a word no title uses rarely names a topic.
    if titled and not set(words) <= stats.in_titles:
        value *= params.untitled_nameability
    return value


def build_term_index(
    texts: Sequence[str],
    titles: Sequence[str],
    sources: Sequence[str] | None = None,
    params: TreeParams = DEFAULT_PARAMS,
) -> TermIndex:
    """Index the words, bigrams, identifiers and heading phrases of every chunk (Markdown stripped).

    Terms are keyed by Snowball (Porter 2) stems, each keeping the surface the text writes most often
    for display. Four kinds: single words, two adjacent content words (stop words and punctuation
    break a run, as in RAKE-style candidates), identifiers as written (not stemmed, never re-cased)
    and heading phrases (segments of chunk titles and file-name stems). Every term is counted per
    chunk (presence, title weighted above body).

    ``sources`` are the chunks' file names; their stems count as heading phrases
    (``seed-trays.md`` -> ``seed trays``). A term must occur in ``min_chunks`` chunks
    (unigrams in one, in collections under ``small_collection``); terms found in every chunk are
    dropped; at most ``max_terms`` are kept, the most frequent first.
    """
    n = len(texts)
    stats = _Stats()
    rows: list[tuple[Counter[str], Counter[str]]] = []
    df: Counter[str] = Counter()
    slugs: dict[str, str] = {}  # one-word file stems ("errorhandling", "api") -> their keys
    written: set[str] = set()  # words the chunks write in prose or titles, outside paths and URLs
    # The chunks of one section share its title and file: their cleaning and segments are read once.
    plain_titles: dict[str, tuple[str, set[str]]] = {}
    segments_of: dict[tuple[str, str], list[str]] = {}
    for text, title, source in zip(texts, titles, sources or [""] * n, strict=True):
        _, prose, code = clean_parts(text, slots=False) if text else ("", "", "")
        if title not in plain_titles:
            plain = clean_markdown(title, slots=False) if title else ""
            pairs = {k for segment in _TRAIL_MARK.split(plain) if plain for k in _keys(segment) if " " in k}
            plain_titles[title] = plain, pairs
        plain_title, title_pairs = plain_titles[title]
        prose_counts = _terms(prose, stats, in_title=False)
        body = prose_counts + _terms(code, stats, in_title=False, code=True)
        head = _terms(plain_title, stats, in_title=True)
        stats.adjacent.update(k for k in body if " " in k)
        stats.adjacent |= title_pairs
        # a term only in URLs names nothing; without one, the prose's keys are those just counted
        stats.in_prose |= head.keys() | (_keys(_URL.sub(" ", prose)) if _URL.search(prose) else prose_counts.keys())
        written.update(w.lower() for w in _PLAIN_WORD.findall(_PATH_LIKE.sub(" ", f"{prose} {plain_title}")))
        place = (title or "", source)
        if place not in segments_of:
            segments_of[place] = heading_segments(*place, params)
        segments = segments_of[place]
        for segment in segments:
            key = phrase_key(_NUMBERED_BRACKETS.sub("", segment), params)  # "0.24.0 (January 5, 2023)": none
            if key:
                head[key] += 1
                stats.other[key, segment] += 1
        slug = file_stem(source, params) if source else ""
        if slug in segments and " " not in slug:
            slugs[slug.lower()] = phrase_key(slug, params)
        rows.append((body, head))
        df.update(body.keys() | head.keys())
    min_unigram = 1 if n < params.small_collection else params.min_chunks
    kept = [
        t for t, c in df.items()
        if c >= (min_unigram if " " not in t and not t.startswith(PHRASE) else params.min_chunks)
        and (c < n or n < params.small_collection)
    ]
    kept.sort(key=lambda t: (-df[t], t))
    kept = sorted(kept[: params.max_terms])
    column = {t: j for j, t in enumerate(kept)}
    titled = sum(1 for title in titles if title and title.strip()) >= params.titled_share * max(n, 1)
    idents = stats.idents & set(kept)
    # A one-word file stem names a node only when the text writes that word ("api" -> "API"); joined
    # words ("errorhandling") that appear only as the file's name or in paths to it are no name a
    # reader uses.
    unwritten = {key for slug, key in slugs.items() if key and slug not in written}
    displays = stats.displays(set(kept))
    stats.surface = {k: d for k, d in displays.items() if " " not in k and not k.startswith(PHRASE)}

    indptr = np.zeros(n + 1, dtype=np.int64)
    indices: list[int] = []
    weight: list[float] = []
    tf: list[float] = []
    for i, (body, head) in enumerate(rows):
        for j, t in sorted((column[t], t) for t in body.keys() | head.keys() if t in column):
            indices.append(j)
            weight.append(1.0 if t in head else params.body_weight)
            tf.append(float(body.get(t, 0) + params.title_tf * head.get(t, 0)))
        indptr[i + 1] = len(indices)
    return TermIndex(
        terms=kept,
        display=[displays.get(t, t.lstrip(PHRASE)) for t in kept],
        words=[_words(t) for t in kept],
        nameability=np.asarray([0.0 if t in unwritten else _nameability(t, t in idents, stats, params, titled)
                                for t in kept], dtype=np.float64),
        ident=np.asarray([t in idents for t in kept], dtype=bool),
        indptr=indptr,
        indices=np.asarray(indices, dtype=np.int64),
        weight=np.asarray(weight, dtype=np.float64),
        tf=np.asarray(tf, dtype=np.float64),
        n_rows=n,
        capitalised=frozenset(stats.capitalised),
        case_folded=stats.capital_words < params.case_folded_share * max(stats.words, 1),
    )


def _words(term: str) -> frozenset[str]:
    """The stems a term says: an identifier also says its parts ("tmp_path" says "tmp" and "path"), so
    a name never holds both it and the file-name phrase or word it is made of."""
    words = set(term.lstrip(PHRASE).split())
    for word in list(words):
        if "_" in word or "." in word:
            words.update(stem(part) for part in re.split(r"[_.]+", word) if len(part) > 1)
    return frozenset(words)


def name_words(name: str) -> frozenset[str]:
    """The content stems a category name says, its identifiers' parts too, whatever their order
    (``"loop.cycle & Tips and Tricks"`` says what ``"Tips and Tricks & loop.cycle"`` says)."""
    keys = {t.key for phrase in phrases(name) for t in phrase if t.key}
    return frozenset(word for key in keys for word in _words(key))


def join_names(names: Sequence[str]) -> str:
    """``["Seeds", "Soil", "Tools"]`` -> ``"Seeds, Soil & Tools"``."""
    names = list(names)
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " & " + names[-1]


#: Entries of the TF-IDF matrix multiplied at once in its products: bounds their temporary
#: (entries x sketch floats, ~14 MB for a 110-column sketch) at any collection size, where one pass
#: took 1.4 GB at 55k chunks, and keeps it in the processor's cache (faster, not only smaller).
_PRODUCT_BLOCK = 1 << 15


def _segment_dot(data: np.ndarray, gather: np.ndarray, keys: np.ndarray, size: int, dense: np.ndarray) -> np.ndarray:
    """``out[k] = sum(data[e] * dense[gather[e]] for entries e with keys[e] == k)`` for sorted ``keys``,
    in blocks of whole segments (each sum is the same, in the same order, as in one pass)."""
    out = np.zeros((size, dense.shape[1]), dtype=np.result_type(data, dense))
    if len(keys) == 0:
        return out
    bounds = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    start, total = 0, len(keys)
    while start < total:
        stop = total
        if start + _PRODUCT_BLOCK < total:  # end the block where a segment starts
            stop = int(bounds[np.searchsorted(bounds, start + _PRODUCT_BLOCK, side="right") - 1])
            if stop <= start:  # one segment longer than a block: it is taken whole
                after = np.searchsorted(bounds, start, side="right")
                stop = int(bounds[after]) if after < len(bounds) else total
        segment = keys[start:stop]
        starts = np.flatnonzero(np.concatenate(([True], segment[1:] != segment[:-1])))
        out[segment[starts]] = np.add.reduceat(data[start:stop, None] * dense[gather[start:stop]], starts, axis=0)
        start = stop
    return out


def _orthonormal(matrix: np.ndarray) -> np.ndarray:
    """Orthonormal basis of the columns by CholeskyQR2 (matrix products only, no large LAPACK call)."""
    for _ in range(2):
        gram = (matrix.T @ matrix).astype(np.float64)
        gram += np.eye(gram.shape[0]) * (1e-10 * max(1.0, float(np.trace(gram))))
        try:
            chol = np.linalg.cholesky(gram)
        except np.linalg.LinAlgError:
            return np.linalg.qr(matrix)[0]
        matrix = (matrix @ np.linalg.inv(chol).T.astype(matrix.dtype))
    return matrix


class _Csr:
    """The TF-IDF matrix in the two sorted layouts its products need."""

    def __init__(self, index: TermIndex, data: np.ndarray) -> None:
        self.n_rows, self.n_cols = index.n_rows, index.n_terms
        self.rows = index.rows_of_entries()
        self.cols = index.indices
        self.data = data
        by_col = np.argsort(self.cols, kind="stable")
        self.t_data, self.t_rows, self.t_cols = data[by_col], self.rows[by_col], self.cols[by_col]

    def dot(self, dense: np.ndarray) -> np.ndarray:
        """``X @ dense``."""
        return _segment_dot(self.data, self.cols, self.rows, self.n_rows, dense)

    def tdot(self, dense: np.ndarray) -> np.ndarray:
        """``X.T @ dense``."""
        return _segment_dot(self.t_data, self.t_rows, self.t_cols, self.n_cols, dense)


def lsa_features(index: TermIndex, seed: int = 0, params: TreeParams = DEFAULT_PARAMS) -> np.ndarray:
    """L2-normalised LSA rows: sublinear TF-IDF reduced by a randomized SVD (numpy only).

    Rows without any indexed term come back as zeros.
    """
    n, v = index.n_rows, index.n_terms
    rank = min(params.lsa_dim, n - 1, v - 1)
    if rank < 1 or len(index.tf) == 0:
        return np.zeros((n, 0), dtype=np.float32)
    rows = index.rows_of_entries()
    df = np.bincount(index.indices, minlength=v)
    idf = np.log((1 + n) / (1 + df)) + 1.0
    data = (1.0 + np.log(index.tf)) * idf[index.indices]
    norms = np.sqrt(np.bincount(rows, weights=data * data, minlength=n))
    norms[norms == 0] = 1.0
    matrix = _Csr(index, (data / norms[rows]).astype(np.float32))

    rng = np.random.default_rng(seed)
    sketch = min(v, n, rank + params.lsa_oversample)
    q = _orthonormal(matrix.dot(rng.standard_normal((v, sketch)).astype(np.float32)))
    for _ in range(params.lsa_power_iter):  # power iterations sharpen the spectrum
        q = _orthonormal(matrix.dot(_orthonormal(matrix.tdot(q))))
    small = matrix.tdot(q).T.astype(np.float64)  # (sketch, v) = Q.T @ X
    # SVD of the small factor through its (sketch x sketch) Gram matrix.
    eigenvalues, vectors = np.linalg.eigh(small @ small.T)
    order = np.argsort(eigenvalues)[::-1][:rank]
    u = vectors[:, order]
    s = np.sqrt(np.clip(eigenvalues[order], 0.0, None))
    # Fix signs so the output does not depend on LAPACK's sign choice.
    signs = np.sign(u[np.argmax(np.abs(u), axis=0), np.arange(u.shape[1])])
    signs[signs == 0] = 1.0
    features = (q @ (u * signs).astype(np.float32)) * s.astype(np.float32)
    lengths = np.linalg.norm(features, axis=1, keepdims=True)
    lengths[lengths == 0] = 1.0
    return (features / lengths).astype(np.float32)


def term_counts(
    index: TermIndex, members: np.ndarray, labels: np.ndarray, k: int, row_weight: np.ndarray | None = None,
    *, presence_only: bool = False,
) -> np.ndarray:
    """Summed presence weights per (group, term) for ``members`` grouped by ``labels`` (0..k-1).

    ``row_weight`` (aligned with ``members``) scales each chunk's contribution; with
    ``presence_only`` a chunk holding a term counts 1 wherever the term is (title or body).
    """
    entries, lengths = index.row_entries(members)
    group = np.repeat(labels, lengths)
    flat = group * index.n_terms + index.indices[entries]
    values = np.ones(len(entries)) if presence_only else index.weight[entries]
    if row_weight is not None:
        values = values * np.repeat(np.asarray(row_weight, dtype=np.float64), lengths)
    counts = np.bincount(flat, weights=values, minlength=k * index.n_terms)
    return counts.reshape(k, index.n_terms)


def presence(index: TermIndex, members: np.ndarray, columns: Sequence[int]) -> np.ndarray:
    """``(len(members), len(columns))`` booleans: does each member chunk contain each term."""
    out = np.zeros((len(members), len(columns)), dtype=bool)
    if not len(columns) or not len(members):
        return out
    position = np.full(index.n_terms, -1, dtype=np.int64)
    position[np.asarray(columns, dtype=np.int64)] = np.arange(len(columns))
    entries, lengths = index.row_entries(members)
    rows = np.repeat(np.arange(len(members)), lengths)
    cols = position[index.indices[entries]]
    hit = cols >= 0
    out[rows[hit], cols[hit]] = True
    return out


def document_weights(doc_of: np.ndarray, decay: float = DEFAULT_PARAMS.document_decay) -> np.ndarray:
    """Per-chunk weights ``m ** -decay`` for a document with ``m`` chunks among these rows.

    Summed over a document they give ``m ** (1 - decay)``: a document of 40 chunks (a record dump,
    a long manual) counts for more than one of 4 chunks, but not ten times as much, so a word that
    fills one big document cannot outvote words found across many documents, while one stray chunk
    still counts for less than a document that sits wholly in the node.
    """
    if not len(doc_of):
        return np.zeros(0, dtype=np.float64)
    _, inverse, counts = np.unique(doc_of, return_inverse=True, return_counts=True)
    return counts[inverse].astype(np.float64) ** -decay


def corpus_wide_terms(index: TermIndex, doc_of: np.ndarray, share: float = DEFAULT_PARAMS.corpus_wide_share,
                      min_docs: int = DEFAULT_PARAMS.corpus_wide_min_docs) -> np.ndarray:
    """Mask of terms found in at least ``share`` of the documents (the publisher's name, say).

    Such a word says where the collection comes from, not what one category is about. Needs at
    least ``min_docs`` documents; fewer give no mask.
    """
    blocked = np.zeros(index.n_terms, dtype=bool)
    n_docs = len(np.unique(doc_of)) if len(doc_of) else 0
    if n_docs < min_docs or index.n_terms == 0:
        return blocked
    rows = index.rows_of_entries()
    pairs = np.unique(np.asarray(doc_of, dtype=np.int64)[rows] * index.n_terms + index.indices)
    df = np.bincount(pairs % index.n_terms, minlength=index.n_terms)
    return df >= share * n_docs


