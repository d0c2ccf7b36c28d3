"""What kind of name an entity name is: specific enough to link by a token subset, or not.

Real LLM-made graphs hold names of every kind: proper names ("Signmark"), numbers and dates ("8",
"1975", "March 8, 1975"), single letters, abbreviations ("US", "KS") and common words ("film",
"country", "city"). A link by *subset* (containment, or rapidfuzz ``token_set_ratio``, which scores
any token subset as 100) is only safe from a name that carries a *strong* token: a token of at least
three characters with a letter that is neither a stop word nor a common word. Otherwise "8" links to
"march 8 1975", "1975" to every date of that year, "b" to "b movie", "film" to "red film series" and
"city" to "mexico city" — links that invent paths. Exact matches are never affected.

The common words are generic English nouns and adjectives that name a kind of thing rather than a
thing (the vocabulary below, one list for every rule). Nationality adjectives and place names are
not in it: "american" or "dutch" name something specific.

``is_generic_surface`` is the case signal of raw (un-normalised) text: a name written entirely in
lower case with only common words is a common noun phrase ("the city", "song"), not a name.
"""

from __future__ import annotations

STOP_WORDS = frozenset("a an the of in on at to for from by with and or is was are were be been s".split())

COMMON_WORDS = frozenset(
    """
    person people man men woman women child children boy girl family member members name names
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
    """A token that can carry a link by subset: >= 3 characters, a letter, neither stop nor common word."""
    return (
        len(token) >= 3
        and token not in STOP_WORDS
        and token not in COMMON_WORDS
        and any(c.isalpha() for c in token)
    )


def strong_tokens(name: str) -> list[str]:
    """The strong tokens of a normalised name, in order."""
    return [t for t in name.split() if is_strong_token(t)]


def is_generic_surface(raw: str) -> bool:
    """Raw text that is a common noun phrase: no upper-case letter, no digit, only stop/common words
    ("song", "the city", "people"); pronouns included."""
    text = raw or ""
    if any(c.isupper() or c.isdigit() for c in text):
        return False
    words = ["".join(c for c in w if c.isalnum()) for w in text.lower().split()]
    words = [w for w in words if w]
    return bool(words) and all(w in STOP_WORDS or w in COMMON_WORDS for w in words)


def is_title_case_surface(raw: str) -> bool:
    """Raw text written as a proper name of several words: every word that is not a stop word starts
    with a capital ("Lake District", "United States", "Highway Patrol"). Such a name is specific
    even when all its words are common ones; a single capitalised word says nothing (triplet
    subjects start with a capital: "Coffee plants", "Film")."""
    words = [w for w in (raw or "").split() if any(c.isalnum() for c in w)]
    content = [w for w in words if w.lower().strip(".,;:'\"()") not in STOP_WORDS]
    return len(words) >= 2 and bool(content) and all(w.lstrip("\"'(“‘")[:1].isupper() for w in content)
