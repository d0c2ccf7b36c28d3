"""Text normalisation shared by metrics, splits, entity linking and grounding; passage text from sentences.

``normalize_answer`` is the official SQuAD / HotpotQA normalisation: lower case, strip punctuation,
drop the articles a/an/the, collapse whitespace.
"""

from __future__ import annotations

import re
import string
import unicodedata

_PUNCT_BYTES = string.punctuation.encode()
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ARTICLE_WORDS = frozenset(("a", "an", "the"))
_TOKEN = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset("a an the of in on at to for from by with and or is was are were be been 's s".split())


def normalize_answer(text: str) -> str:
    """Official SQuAD/HotpotQA answer normalisation (same output as the official regex code, faster)."""
    text = (text or "").lower()
    # ASCII punctuation deleted from the UTF-8 bytes: multi-byte characters hold no ASCII bytes,
    # so this equals str.translate, several times faster
    text = (
        text.encode("utf-8", "surrogatepass").translate(None, _PUNCT_BYTES).decode("utf-8", "surrogatepass")
    )
    if text.isascii() and text.isprintable():
        # letters, digits and spaces only: the articles are exactly the space-separated tokens a/an/the
        return " ".join([token for token in text.split() if token not in _ARTICLE_WORDS])
    return " ".join(_ARTICLES.sub(" ", text).split())


def normalize_question(text: str) -> str:
    """Key for duplicate questions: answer normalisation plus Unicode folding."""
    return normalize_answer(unicodedata.normalize("NFKC", text or ""))


def content_tokens(text: str) -> list[str]:
    """Lower-cased word tokens without stop words (for overlap scores)."""
    folded = unicodedata.normalize("NFKD", (text or "").lower())
    folded = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return [t for t in _TOKEN.findall(folded) if t not in _STOP]


def join_sentences(sentences: list[str]) -> str:
    """HotpotQA sentences keep their leading space; 2Wiki's do not. Join both into readable text."""
    parts: list[str] = []
    for s in sentences:
        if parts and s and not s[0].isspace():
            parts.append(" ")
        parts.append(s)
    return "".join(parts).strip()
