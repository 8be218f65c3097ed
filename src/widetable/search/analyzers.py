"""TEXT analyzers: text -> tokens, the same function at index time and at query time.

Every analyzer's tokens reach tantivy pre-tokenized (with their positions), so
tantivy never analyzes text itself and no custom tokenizer has to be saved in,
or registered again with, an index.

* ``single_word``: lower-cased; a run of letters and digits (``\\w`` outside the
  Han script) is one token, and each Han character is a token of its own.
* ``split``: the text split at ``delimiter`` (default a space), lower-cased, empty
  pieces dropped.
* ``fuzzy``: every substring of ``min_chars`` to ``max_chars`` characters of the
  lower-cased text, for substring matching (positions are all 0).
* ``min_word``: Chinese word segmentation (jieba's precise mode); ``max_word``:
  the finer search mode, which adds the shorter words inside long ones. Both
  lower-case and drop whitespace and punctuation.
"""

from __future__ import annotations

import re
from functools import lru_cache

import rjieba

from .schema import FUZZY, MAX_WORD, MIN_WORD, SINGLE_WORD, SPLIT

_HAN = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
_SINGLE_WORD = re.compile(rf"[{_HAN}]|[^\W{_HAN}]+")
_WORDLIKE = re.compile(r"\w")


def single_word_pattern() -> re.Pattern:
    """The pattern whose ``findall`` over the lower-cased text gives ``single_word``'s tokens."""
    return _SINGLE_WORD


def analyze(text: str, analyzer: str, params: dict) -> list[str]:
    """The tokens of ``text``, in order (duplicates kept: positions matter for phrases)."""
    if analyzer == SINGLE_WORD:
        return _SINGLE_WORD.findall(text.lower())
    if analyzer == SPLIT:
        return [t for t in text.lower().split(params.get("delimiter", " ")) if t]
    if analyzer == FUZZY:
        return fuzzy_grams(text.lower(), params.get("min_chars", 1), params.get("max_chars", 7))
    if analyzer == MIN_WORD:
        return [t.lower() for t in _cut(text) if _WORDLIKE.search(t)]
    if analyzer == MAX_WORD:
        return [t.lower() for t in _cut_for_search(text) if _WORDLIKE.search(t)]
    raise ValueError(analyzer)


def fuzzy_grams(text: str, lo: int, hi: int) -> list[str]:
    """Every distinct substring of ``text`` of ``lo`` to ``hi`` characters."""
    out: dict[str, None] = {}
    n = len(text)
    for i in range(n):
        for k in range(lo, min(hi, n - i) + 1):
            out[text[i:i + k]] = None
    return list(out)


@lru_cache(maxsize=4096)
def _cut(text: str) -> tuple[str, ...]:
    return tuple(rjieba.cut(text))


@lru_cache(maxsize=4096)
def _cut_for_search(text: str) -> tuple[str, ...]:
    return tuple(rjieba.cut_for_search(text))
