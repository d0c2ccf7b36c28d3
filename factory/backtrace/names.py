"""What kind of name an entity name is: specific enough to link by a token subset, or not.

Real LLM-made graphs hold names of every kind: proper names ("Signmark"), numbers and dates ("8",
"1975", "March 8, 1975"), single letters, abbreviations ("US", "KS") and common words ("film",
"country", "city"). A link by *subset* (containment, or rapidfuzz ``token_set_ratio``, which scores
any token subset as 100) is only safe from a name that carries a *strong* token: a token of at least
three letters (no digit) that is neither a stop word nor a common word. Otherwise "8" links to
"march 8 1975", "1975" to every date of that year, "b" to "b movie", "film" to "red film series" and
"city" to "mexico city" — links that invent paths. Exact matches are never affected.

The common words are generic English nouns and adjectives that name a kind of thing rather than a
thing (the vocabulary below, one list for every rule). Nationality adjectives and place names are
not in it: "american" or "dutch" name something specific.

``is_title_case_surface`` is the case signal of raw (un-normalised) text: a name of several words
written in title case ("Lake District") is a proper name even when its words are common ones.
"""

from __future__ import annotations

STOP_WORDS = frozenset("a an the of in on at to for from by with and or is was are were be been s".split())

COMMON_WORDS = frozenset(
    """
    person people man men woman women child children boy girl family member members name names
    author writer director actor actress singer player president king queen leader founder producer
    artist musician poet owner
    city cities town towns village villages country countries state states county counties district
    districts region regions area areas place places province provinces capital nation nations
    river rivers lake lakes mountain mountains island islands sea ocean coast border north south east
    west northern southern eastern western central upper lower
    film films movie movies song songs album albums single book books novel novels series show shows
    band bands group groups team teams club clubs company companies school schools university college
    church churches party parties government office organization organisation association
    year years day days month months time times date century decade season world part number
    first second third last new old other same own
    award awards game games event events station road street building house home
    law laws court war language languages word words term title type kind
    one two three four five six seven eight nine ten
    it he she they him her his its their them this that these those who which what
    """.split()
)


def is_strong_token(token: str) -> bool:
    """A token that can carry a link by subset: >= 3 letters and nothing else (numbers, years and
    ordinals like "12th" are weak), neither a stop word nor a common word."""
    return len(token) >= 3 and token.isalpha() and token not in STOP_WORDS and token not in COMMON_WORDS


def is_title_case_surface(raw: str) -> bool:
    """Raw text written as a proper name of several words: every word that is not a stop word starts
    with a capital ("Lake District", "United States", "Highway Patrol"). Such a name is specific
    even when all its words are common ones; a single capitalised word says nothing (triplet
    subjects start with a capital: "Coffee plants", "Film")."""
    words = [w for w in (raw or "").split() if any(c.isalnum() for c in w)]
    content = [w for w in words if w.lower().strip(".,;:'\"()") not in STOP_WORDS]
    return len(words) >= 2 and bool(content) and all(w.lstrip("\"'(“‘")[:1].isupper() for w in content)
