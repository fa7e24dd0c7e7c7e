"""Text normalisation shared by the keyword index and the regex and embedding methods.

Tool names are identifiers (`github.create_pull_request`, `listIssues`, `get-weather`): they are split
on `_ . -` and camelCase so a query for "pull request" finds them (SPEC §5). Words are lower-cased
and reduced by a light suffix stemmer, applied the same way to queries and documents. Runs of CJK
characters (the seeds are Chinese) have no spaces, so they are indexed as characters and bigrams.
"""

import re
from functools import lru_cache

_IDENTIFIER_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_WORD = re.compile(r"[^\W_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")

STOPWORDS = frozenset(
    """a an and any are as at be by can do does for from how i in into is it its me my of on or our
    please should some that the their them then there these this those to up via want was we what when
    where which who will with would you your""".split()
)


def split_identifier(name: str) -> list[str]:
    """`github.createPullRequest` -> ["github", "create", "Pull", "Request"] (case kept)."""
    words: list[str] = []
    for chunk in re.split(r"[\s_.\-/:]+", name):
        if chunk:
            words.extend(_IDENTIFIER_PARTS.findall(chunk) or [chunk])
    return words


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stemmer: create/creates/created/creating all become "creat"."""
    if len(word) <= 3 or not word.isascii():
        return word
    stripped = False
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ing") and len(word) > 5:
        word, stripped = word[:-3], True
    elif word.endswith("ed") and len(word) > 4:
        word, stripped = word[:-2], True
    if stripped and len(word) >= 3 and word[-1] == word[-2] and word[-1] not in "lsz":
        word = word[:-1]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def _cjk_terms(run: str) -> list[str]:
    return list(run) + [run[i : i + 2] for i in range(len(run) - 1)]


def is_cjk(term: str) -> bool:
    """Whether `term` is CJK characters (an index term of a CJK run: a character or a bigram)."""
    return _CJK.fullmatch(term) is not None


def terms(text: str) -> list[str]:
    """Index terms of free text or an identifier: split, lower-cased, stop words dropped, stemmed."""
    result: list[str] = []
    for word in _WORD.findall(text or ""):
        result.extend(word_terms(word))
    return result


@lru_cache(maxsize=200_000)
def word_terms(word: str) -> tuple[str, ...]:
    """The terms of one word (cached: tool catalogues repeat their vocabulary)."""
    if not word.isascii() and _CJK.search(word):
        out: list[str] = []
        for part in re.split(f"({_CJK.pattern})", word):
            if not part:
                continue
            out.extend(_cjk_terms(part) if _CJK.fullmatch(part) else _plain_terms(part))
        return tuple(out)
    return tuple(_plain_terms(word))


def _plain_terms(word: str) -> list[str]:
    parts = split_identifier(word) if not word.islower() else [word]
    out = []
    for part in parts:
        lowered = part.lower()
        if lowered not in STOPWORDS:
            out.append(stem(lowered))
    return out


def readable_name(name: str) -> str:
    """`github.create_pull_request` -> "github create pull request" (for embeddings and reasons)."""
    return " ".join(word.lower() for word in split_identifier(name))
