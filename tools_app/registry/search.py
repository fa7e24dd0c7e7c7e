"""The registry index and its search methods: regex, bm25, embedding, hybrid (SPEC §5).

An `Index` is an immutable snapshot of one scope's catalogue (effective names and descriptions,
schemas, metadata) with the structures each method needs. Indexes are cached per process under the
scope's fingerprint (one aggregate query, SPEC §1): a tool or binding edit through any worker changes
the fingerprint, so the next request on every worker builds a fresh index. Embeddings are loaded
lazily, the first time a method needs them, from the vectors stored in the database by text
(embedding.py), so only new or edited tools are embedded, once for all workers.

Scores are normalised to 0–1:
- regex: the weight of the best field the pattern matches (name 1.0 … parameter descriptions 0.5),
  plus 0.05 per further field, 1.0 when it matches the whole name. Patterns have Python's re syntax and
  results but are matched by RE2 in linear time (patterns.py): no pattern can backtrack exponentially;
- bm25: BM25F (k1=1.2, b=0.75) over weighted fields, plus the name's adjacent word pairs that the query says
  in order (NAME_PAIR_WEIGHT), divided by the largest score the query's known terms and pairs could reach
  (idf × (k1 + 1) each), so a tool matching every term strongly approaches 1;
- embedding: cosine similarity of all-MiniLM-L6-v2 sentence vectors, clipped at 0;
- hybrid: HYBRID_WEIGHT × bm25 + (1 − HYBRID_WEIGHT) × embedding. Hybrid needs the embedding extra
  and answers SEARCH_UNAVAILABLE without it, like `embedding`: a keyword-only answer under a semantic
  method's name would mislead the caller.
bm25 and hybrid place the tools of a request for several tools (MULTI_LEAD, Index._place_parts): such a hit
keeps its score for the whole request, so scores are not always in descending order, and its match reason
names the part it answers.
"""

import copy
import heapq
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from tools_app.data_access.budget import charge
from tools_app.grants import listed_input_schema
from tools_app.kernel.caches import LruCache
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.kernel.limits import SEARCH_MAX_REGEX_CHARS, SEARCH_MAX_SCORED_PARTS
from tools_app.kernel.patterns import PatternError, compile_pattern
from tools_app.paging import paged_input_schema, paged_output_schema
from tools_app.registry import embedding
from tools_app.registry.text import is_cjk, readable_name, terms
from tools_app.tool_types import TOOL_TYPES

__all__ = ["METHODS", "Index", "ToolDoc", "build_index"]

METHODS = ("regex", "bm25", "embedding", "hybrid")
# The bm25 share of the hybrid score, tuned on the tuning split of the outside set (bench/registry/data/outside,
# BFCL + NESTFUL; best MRR@10 there, 0.5-0.7 is a plateau) and reported on its held-out split:
# `bench/registry/run.py --tune`. (The own issue-5 set preferred 0.3; it is too easy to tune on.)
HYBRID_WEIGHT = 0.6
K1 = 1.2
B = 0.75
# Pairs of adjacent words of a tool's name ("time zone" in `WeatherAPI.com_Time_Zone_API`) are indexed as terms
# of their own, and a query's adjacent words are looked up among them: a request that says two words of a name in
# its order is evidence for that tool over tools that merely contain both words somewhere. Weight of a pair match
# against a word match, chosen on the outside set's tuning split (bench/registry/README.md).
NAME_PAIR_WEIGHT = 0.6
# Requests for several tools at once ("convert 20 euros to yen, and then send the result to Bob"): the request is
# split into parts at sentence ends and at joining words; a part that carries at least MULTI_PART_SHARE of the
# request's keyword weight (idf) and MULTI_PART_TERMS known words is a request of its own. The whole request's
# first MULTI_LEAD tools keep their places, then each part's best tool not yet placed (scored on the part, with
# the whole request as context) gets the next place, then the whole request's order goes on. (Taking a part's
# best only when it is not placed yet did worse on tuning: a second tool of the same kind is often the right
# one.) At most SEARCH_MAX_SCORED_PARTS parts are scored (the heaviest), so a pasted text with thousands of "and then"
# costs at most that many small searches. Chosen on the outside set's tuning split (bench/registry/README.md).
_PART_SPLIT = re.compile(
    r"(?<=[.!?;])\s+|\n+|,?\s+\b(?:and then|and also|then|also|additionally|as well as|after that|followed by)\b\s+"
    r"|,\s+and\s+",
    re.IGNORECASE,
)
MULTI_PART_SHARE = 0.3
MULTI_PART_TERMS = 2
MULTI_LEAD = 3

# Characters of a query the embedding model reads (its window: embedding.MAX_TOKENS word pieces, ~4
# characters each); Index.request_part picks them from a longer query.
QUERY_WINDOW = 500
REQUEST_SHARE = 0.6  # a sentence is read with the best one if it scores at least this share of it
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_REQUEST_CUES = (
    "please",
    "can you",
    "could you",
    "would you",
    "i want",
    "i need",
    "i'd like",
    "i would like",
    "help me",
    "find",
    "get",
    "show",
    "tell",
    "give",
    "list",
    "search",
    "look up",
    "calculate",
    "compute",
    "convert",
    "create",
    "make",
    "send",
    "book",
    "check",
    "what",
    "how",
    "which",
    "who",
    "when",
    "where",
    "is there",
)

# BM25F field weights: a word in the name says more about a tool than one in a parameter description.
FIELD_WEIGHTS = {
    "name": 3.0,
    "category": 2.0,
    "tags": 2.0,
    "server": 1.5,
    "parameters": 1.5,
    "description": 1.0,
    "parameter descriptions": 0.5,
}
REGEX_WEIGHTS = {
    "name": 1.0,
    "category": 0.9,
    "tags": 0.9,
    "server": 0.8,
    "parameters": 0.7,
    "description": 0.6,
    "parameter descriptions": 0.5,
}
# RE2 matches in time linear in the text (patterns.py), but with a factor of the pattern's size: a large
# counted repetition (`e.{900}z`) costs seconds over thousands of long tools. Matching stops past this budget.
REGEX_TIME_BUDGET = 0.5


@dataclass(frozen=True)
class ToolDoc:
    """One catalogued tool as the scope shows it (treat as read-only: shared between requests)."""

    position: int
    name: str
    description: str
    tool_id: int
    type: str
    alias: str
    category: str
    tags: tuple[str, ...]
    input_schema: dict
    output_schema: dict | None
    metadata: dict
    mcp_server: str
    fields: dict[str, str] = field(repr=False)
    pinned: dict[str, Any] = field(default_factory=dict)  # the binding's pinned arguments (tools_app.grants)

    @property
    def examples(self) -> list[str]:
        return [e for e in (self.metadata.get("examples") or []) if isinstance(e, str)]

    @property
    def return_format(self) -> str:
        return self.metadata.get("return_format") or ""


def _parameter_texts(schema: Any) -> tuple[list[str], list[str]]:
    names: list[str] = []
    descriptions: list[str] = []
    properties = (schema or {}).get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict):
        for name, spec in properties.items():
            names.append(str(name))
            if isinstance(spec, dict):
                for key in ("description", "title"):
                    if isinstance(spec.get(key), str):
                        descriptions.append(spec[key])
                if isinstance(spec.get("enum"), list):
                    descriptions.append(" ".join(str(v) for v in spec["enum"][:20]))
    return names, descriptions


def make_doc(position: int, name: str, description: str, tool: Any, pinned: dict[str, Any] | None = None) -> ToolDoc:
    """A tool as the registry shows it; a pageable tool's schemas as clients see them (docs/paging.md): the
    `cursor` argument added, the output schema widened to a page (the search indexes the tool's own); the
    binding's pinned arguments left out (tools_app.grants)."""
    metadata = dict(tool.metadata or {})
    schema = listed_input_schema(tool.input_schema or {}, pinned)
    spec = TOOL_TYPES.get(tool.type)
    pageable = spec is not None and spec.pageable
    parameter_names, parameter_descriptions = _parameter_texts(schema)
    tags = tuple(str(t) for t in (metadata.get("tags") or []))
    server = str(metadata.get("mcp_server") or "")
    fields = {
        "name": f"{name} {tool.alias}" if tool.alias else name,
        "category": tool.category,
        "tags": " ".join(tags),
        "server": server,
        "parameters": " ".join(parameter_names),
        "description": description or "",
        "parameter descriptions": " ".join(parameter_descriptions),
    }
    return ToolDoc(
        position=position,
        name=name,
        description=description or "",
        tool_id=tool.pk,
        type=tool.type,
        alias=tool.alias or "",
        category=tool.category,
        tags=tags,
        input_schema=paged_input_schema(schema) if pageable else schema,
        output_schema=paged_output_schema(tool.output_schema) if pageable else tool.output_schema,
        metadata=metadata,
        mcp_server=server,
        fields=fields,
        pinned=dict(pinned or {}),
    )


@dataclass
class Hit:
    doc: ToolDoc
    score: float
    match_reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool_name": self.doc.name,
            "tool_id": self.doc.tool_id,
            "description": self.doc.description,
            "score": round(self.score, 4),
            "match_reason": self.match_reason,
        }


class Index:
    """The searchable snapshot of a scope's catalogue."""

    def __init__(self, docs: Iterable[ToolDoc]):
        self.docs: list[ToolDoc] = list(docs)
        self.by_name: dict[str, list[ToolDoc]] = {}
        for doc in self.docs:
            self.by_name.setdefault(doc.name.lower(), []).append(doc)
        self.categories: Counter[str] = Counter(doc.category for doc in self.docs)
        self._build_bm25()
        self._field_sets: dict[int, dict[str, frozenset[str]]] = {}  # filled lazily, for match reasons
        self.rendered: dict[int, str] = {}  # guide sections by position, filled lazily (guide.py)
        self._utf8: tuple[list[list[tuple[str, bytes]]], list[bytes]] | None = None  # for regex, filled lazily
        self._vectors: Any = None
        self._vectors_lock = threading.Lock()

    # BM25F: per document, weighted term frequencies over all fields; postings hold each
    # (document, term) contribution without idf, which multiplies in at query time.
    def _build_bm25(self) -> None:
        doc_terms: list[dict[str, float]] = []
        lengths: list[float] = []
        for doc in self.docs:
            weighted: dict[str, float] = {}
            for name, text in doc.fields.items():
                if text:
                    weight = FIELD_WEIGHTS[name]
                    for word, count in Counter(terms(text)).items():
                        weighted[word] = weighted.get(word, 0.0) + weight * count
            doc_terms.append(weighted)
            lengths.append(sum(weighted.values()))
        count = len(self.docs)
        average = (sum(lengths) / count) if count else 1.0
        positions: dict[str, list[int]] = {}
        parts: dict[str, list[float]] = {}
        k1_plus_1 = K1 + 1
        for position, weighted in enumerate(doc_terms):
            norm = K1 * (1 - B + B * lengths[position] / (average or 1.0))
            for word, tf in weighted.items():
                if word in positions:
                    positions[word].append(position)
                    parts[word].append(tf * k1_plus_1 / (tf + norm))
                else:
                    positions[word] = [position]
                    parts[word] = [tf * k1_plus_1 / (tf + norm)]
        self._positions = positions
        self._parts = parts
        self._idf = {
            word: math.log(1 + (count - len(items) + 0.5) / (len(items) + 0.5)) for word, items in positions.items()
        }
        self._build_name_pairs()

    def _build_name_pairs(self) -> None:
        """BM25 postings of the name's adjacent word pairs (their own lengths and idf)."""
        doc_pairs = [Counter(_pairs(terms(doc.fields["name"]))) for doc in self.docs]
        lengths = [sum(pairs.values()) for pairs in doc_pairs]
        count = len(self.docs)
        average = (sum(lengths) / count) if count else 1.0
        positions: dict[str, list[int]] = {}
        parts: dict[str, list[float]] = {}
        for position, pairs in enumerate(doc_pairs):
            norm = K1 * (1 - B + B * lengths[position] / (average or 1.0))
            for pair, tf in pairs.items():
                positions.setdefault(pair, []).append(position)
                parts.setdefault(pair, []).append(tf * (K1 + 1) / (tf + norm))
        self._pair_positions = positions
        self._pair_parts = parts
        self._pair_idf = {
            pair: math.log(1 + (count - len(items) + 0.5) / (len(items) + 0.5)) for pair, items in positions.items()
        }

    def find(self, name: str) -> ToolDoc | None:
        """The tool called `name`: exact spelling first, then ignoring case (names are unique that way)."""
        candidates = self.by_name.get((name or "").lower(), [])
        for doc in candidates:
            if doc.name == name:
                return doc
        return candidates[0] if candidates else None

    #
    # Methods
    #

    def _bm25_raw(self, query: str) -> tuple[dict[int, float], list[str], float]:
        """Raw scores by position, the query's known terms, and the best score they could reach."""
        query_terms = terms(query)
        known = [word for word in dict.fromkeys(query_terms) if word in self._positions]
        scores: dict[int, float] = {}
        get = scores.get
        for word in known:
            idf = self._idf[word]
            for position, part in zip(self._positions[word], self._parts[word], strict=True):
                scores[position] = get(position, 0.0) + idf * part
        best = sum(self._idf[word] for word in known)
        if NAME_PAIR_WEIGHT:
            pairs = [pair for pair in dict.fromkeys(_pairs(query_terms)) if pair in self._pair_positions]
            for pair in pairs:
                weight = NAME_PAIR_WEIGHT * self._pair_idf[pair]
                for position, part in zip(self._pair_positions[pair], self._pair_parts[pair], strict=True):
                    scores[position] = get(position, 0.0) + weight * part
                best += weight
        return scores, known, best * (K1 + 1)

    def bm25_scores(self, query: str) -> tuple[dict[int, float], list[str]]:
        """Normalised (0–1) scores by position, and the query's known terms."""
        scores, known, best = self._bm25_raw(query)
        return {position: min(score / best, 1.0) for position, score in scores.items()}, known

    def _bm25_reason(self, position: int, known: list[str], shown: dict[str, str]) -> str:
        # Computed for the few results only, so the index keeps no per-field term sets.
        per_field = self._field_sets.get(position)
        if per_field is None:
            fields = self.docs[position].fields
            per_field = self._field_sets[position] = {name: frozenset(terms(fields[name])) for name in FIELD_WEIGHTS}
        found: dict[str, list[str]] = {}
        for word in known:
            for name in FIELD_WEIGHTS:
                if word in per_field[name]:
                    found.setdefault(name, []).append(shown.get(word, word))
                    break
        parts = [f"{', '.join(_distinct(words))} in {name}" for name, words in found.items()]
        return "keywords: " + "; ".join(parts)

    def _top(self, scores: dict[int, float], count: int) -> list[int]:
        """The `count` best positions; ties broken by name (a margin by score alone, then the few fully)."""
        docs = self.docs
        candidates = heapq.nlargest(count * 2, scores.items(), key=itemgetter(1))
        return [p for p, _score in sorted(candidates, key=lambda item: (-item[1], docs[item[0]].name))[:count]]

    def request_parts(self, query: str, best: float) -> list[str]:
        """The parts of a request for several tools (see _PART_SPLIT): none for a request for one tool."""
        if not MULTI_LEAD or best <= 0:
            return []
        weighed = []
        for number, part in enumerate(_PART_SPLIT.split(query)):
            known = {word for word in terms(part or "") if word in self._idf}
            weight = sum(self._idf[word] for word in known) * (K1 + 1)
            if len(known) >= MULTI_PART_TERMS and MULTI_PART_SHARE * best <= weight < 0.999 * best:
                weighed.append((weight, number, part.strip()))
        if len(weighed) < 2:
            return []
        heaviest = heapq.nlargest(SEARCH_MAX_SCORED_PARTS, weighed)
        return [part for _weight, _number, part in sorted(heaviest, key=itemgetter(1))]

    def ranked(self, query: str, limit: int) -> tuple[list[int], dict[int, float], list[str], float, dict[int, str]]:
        """bm25 order of positions for the query, its raw scores, known terms and best score, and for positions
        placed by a part of a multi-part request that part."""
        scores, known, best = self._bm25_raw(query)
        order = self._top(scores, limit)
        placed: dict[int, str] = {}
        if len(order) > MULTI_LEAD:
            whole = {p: s / best for p, s in scores.items()}
            order, placed = self._place_parts(query, best, whole, order, limit)
        return order, scores, known, best, placed

    def _place_parts(
        self, query: str, best: float, whole: Any, order: list[int], limit: int
    ) -> tuple[list[int], dict[int, str]]:
        """`order` (the whole request's ranking, `whole` its 0-1 scores by position) with each part's best tool
        not yet placed after the first MULTI_LEAD; a part's tools are scored by their bm25 score for the part
        (0-1) plus their score for the whole request, its context."""
        parts = self.request_parts(query, best)
        if not parts:
            return order, {}
        out = order[:MULTI_LEAD]
        placed: dict[int, str] = {}
        for part in parts:
            part_scores, _part_known, part_best = self._bm25_raw(part)
            context = {p: s / part_best + float(whole[p]) for p, s in part_scores.items()}
            pick = next((p for p in self._top(context, MULTI_LEAD + len(parts)) if p not in out), None)
            if pick is not None and len(out) < limit:
                out.append(pick)
                placed[pick] = part
        out.extend(p for p in order if p not in out)
        return out[:limit], placed

    def bm25(self, query: str, limit: int) -> list[Hit]:
        order, scores, known, best, placed = self.ranked(query, limit)
        docs = self.docs
        shown = query_words(query)
        hits = []
        for p in order:
            reason = self._bm25_reason(p, known, shown)
            if p in placed:
                reason += f'; best for the part "{_excerpt(placed[p])}"'
            hits.append(Hit(docs[p], min(scores.get(p, 0.0) / best, 1.0), reason))
        return hits

    def _regex_texts(self) -> tuple[list[list[tuple[str, bytes]]], list[bytes]]:
        """Per document its non-empty fields, and its name, as UTF-8: RE2 matches bytes without converting
        offsets back to characters (a third faster). Built on the first regex search (bm25 never needs them);
        two threads building them at once build the same lists."""
        if self._utf8 is None:
            self._utf8 = (
                [[(name, text.encode()) for name, text in doc.fields.items() if text] for doc in self.docs],
                [doc.name.encode() for doc in self.docs],
            )
        return self._utf8

    def regex(self, query: str, limit: int) -> list[Hit]:
        pattern = compile_regex(query)
        texts, names = self._regex_texts()
        hits = []
        deadline = time.monotonic() + REGEX_TIME_BUDGET
        for doc in self.docs:
            if time.monotonic() > deadline:
                raise ToolError(
                    ErrorCode.INVALID_QUERY,
                    f"The pattern {query!r} is too costly to match against {len(self.docs)} tools (stopped after "
                    f"{REGEX_TIME_BUDGET:g} s); use smaller repetition counts or a more specific pattern.",
                )
            charge(len(texts[doc.position]) + 1)  # the call's budget: CPU time and work
            matched = [name for name, text in texts[doc.position] if pattern.search(text)]
            if not matched:
                continue
            best = max(REGEX_WEIGHTS[name] for name in matched)
            if pattern.fullmatch(names[doc.position]):
                score = 1.0
            else:
                score = min(best + 0.05 * (len(matched) - 1), 0.99)
            hits.append(Hit(doc, score, f"pattern matched {', '.join(matched)}"))
        hits.sort(key=lambda hit: (-hit.score, hit.doc.name))
        return hits[:limit]

    def embedding_text(self, doc: ToolDoc) -> str:
        parts = [readable_name(doc.name) + ".", doc.description]
        if doc.tags:
            parts.append("Tags: " + ", ".join(doc.tags) + ".")
        if doc.fields["parameters"]:
            parts.append("Parameters: " + ", ".join(readable_name(p) for p in doc.fields["parameters"].split()) + ".")
        # The parameters' descriptions and enum values: on the outside set's tuning split they lift
        # embedding recall@5 from 0.760 to 0.799 (bench/registry/README.md). Past the model's window, cut.
        if doc.fields["parameter descriptions"]:
            parts.append(doc.fields["parameter descriptions"])
        return " ".join(part for part in parts if part)

    def vectors(self) -> Any:
        """Document vectors (computed on first use; raises EmbeddingUnavailable)."""
        if self._vectors is None:
            with self._vectors_lock:
                if self._vectors is None:
                    self._vectors = embedding.embed([self.embedding_text(doc) for doc in self.docs], persist=True)
        return self._vectors

    def request_part(self, query: str) -> str:
        """What of a long query the embedding model reads: its window holds ~QUERY_WINDOW characters, and a
        pasted message (a document, code, data, then the request) would lose the request to a blind cut. The
        sentences are scored by what in them this catalogue knows (the idf of their words that occur in some
        tool) and by request cues (a question, "please", "can you", an imperative first word); the best ones
        (within REQUEST_SHARE of the top score) are kept, in their order, while they fit. bm25 always reads the
        whole query."""
        if len(query) <= QUERY_WINDOW:
            return query
        sentences = [part.strip() for part in _SENTENCE_END.split(query) if part.strip()]
        scored = []
        for number, sentence in enumerate(sentences):
            words = terms(sentence[: QUERY_WINDOW * 2])
            known = {word for word in words if word in self._idf}
            catalogue = sum(self._idf[word] for word in known) / math.sqrt(len(words) + 1)
            lowered = sentence.lower()
            cue = 1.0 if sentence.endswith("?") or lowered.startswith(_REQUEST_CUES) else 0.0
            edge = 0.5 if number in (0, len(sentences) - 1) else 0.0
            scored.append((catalogue + cue + edge, number, sentence))
        kept: list[tuple[int, str]] = []
        used = 0
        ranked = sorted(scored, key=lambda item: (-item[0], item[1]))
        for score, number, sentence in ranked:
            if kept and score < REQUEST_SHARE * ranked[0][0]:
                break  # the rest would dilute the request: a vector is the mean of what it reads
            if used + len(sentence) > QUERY_WINDOW:
                if not kept:  # one long sentence: its start
                    kept.append((number, sentence[:QUERY_WINDOW]))
                continue
            kept.append((number, sentence))
            used += len(sentence) + 1
        return " ".join(sentence for _number, sentence in sorted(kept))

    def embedding_scores(self, query: str) -> Any:
        vectors = self.vectors()
        if not self.docs:
            return vectors[:0, 0]
        query_vector = embedding.embed([self.request_part(query)])[0]
        return (vectors @ query_vector).clip(0.0, 1.0)

    def embedding(self, query: str, limit: int) -> list[Hit]:
        scores = self.embedding_scores(query)
        order = sorted(range(len(self.docs)), key=lambda p: (-float(scores[p]), self.docs[p].name))[:limit]
        return [
            Hit(self.docs[p], float(scores[p]), f"semantic similarity {float(scores[p]):.2f}")
            for p in order
            if scores[p] > 0
        ]

    def hybrid(self, query: str, limit: int) -> list[Hit]:
        semantic = self.embedding_scores(query)
        scores, known, best = self._bm25_raw(query)
        keyword = {position: min(score / best, 1.0) for position, score in scores.items()}
        combined = [
            (p, HYBRID_WEIGHT * keyword.get(p, 0.0) + (1 - HYBRID_WEIGHT) * float(semantic[p]))
            for p in range(len(self.docs))
        ]
        combined.sort(key=lambda item: (-item[1], self.docs[item[0]].name))
        ranking = [p for p, score in combined[:limit] if score > 0]
        total = dict(combined)
        placed: dict[int, str] = {}
        if len(ranking) > MULTI_LEAD:
            # A multi-part request: each part's tools by bm25 on the part, in the context of the hybrid score.
            ranking, placed = self._place_parts(query, best, total, ranking, limit)
        hits = []
        shown = query_words(query)
        for position in ranking:
            reason = f"semantic similarity {float(semantic[position]):.2f}"
            if position in keyword:
                reason += "; " + self._bm25_reason(position, known, shown)
            if position in placed:
                reason += f'; best for the part "{_excerpt(placed[position])}"'
            hits.append(Hit(self.docs[position], total[position], reason))
        return hits

    def search(self, query: str, method: str, limit: int) -> list[Hit]:
        if method in ("embedding", "hybrid"):
            embedding.require(method)
        return getattr(self, method)(query, limit)


def _excerpt(text: str, size: int = 60) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


def _pairs(words: list[str]) -> list[str]:
    """Adjacent words as one term ("time zone"): a space never occurs inside a term."""
    return [f"{first} {second}" for first, second in zip(words, words[1:], strict=False)]


def query_words(query: str) -> dict[str, str]:
    """Each index term of the query -> what the caller typed (reasons show words, not stems). A CJK term
    is shown as itself: the run it comes from is often the whole query, of which only the term matched."""
    shown: dict[str, str] = {}
    for word in re.findall(r"[^\W_]+", query):
        for term in terms(word):
            shown.setdefault(term, term if is_cjk(term) else word.lower())
    return shown


def _distinct(words: list[str]) -> list[str]:
    """Each word once, in order (one typed word can give several terms), leaving out a CJK character
    that a matched bigram shown beside it already contains."""
    unique = list(dict.fromkeys(words))
    return [
        word for word in unique if not (len(word) == 1 and is_cjk(word) and any(word in o for o in unique if o != word))
    ]


def compile_regex(query: str) -> Any:
    """A case-insensitive pattern with Python's re syntax, matched in linear time (patterns.py), or
    ToolError(INVALID_QUERY) saying what is wrong with it."""
    if len(query) > SEARCH_MAX_REGEX_CHARS:
        raise ToolError(
            ErrorCode.INVALID_QUERY,
            f"A regex search pattern has at most {SEARCH_MAX_REGEX_CHARS} characters (got {len(query)}).",
        )
    try:
        return compile_pattern(query)
    except re.error as exc:
        raise ToolError(
            ErrorCode.INVALID_QUERY, f"The pattern {query!r} is not a valid regular expression: {exc}."
        ) from exc
    except PatternError as exc:
        raise ToolError(ErrorCode.INVALID_QUERY, exc.message_for(query)) from exc


def validate_method(method: str) -> str:
    if method not in METHODS:
        raise ToolError(
            ErrorCode.INVALID_SEARCH_METHOD,
            f"Unknown search method {method!r}; use one of: {', '.join(METHODS)}.",
            {"methods": list(METHODS)},
        )
    return method


#
# Per-process cache of indexes, keyed by scope fingerprint
#


class IndexCache:
    """Search indexes by registry-scope fingerprint (tools_app.kernel.caches)."""

    def __init__(self, capacity: int = 64) -> None:
        self._store: LruCache[tuple, Index] = LruCache("search-indexes", capacity=capacity)
        self.builds = 0

    def get(self, scope: Any) -> Index:
        # Fingerprint first, entries second: the snapshot is never older than the key it is stored under.
        key = scope.fingerprint()
        index = self._store.get(key)
        if index is None:
            index = build_index(scope.entries())
            self.builds += 1
            self._store.put(key, index)
        return index

    def clear(self) -> None:
        self._store.clear()
        self.builds = 0


def build_index(entries: Iterable[Any]) -> Index:
    """An index over CatalogEntry-like objects (name, description, tool)."""
    return Index(
        make_doc(i, entry.name, entry.description, entry.tool, getattr(entry, "pinned", None))
        for i, entry in enumerate(entries)
    )


index_cache = IndexCache()


def get_index(scope: Any) -> Index:
    """The scope's current index (rebuilt when any tool or binding in it changed, on any worker)."""
    return index_cache.get(scope)


def deep_copy(value: Any) -> Any:
    """Callers get their own copy of shared snapshot data."""
    return copy.deepcopy(value)
