"""Words for the offline tree: tokens, plural folding, a sparse term index, LSA features, cluster labels.

Three kinds of terms name clusters: unigrams (``refund``), bigrams of adjacent content words
(``refund window``) and heading phrases — short segments of chunk titles such as
``Returns Policy › Refund windows`` — which are names people already wrote. All are counted per
chunk (presence, title weighted above body) so a cluster can be contrasted with its siblings.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from .snippets import GENERIC_TITLES, clean_markdown

__all__ = [
    "STOP_WORDS",
    "TermIndex",
    "build_term_index",
    "corpus_wide_terms",
    "spread_factor",
    "describe_terms",
    "document_weights",
    "fold_plural",
    "join_names",
    "label_terms",
    "lsa_features",
    "name_words",
    "presence",
    "rank_terms",
    "short_titles",
    "term_counts",
    "title_words",
    "type_prefixes",
]

# English function words plus words too generic to name a category ("use", "following", "page").
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
    """.split()
)

# Number words and past tenses of common verbs ("Five", "Saw"): never a name, though they stay in
# the index (the clustering features do not change with naming).
_NOT_NAMES = frozenset(
    """
    four five six seven eight nine ten eleven twelve twenty thirty forty fifty hundred thousand
    million billion saw told took went came sent bought brought thought felt kept held knew ran
    wrote spoke began gone asked explained confirmed reported
    """.split()
)
# A word followed directly by one of these is probably a verb ("placing an order").
_OBJECT_WORDS = frozenset("the a an your our their his her its my this these those it them you us me him".split())
# Adjectives and vague words: fine inside a bigram ("Sick Leave"), weak as a name on their own.
_WEAK_WORDS = frozenset(
    """
    full free paid unpaid open closed standard general specific special available sick high low
    daily weekly monthly yearly annual quarterly first second third final early late same own total
    minimum maximum key main major minor primary secondary simple complex possible necessary
    additional extra single multiple several entire complete correct wrong true false real actual
    normal regular typical common whole short long quick fast slow easy hard small large big
    local global internal external public private current previous next recent former latest
    different similar certain particular various other relevant appropriate potential original
    warm cold hot cool wet dry new fresh broken damaged missing late early
    monday tuesday wednesday thursday friday saturday sunday january february march april june
    july august september october november december today tomorrow yesterday
    """.split()
)
# Nouns too vague to name a category alone ("Customer", "Hours", "Reason").
_VAGUE_NOUNS = frozenset(
    """
    customer user person people team hour minute week month year reason case issue item thing info
    information detail request option service system process step level amount window result method
    approach problem question answer data value list group kind sort aspect area part side end
    study effect evidence technique analysis role control function factor finding outcome
    """.split()
)
# Headings that say where you are in a document, not what it is about.
_GENERIC_HEADINGS = GENERIC_TITLES | frozenset(
    """
    purpose scope definitions definition references reference questions contact contacts changelog
    history glossary example examples tips prerequisites steps procedure process policy guide
    description responsibilities roles owner owners status next steps see also related faqs
    doc docs file files chunk chunks data corpus text texts readme untitled
    """.split()
)
_KEEP_S = frozenset(
    "news series species physics mathematics economics analytics logistics statistics ethics "
    "politics graphics electronics dynamics robotics genetics kinetics diagnostics mechanics "
    "semantics linguistics optics aerodynamics thermodynamics gas bus plus sales".split()
)
_SMALL_WORDS = frozenset("a an and as at but by for from in into of on or per the to via vs with".split())
_PHRASE_BREAK = re.compile(r"[.,;:!?()\[\]{}<>\"“”|\\/=+*#`~_&@%^$]+|\s[-–—]+\s|\n")
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:['’][A-Za-z]+)?")
# Codes such as NWP-DAI-00412, ord_7R4KQ2M or AUTH-423 name one thing, never a topic.
_IDENTIFIER = re.compile(r"\b[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+\b")
_DIGIT = re.compile(r"\d")
_DATE_PREFIX = re.compile(r"^\d{4}[-_]\d{2}[-_]\d{2}[-_ ]*")
_ADVERB_NOUNS = frozenset(
    "family supply assembly anomaly monopoly italy rally reply july butterfly jelly belly ally fly "
    "poly holly lily assembly melancholy homily".split()
)
_TRAIL = re.compile(r"\s*(?:›|»|>|\||:|\s[-–—]\s)\s*")
_NUMBERING = re.compile(r"^(?:(?:step|part|section|chapter|appendix|q|a)\s*)?[\dIVXivx]+(?:\.\d+)*[.):]?\s+|^[A-Za-z][.)]\s+", re.I)
_FILE_NAME = re.compile(r"^(?:.*/)?([\w.-]+)\.(?:md|markdown|txt|rst|jsonl|json|html?)$", re.I)
PHRASE = "§"


def fold_plural(word: str) -> str:
    """Fold simple English plurals to the singular: ``policies -> policy``, ``refunds -> refund``."""
    if len(word) <= 3 or word in _KEEP_S or not word.endswith("s"):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith(("ches", "shes", "xes", "zzes")):
        return word[:-2]
    if word.endswith(("ss", "us", "is", "ous", "ics")):
        return word
    return word[:-1]


def _stem(word: str) -> str:
    """A crude stem, only to tell that ``deploy`` and ``deploying`` say the same thing."""
    for suffix in ("ments", "ment", "ings", "ing", "ers", "er", "ions", "ion", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=200_000)
def _fold_key(lower: str) -> str:
    return "" if lower in STOP_WORDS or len(lower) < 3 else fold_plural(lower)


def _key(lower: str, acronym: bool) -> str:
    """The folded key of a lower-cased word, ``""`` for stop words and short words."""
    key = _fold_key(lower)
    if not key and acronym and lower not in STOP_WORDS:
        return lower
    return key


def _tokens(text: str) -> list[list[tuple[str, str]]]:
    """Phrases of ``(folded key, surface form)`` tokens; stop words kept as ``("", surface)``."""
    phrases: list[list[tuple[str, str]]] = []
    if _DIGIT.search(text):
        text = _IDENTIFIER.sub(lambda m: m.group(0) if not any(c.isdigit() for c in m.group(0)) else " . ", text)
    for phrase in _PHRASE_BREAK.split(text):
        tokens: list[tuple[str, str]] = []
        for surface in _TOKEN.findall(phrase):
            if "'" in surface or "’" in surface:
                contraction = re.search(r"['’]([A-Za-z]*)$", surface)
                if contraction:
                    if contraction.group(1).lower() != "s":  # don't, we'll, they've
                        tokens.append(("", surface))
                        continue
                    surface = surface[: contraction.start()]
            tokens.append((_key(surface.lower(), len(surface) == 2 and surface.isupper()), surface))
        if tokens:
            phrases.append(tokens)
    return phrases


@dataclass
class _Stats:
    """Corpus-wide observations about terms: surface forms and how often a word acts as a verb."""

    pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    forms: Counter[str] = field(default_factory=Counter)
    seen: Counter[str] = field(default_factory=Counter)
    before_object: Counter[str] = field(default_factory=Counter)
    before_past: Counter[str] = field(default_factory=Counter)
    _cases: dict[str, Counter[str]] | None = None

    def surfaces(self, keep: set[str]) -> dict[str, Counter[str]]:
        """Surface forms of the terms in ``keep``."""
        out: dict[str, Counter[str]] = {}
        for (key, surface), count in self.pairs.items():
            if key in keep:
                out.setdefault(key, Counter())[surface] += count
        return out

    def cases(self, lower: str) -> Counter[str] | None:
        """How a lower-cased word was written across the collection."""
        if self._cases is None:
            self._cases = {}
            for form, count in self.forms.items():
                self._cases.setdefault(form.lower(), Counter())[form] += count
        return self._cases.get(lower)


def _terms(text: str, stats: _Stats) -> Counter[str]:
    """Unigram and bigram counts of ``text``; records surfaces and verb evidence in ``stats``."""
    counts: Counter[str] = Counter()
    pairs, forms = stats.pairs, stats.forms
    for phrase in _tokens(text):
        previous_key, previous_surface = "", ""
        last = len(phrase) - 1
        for position, (key, surface) in enumerate(phrase):
            if key:
                counts[key] += 1
                pairs[key, surface] += 1
                forms[surface] += 1
                if position < last:
                    following = phrase[position + 1][1].lower()
                    if following in _OBJECT_WORDS:
                        stats.before_object[key] += 1
                    elif _participle(following) or following in _NOT_NAMES:
                        stats.before_past[key] += 1
                if previous_key:
                    bigram = f"{previous_key} {key}"
                    counts[bigram] += 1
                    pairs[bigram, f"{previous_surface} {surface}"] += 1
            previous_key, previous_surface = key, surface
    stats.seen.update({k: c for k, c in counts.items() if " " not in k})
    return counts


def _heading_phrases(title: str, source: str, stats: _Stats) -> set[str]:
    """Short, specific segments of a title trail (``Doc › Section``) and the file name as phrase keys."""
    found: set[str] = set()
    segments = _TRAIL.split(title) if title else []
    if source:
        segments.append(source.replace("\\", "/").rsplit("/", 1)[-1])
    for raw in segments:
        file_name = _FILE_NAME.match(raw.strip())
        if file_name:
            words = _DATE_PREFIX.sub("", file_name.group(1)).replace("-", " ").replace("_", " ").split()
            while words and words[0].lower() in _GENERIC_HEADINGS:
                words.pop(0)  # faq-account-lockout -> account lockout
            raw = " ".join(words)
        segment = _NUMBERING.sub("", clean_markdown(raw)).strip(" .-–—")
        if not segment or len(segment) > 40 or segment.lower() in _GENERIC_HEADINGS:
            continue
        tokens = [t for phrase in _tokens(segment) for t in phrase]
        content = [key for key, _ in tokens if key]
        if not 1 <= len(content) <= 3 or len(tokens) > 4:
            continue
        key = PHRASE + " ".join(content)
        found.add(key)
        stats.pairs[key, segment] += 1
    return found


def type_prefixes(titles: Sequence[str]) -> frozenset[str]:
    """Title prefixes that say what kind of document it is (``FAQ:``, ``Runbook:``), lower-cased.

    A one-word prefix before a colon, or one that starts the titles of 3 or more documents.
    """
    seen: Counter[str] = Counter()
    for title in set(titles):
        head, colon, rest = title.partition(":")
        if colon and rest.strip() and len(head) <= 30:
            seen[head.strip().lower()] += 1
    return frozenset(p for p, c in seen.items() if c >= 3 or len(p.split()) == 1) | _GENERIC_HEADINGS


def _strip_prefix(title: str, prefixes: frozenset[str]) -> str:
    head, colon, rest = title.partition(":")
    return rest.strip() if colon and head.strip().lower() in prefixes and rest.strip() else title.strip()


def _file_words(source: str) -> list[str]:
    """Words of a file name's stem, generic leading words dropped (``faq-account-lockout.md`` -> account lockout)."""
    match = _FILE_NAME.match(source.replace("\\", "/").rsplit("/", 1)[-1].strip())
    if not match:
        return []
    words = _DATE_PREFIX.sub("", match.group(1)).replace("-", " ").replace("_", " ").split()
    while words and words[0].lower() in _GENERIC_HEADINGS:
        words.pop(0)
    return words


def short_titles(title: str, source: str, prefixes: frozenset[str]) -> list[tuple[str, str]]:
    """Names a document already has, as ``(phrase key, surface)``: its title, then its file name.

    Only short ones qualify (1-3 content words, at most 4 words, 40 characters); a kind-of-document
    prefix (``FAQ: Missing Items``, see :func:`type_prefixes`) is dropped first.
    """
    out: list[tuple[str, str]] = []
    for raw in (_strip_prefix(title, prefixes), " ".join(_file_words(source))):
        segment = _NUMBERING.sub("", clean_markdown(raw)).strip(" .-–—") if raw else ""
        if not segment or len(segment) > 40 or segment.lower() in _GENERIC_HEADINGS:
            continue
        tokens = [t for phrase in _tokens(segment) for t in phrase]
        content = [key for key, _ in tokens if key]
        if 1 <= len(content) <= 3 and len(tokens) <= 4:
            key = PHRASE + " ".join(content)
            if all(key != k for k, _ in out):
                out.append((key, segment))
    return out


def title_words(title: str, source: str, prefixes: frozenset[str]) -> list[str]:
    """Folded content words of a document's title and file name, in order, without repeats."""
    words: list[str] = []
    for raw in (_strip_prefix(title, prefixes), " ".join(_file_words(source))):
        for phrase in _tokens(clean_markdown(raw)):
            words.extend(key for key, _ in phrase if key and key not in words)
    return words


def _name_fitness(term: str, stats: _Stats) -> float:
    """How well a term stands alone as a category name (1.0 noun-like, lower for verbs/adjectives)."""
    if term.startswith(PHRASE):
        words = term[1:].split()
        return 1.15 * (_name_fitness(words[0], stats) if len(words) == 1 else 1.0)
    words = term.split()
    if any(word in _NOT_NAMES for word in words):
        return 0.0 if len(words) == 1 else 0.3
    if len(words) == 2:
        first, last = words
        factor = 0.7 if first in _WEAK_WORDS else 1.0
        # "agent refunded", "photo showed": a noun followed by a verb is a clause, not a name.
        if _participle(last) or _verbish(last, stats) > 0.2 or last in _WEAK_WORDS or _adverb(last):
            factor *= 0.3
        elif _verbish(first, stats) > 0.2 or _participle(first):
            factor *= 0.5  # "Contact Support", "Reset Link": an instruction, not a topic
        return factor
    factor = 1.0
    if term in _WEAK_WORDS or term[-1].isdigit():
        factor *= 0.35  # adjectives; codes such as COL1 or SEV2
    elif len(term) == 2 or term in _VAGUE_NOUNS:
        factor *= 0.5  # a bare two-letter acronym or a vague noun says little
    elif _participle(term):
        factor *= 0.45
    elif _adverb(term):
        factor *= 0.35  # "simply", "automatically"
    elif term.endswith("ing") and len(term) > 5:
        factor *= 0.75  # "Shipping" is a fine name, "Managing" is not; a bigram usually says more
    # "Agent refunded", "agent explained": a noun mostly seen doing things in the past tense names
    # who acted (a ticket's actor), not what the text is about.
    seen = stats.seen.get(term, 0)
    if seen:
        factor *= max(0.3, 1.0 - 2.5 * stats.before_past.get(term, 0) / seen)
    # "managing your account", "placing an order": a word followed by a determiner is a verb.
    return factor * max(0.15, 1.0 - 2.0 * _verbish(term, stats))


def _adverb(word: str) -> bool:
    return word.endswith("ly") and word not in _ADVERB_NOUNS


def _participle(word: str) -> bool:
    return word.endswith("ed") and not word.endswith("eed") and len(word) > 4


def _verbish(word: str, stats: _Stats) -> float:
    seen = stats.seen.get(word, 0)
    return stats.before_object.get(word, 0) / seen if seen else 0.0


@dataclass
class TermIndex:
    """A sparse chunk x term matrix (CSR) with display names for the terms.

    ``weight`` is a chunk's presence weight for a term (1.0 in the title, 0.75 in the body only),
    used for naming; ``tf`` holds raw counts (title counted twice), used for LSA features;
    ``fitness`` says how well each term reads as a name; ``words`` are its folded words.
    """

    terms: list[str]
    display: list[str]
    words: list[frozenset[str]]
    fitness: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    weight: np.ndarray
    tf: np.ndarray
    n_rows: int

    @property
    def n_terms(self) -> int:
        return len(self.terms)

    def rows_of_entries(self) -> np.ndarray:
        """The row of every stored entry."""
        return np.repeat(np.arange(self.n_rows), np.diff(self.indptr))

    def entries_of(self, rows: np.ndarray) -> np.ndarray:
        """Positions of the stored entries of ``rows`` (in the order of ``rows``)."""
        return self.row_entries(rows)[0]

    def row_entries(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`entries_of` ``rows``, and how many entries each row has (to repeat per-row values)."""
        starts = self.indptr[rows]
        lengths = self.indptr[rows + 1] - starts
        total = int(lengths.sum())
        if total == 0:
            return np.zeros(0, dtype=np.int64), lengths
        offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        return offsets + np.arange(total), lengths


def title_case(text: str) -> str:
    """Title Case that keeps acronyms and CamelCase and leaves small words lower-case."""
    words = text.split()
    out = []
    for position, word in enumerate(words):
        if word.isupper() and len(word) > 5:
            out.append(word.capitalize())  # SHOUTED HEADINGS, not acronyms
        elif any(ch.isupper() for ch in word[1:]):
            out.append(word)
        elif position and word.lower() in _SMALL_WORDS:
            out.append(word.lower())
        else:
            out.append(word[:1].upper() + word[1:])
    return " ".join(out)


def _recase(text: str, stats: _Stats) -> str:
    """Restore acronyms a file name lost (``api rate limits`` -> ``API rate limits``)."""
    words = []
    for word in text.split():
        forms = stats.cases(word.lower())
        if word.islower() and forms:
            upper = sum(c for f, c in forms.items() if f.isupper() and len(f) > 1)
            if upper >= 0.6 * sum(forms.values()):
                word = word.upper()
        words.append(word)
    return " ".join(words)


def _display(term: str, surfaces: Counter[str], stats: _Stats) -> str:
    """Display form of a term: its most frequent surface in Title Case, acronyms kept."""
    if term.startswith(PHRASE):
        # Prefer a surface with capitals (a heading) over a lower-case file name.
        best = max(surfaces.items(), key=lambda kv: (kv[1] + (0.5 if not kv[0].islower() else 0), kv[0]))[0]
        return title_case(_recase(best, stats))
    by_lower: Counter[str] = Counter()
    cases: dict[str, Counter[str]] = {}
    for surface, count in surfaces.items():
        by_lower[surface.lower()] += count
        cases.setdefault(surface.lower(), Counter())[surface] += count
    best = max(by_lower.items(), key=lambda kv: (kv[1], kv[0].endswith("s"), kv[0]))[0]
    words = []
    for position, word in enumerate(best.split()):
        forms: Counter[str] = Counter()
        for variant, count in cases[best].items():
            parts = variant.split()
            if position < len(parts):
                forms[parts[position]] += count
        common = max(forms.items(), key=lambda kv: (kv[1], kv[0]))[0] if forms else word
        upper_share = sum(c for f, c in forms.items() if f.isupper()) / max(1, sum(forms.values()))
        if len(word) <= 6 and upper_share >= 0.6:
            words.append(word.upper())
        elif any(ch.isupper() for ch in common[1:]) and not common.isupper():
            words.append(common)
        else:
            words.append(word[:1].upper() + word[1:])
    return " ".join(words)


def build_term_index(
    texts: Sequence[str],
    titles: Sequence[str],
    sources: Sequence[str] | None = None,
    *,
    max_terms: int = 40000,
) -> TermIndex:
    """Index the unigrams, bigrams and heading phrases of every chunk (Markdown stripped).

    ``sources`` are the chunks' file names; their stems count as heading phrases
    (``support-tickets.jsonl`` -> ``Support Tickets``).

    Unigrams need to occur in 2 chunks (1 in collections under 20), bigrams and phrases in 2
    always; terms found in every chunk are dropped; at most ``max_terms`` are kept, the most
    frequent first.
    """
    n = len(texts)
    stats = _Stats()
    rows: list[tuple[Counter[str], Counter[str]]] = []
    df: Counter[str] = Counter()
    for text, title, source in zip(texts, titles, sources or [""] * n, strict=True):
        body = _terms(clean_markdown(text) if text else "", stats)
        head = _terms(clean_markdown(title) if title else "", stats)
        for phrase in _heading_phrases(title, source, stats):
            head[phrase] += 1
        rows.append((body, head))
        df.update(body.keys() | head.keys())
    min_unigram = 1 if n < 20 else 2
    kept = [
        t for t, c in df.items()
        if c >= (min_unigram if " " not in t and not t.startswith(PHRASE) else 2) and (c < n or n < 4)
    ]
    kept.sort(key=lambda t: (-df[t], t))
    kept = sorted(kept[:max_terms])
    column = {t: j for j, t in enumerate(kept)}
    surfaces = stats.surfaces(set(kept))

    indptr = np.zeros(n + 1, dtype=np.int64)
    indices: list[int] = []
    weight: list[float] = []
    tf: list[float] = []
    for i, (body, head) in enumerate(rows):
        for j, t in sorted((column[t], t) for t in body.keys() | head.keys() if t in column):
            indices.append(j)
            weight.append(1.0 if t in head else 0.6)
            tf.append(float(body.get(t, 0) + 2 * head.get(t, 0)))
        indptr[i + 1] = len(indices)
    return TermIndex(
        terms=kept,
        display=[_display(t, surfaces[t], stats) for t in kept],
        words=[frozenset(t.lstrip(PHRASE).split()) for t in kept],
        fitness=np.asarray([_name_fitness(t, stats) for t in kept], dtype=np.float64),
        indptr=indptr,
        indices=np.asarray(indices, dtype=np.int64),
        weight=np.asarray(weight, dtype=np.float64),
        tf=np.asarray(tf, dtype=np.float64),
        n_rows=n,
    )


def _segment_sum(values: np.ndarray, keys: np.ndarray, size: int) -> np.ndarray:
    """Row sums of ``values`` grouped by sorted ``keys`` into an array of ``size`` rows."""
    out = np.zeros((size, values.shape[1]), dtype=values.dtype)
    if len(keys) == 0:
        return out
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    out[keys[starts]] = np.add.reduceat(values, starts, axis=0)
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
        self.by_col = np.argsort(self.cols, kind="stable")

    def dot(self, dense: np.ndarray) -> np.ndarray:
        """``X @ dense``."""
        return _segment_sum(self.data[:, None] * dense[self.cols], self.rows, self.n_rows)

    def tdot(self, dense: np.ndarray) -> np.ndarray:
        """``X.T @ dense``."""
        order = self.by_col
        return _segment_sum(self.data[order, None] * dense[self.rows[order]], self.cols[order], self.n_cols)


def lsa_features(index: TermIndex, dim: int = 100, seed: int = 0) -> np.ndarray:
    """L2-normalised LSA rows: sublinear TF-IDF reduced by a randomized SVD (numpy only).

    Rows without any indexed term come back as zeros.
    """
    n, v = index.n_rows, index.n_terms
    rank = min(dim, n - 1, v - 1)
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
    sketch = min(v, n, rank + 10)
    q = _orthonormal(matrix.dot(rng.standard_normal((v, sketch)).astype(np.float32)))
    for _ in range(2):  # power iterations sharpen the spectrum
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
    index: TermIndex, members: np.ndarray, labels: np.ndarray, k: int, row_weight: np.ndarray | None = None
) -> np.ndarray:
    """Summed presence weights per (group, term) for ``members`` grouped by ``labels`` (0..k-1).

    ``row_weight`` (aligned with ``members``) scales each chunk's contribution.
    """
    entries, lengths = index.row_entries(members)
    group = np.repeat(labels, lengths)
    flat = group * index.n_terms + index.indices[entries]
    values = index.weight[entries]
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


def document_weights(doc_of: np.ndarray) -> np.ndarray:
    """Per-chunk weights ``m ** -0.75`` for a document with ``m`` chunks among these rows.

    Summed over a document they give ``m ** 0.25``: a document of 40 chunks (a ticket dump, a long
    manual) counts for more than one of 4 chunks, but only 1.8 times as much, so a word that fills
    one big document cannot outvote words found across many documents, while one stray chunk
    still counts for less than a document that sits wholly in the cluster.
    """
    if not len(doc_of):
        return np.zeros(0, dtype=np.float64)
    _, inverse, counts = np.unique(doc_of, return_inverse=True, return_counts=True)
    return counts[inverse].astype(np.float64) ** -0.75


def spread_factor(index: TermIndex, members: np.ndarray, doc_of: np.ndarray, row_weight: np.ndarray) -> np.ndarray:
    """Per-term multiplier (0.3-1) that marks down terms whose weight in a cluster comes from one document.

    "Agent" in a cluster of customer FAQs and a support-ticket dump comes from the tickets alone;
    it says what kind of document half the cluster is, not what the cluster is about. A term is
    marked down when over half of its weight comes from its top document, the more so the more
    that exceeds the top document's share of the cluster; unless one document holds half the
    cluster (its words are then the cluster's words).
    """
    factor = np.ones(index.n_terms)
    if len(members) < 2:
        return factor
    entries, lengths = index.row_entries(members)
    _, local = np.unique(doc_of[members], return_inverse=True)
    weight = np.asarray(row_weight, dtype=np.float64)
    cluster_top = float(np.bincount(local, weights=weight).max() / max(weight.sum(), 1e-12))
    if cluster_top >= 0.5:
        return factor
    terms = index.indices[entries]
    values = index.weight[entries] * np.repeat(weight, lengths)
    keys, inverse = np.unique(np.repeat(local, lengths) * index.n_terms + terms, return_inverse=True)
    mass = np.bincount(inverse, weights=values)
    top = np.zeros(index.n_terms)
    np.maximum.at(top, keys % index.n_terms, mass)
    total = np.bincount(terms, weights=values, minlength=index.n_terms)
    share = np.divide(top, total, out=np.zeros_like(top), where=total > 0)
    excess = np.where(share > 0.5, np.clip((share - cluster_top) / (1.0 - cluster_top), 0.0, 1.0), 0.0)
    return 1.0 - 0.7 * excess


def corpus_wide_terms(index: TermIndex, doc_of: np.ndarray, share: float = 0.8, min_docs: int = 5) -> np.ndarray:
    """Mask of terms found in at least ``share`` of the documents (the company name, "customer").

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


def rank_terms(
    inside: np.ndarray,
    n_inside: int,
    outside: np.ndarray,
    n_outside: int,
    background: np.ndarray,
    n_background: int,
    *,
    fitness: np.ndarray | None = None,
    present: np.ndarray | None = None,
    n_present: int | None = None,
    limit: int = 12,
) -> list[tuple[int, float, float]]:
    """Terms that distinguish a cluster, best first, as ``(term column, score, share)``.

    ``share`` is the cluster's (weighted) document share ``p`` of the term; the score is ``p``
    times its log-ratio against the siblings' share ``q`` plus its log-ratio against the
    whole collection (a KL-divergence term: frequent in the cluster, rare beside it), multiplied
    by ``fitness`` (how well the term reads as a name). With no siblings the collection stands in
    for them. When the counts are weighted (see :func:`document_weights`), ``present`` and
    ``n_present`` give the plain chunk counts. Terms in fewer than 2 chunks of a cluster of 4 or
    more are skipped; a fitness of 0 rules a term out.
    """
    p = inside / max(1, n_inside)
    q = outside / max(1, n_outside) if n_outside else background / max(1, n_background)
    g = background / max(1, n_background)
    eps = 0.02
    score = p * (np.log((p + eps) / (q + eps)) + np.log((p + eps) / (g + eps)))
    if fitness is not None:
        score = np.where(score > 0, score * fitness, score)
    floor = 1.5 if (n_inside if n_present is None else n_present) >= 4 else 0.5
    score[(inside if present is None else present) < floor] = -np.inf
    if fitness is not None:
        score[fitness <= 0] = -np.inf
    order = np.lexsort((np.arange(len(score)), -score))[:limit]
    return [(int(j), float(score[j]), float(p[j])) for j in order if np.isfinite(score[j]) and score[j] > 0]


def name_words(name: str) -> set[str]:
    """Folded words of a display name (``"Refunds & Returns"`` -> ``{"refund", "return"}``)."""
    return {fold_plural(w) for w in re.findall(r"[a-z0-9]+", name.lower())}


def _stems(words: frozenset[str] | set[str]) -> set[str]:
    return {_stem(w) for w in words}


def label_terms(
    ranked: list[tuple[int, float, float]],
    index: TermIndex,
    *,
    banned: set[str],
    banned_words: set[str],
    members: np.ndarray | None = None,
    row_weight: np.ndarray | None = None,
) -> list[int]:
    """Pick 1-3 term columns that make a readable name, supported by most of the cluster.

    A term gives way to a longer one containing its words that scores at least 60% as much
    (``Refund`` -> ``Refund Windows``) and covers about as much of the cluster. A term's support
    is the share of the ``members`` chunks that contain it, weighted by ``row_weight`` (see
    :func:`document_weights`, so it leans towards the share of documents). A name must be
    supported by at least half of the cluster: the best term that is (scoring at least half as
    much as the best term overall) comes first, and may be joined by a strong second one that
    covers other chunks (``A & B``: 60% of its score, 30% support, within 3 words). When no single
    term covers half of a mixed cluster, distinctive terms covering new ground are added until
    they do (``A, B & C``, at most 5 words). Terms sharing a stem are never joined. Display names
    in ``banned`` (taken by siblings or ancestors), terms made only of ``banned_words`` (the
    ancestors' words) and heading phrases found in under half the cluster are skipped.
    """
    allowed = [
        (j, score, share)
        for j, score, share in ranked
        if index.display[j].lower() not in banned and not index.words[j] <= banned_words
    ]
    if not allowed:
        return []
    if members is None:
        members = np.arange(index.n_rows)
    hits = presence(index, np.asarray(members, dtype=np.int64), [j for j, _, _ in allowed])
    weight = np.ones(len(members)) if row_weight is None else np.asarray(row_weight, dtype=np.float64)
    weight = weight / max(float(weight.sum()), 1e-12)

    def support(mask: np.ndarray) -> float:
        return float(weight @ mask)

    supported = {j: support(hits[:, c]) for c, (j, _, _) in enumerate(allowed)}
    column = {j: c for c, (j, _, _) in enumerate(allowed)}
    candidates: list[tuple[int, float, float]] = []
    for j, score, _ in allowed:
        words = index.words[j]
        if any(
            index.words[b] > words and s >= 0.6 * score and supported[b] >= min(0.5, 0.65 * supported[j])
            for b, s, _ in allowed
        ):
            continue  # a longer term with these words says it better, for about as much of the cluster
        if any(index.display[c].lower() == index.display[j].lower() for c, _, _ in candidates):
            continue
        # A heading or file name names a cluster only if most of it comes from there.
        if index.terms[j].startswith(PHRASE) and supported[j] < 0.5:
            continue
        candidates.append((j, score, supported[j]))
    if not candidates:
        return []
    top = candidates[0][1]
    majority = [c for c, (_, score, share) in enumerate(candidates) if share >= 0.5 and score >= 0.5 * top]
    chosen = [majority[0] if majority else 0]
    covered = hits[:, column[candidates[chosen[0]][0]]].copy()
    lead = candidates[chosen[0]][1]

    def addition(wanted: bool) -> int:
        """The term that best adds distinct ground to the name, or -1."""
        best, best_value = -1, 0.0
        length = sum(_length(index.display[candidates[c][0]]) for c in chosen)
        stems = set().union(*(_stems(index.words[candidates[c][0]]) for c in chosen))
        before = support(covered)
        for c, (j, score, share) in enumerate(candidates):
            if c in chosen or index.fitness[j] < 0.9 or _stems(index.words[j]) & stems:
                continue
            if length + _length(index.display[j]) > (5 if wanted else 3):
                continue
            gain = support(covered | hits[:, column[j]]) - before
            strong = score >= (0.25 * top if wanted else 0.6 * lead) and share >= (0.1 if wanted else 0.3)
            value = score * gain / max(share, 1e-9)  # distinctive, and covering new ground
            if strong and gain >= (0.1 if wanted else 0.15) and value > best_value + 1e-12:
                best, best_value = c, value
        return best

    while len(chosen) < (3 if support(covered) < 0.5 else 2):
        wanted = support(covered) < 0.5
        pick = addition(wanted)
        if pick < 0:
            break
        chosen.append(pick)
        covered |= hits[:, column[candidates[pick][0]]]
        if not wanted:
            break
    if support(covered) < 0.5 and majority:
        return [candidates[majority[0]][0]]
    return [candidates[c][0] for c in chosen]


def join_names(names: Sequence[str]) -> str:
    """``["Orders", "Billing", "Refunds"]`` -> ``"Orders, Billing & Refunds"``."""
    names = list(names)
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " & " + names[-1]


def _length(display: str) -> int:
    """Words of a name that count towards its length (``and``, ``of`` ... do not)."""
    return sum(1 for w in display.split() if w.lower() not in _SMALL_WORDS)


def describe_terms(
    ranked: list[tuple[int, float, float]],
    index: TermIndex,
    skip: set[str],
    limit: int = 4,
    avoid: set[str] | frozenset[str] = frozenset(),
) -> list[str]:
    """Lower-case display forms of the top terms, skipping words already said and terms with ``avoid`` words."""
    out: list[str] = []
    seen = _stems(skip)
    for j, _, _ in ranked:
        stems = _stems(index.words[j])
        if stems <= seen or index.words[j] & avoid:
            continue
        display = index.display[j]
        out.append(display if display.isupper() else display.lower())
        seen |= stems
        if len(out) >= limit:
            break
    return out
