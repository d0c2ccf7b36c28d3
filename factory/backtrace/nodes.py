"""Node names of a trajectory's graph: entity names after the SQuAD/HotpotQA normalisation
(``factory.utils.text.normalize_answer``) of the name without its possessives (``normalize_entity``:
"Kent's father" names "kent"), so case, punctuation, article and possessive variants are one node from
the start (a triplet whose two names are such variants is a self-loop that rides with its node:
``factory.backtrace.graph``). On top of that, ``merge_variants`` merges *linked variants* among the
graph's own names: a name that occurs as whole words inside exactly one other (more specific) name is
the same node ("Charles Howard" ~ "Charles Howard, 1st Earl of Carlisle", "Somalia" ~ "Hiran region of
Somalia"), never into a description longer than ``merge_max_words`` words ("casino love and honor in
las vegas"). Fuzzy similarity is NOT used to merge graph nodes: names that differ by one token ("1st
Earl" / "2nd Earl") are often different people, and a merge there invents paths. Linking mentions to
these nodes: ``factory.backtrace.linking``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from factory.backtrace.names import is_strong_token
from factory.params.label_sections import BacktraceParams
from factory.utils.text import normalize_answer

# Plain dict memos (cleared when full): a hit costs a dict lookup, several times cheaper than an
# lru_cache hit, and these run for every entity name of every trajectory. Only speed depends on them.
_MEMO_MAX = 1 << 17
_NORM: dict[str, str] = {}
_KEYS: dict[str, str] = {}
_SPECIFIC: dict[str, bool] = {}


def remember(memo: dict, text, value):
    """Store ``memo[text] = value`` (clearing a full memo first) and return ``value``."""
    if len(memo) >= _MEMO_MAX:
        memo.clear()
    memo[text] = value
    return value


# a possessive "'s" (straight or curly apostrophe) after a word: "Kent's father" names "Kent"
_POSSESSIVE = re.compile(r"(?<=\w)['’]s\b", re.I)


def normalize_entity(text: str) -> str:
    """``normalize_answer``, memoised, for entity names and the text they are found in, after dropping
    possessives: "Michael Douglas's" is a mention of "Michael Douglas" (the SQuAD normalisation would
    make it "michael douglass", and a curly "’s" would stay part of the word)."""
    norm = _NORM.get(text)
    if norm is None:
        norm = remember(_NORM, text, normalize_answer(_POSSESSIVE.sub("", text)))
    return norm


def node_key(text: str) -> str:
    """Node name of an entity: its normalised form; a name that normalises to nothing keeps its
    lower-cased text so that it still forms a node (never silently merged with other empty names)."""
    key = _KEYS.get(text)
    if key is None:
        key = normalize_entity(text)
        key = remember(_KEYS, text, key if key else " ".join(text.lower().split()))
    return key


node_keys = _KEYS.get  # fast path for hot loops: node_keys(text) or node_key(text)


def contains_words(longer: str, shorter: str) -> bool:
    """True when ``shorter`` occurs in ``longer`` as whole words (both normalised)."""
    return bool(shorter) and f" {shorter} " in f" {longer} "


def is_specific(name: str) -> bool:
    """A name specific enough to link by a token subset (containment, fuzzy subset): >= 1 strong token
    (``factory.backtrace.names``: >= 3 characters, a letter, not a stop or common word)."""
    value = _SPECIFIC.get(name)
    if value is None:
        value = remember(_SPECIFIC, name, any(map(is_strong_token, name.split())))
    return value


def _canonical_first(a: str, b: str) -> tuple[str, str]:
    """(root, child): the canonical name of a group is the longest (most specific), then alphabetical."""
    return (a, b) if (-len(a), a) <= (-len(b), b) else (b, a)


def merge_variants(
    names: Iterable[str],
    params: BacktraceParams | None = None,
    distinct: Iterable[tuple[str, str]] = (),
    titles: Iterable[str] = (),
) -> dict[str, str]:
    """Map every normalised name to its node: the canonical (longest) name of its variant group.

    A specific name merges with the names containing it as whole words when, among those, exactly
    one is minimal (contains no other candidate): ``somalia`` joins ``hiran region of somalia``;
    ``american`` inside both ``american football league`` and ``american airlines`` stays alone
    (ambiguous). ``distinct`` lists name pairs that must stay apart — the subject and object of one
    triplet are two entities by that triplet's own statement ("(Lisburn Distillery FC ; nickname ;
    Distillery)" must not become a self-loop); no merge joins two groups holding such a pair. A name
    of more than ``params.merge_max_words`` words is a description, not a name ("casino love and honor in las
    vegas", "vodka so filtered we even took russia out of it"): nothing merges into it (containment
    links may still join it, ``factory.backtrace.graph``), unless it is among ``titles``, the long
    names written in title case somewhere ("What We Talk About When We Talk About Love").
    Without ``params.containment`` nothing merges. ``params``: None = the defaults of
    ``factory.params.label_sections.BacktraceParams``. Deterministic for any input order.
    """
    params = params or BacktraceParams()
    unique = sorted(set(names))
    return _merge(unique, params.containment, distinct, None, params.merge_max_words, frozenset(titles))


def names_inside_others(unique: list[str]) -> list[str]:
    """The names (sorted, unique, normalised) that occur as whole words inside another one."""
    padded = [f" {n} " for n in unique]
    blob = "\x01".join(padded)
    # a name inside another one occurs at least twice in the blob (itself + the other); C-speed filter
    return [n for n, c in zip(unique, map(blob.count, padded)) if c > 1]


def _merge(
    unique: list[str],
    containment: bool,
    distinct: Iterable[tuple[str, str]],
    inside: list[str] | None,
    max_words: int,
    titles: frozenset[str],
) -> dict[str, str]:
    """``merge_variants`` on sorted unique names; ``inside``: ``names_inside_others(unique)`` when the
    caller has it."""
    node = dict(zip(unique, unique))
    if not containment or len(unique) < 2:
        return node
    if inside is None:
        inside = names_inside_others(unique)
    shorts = [n for n in inside if is_specific(n)]
    if not shorts:
        return node
    padded = [f" {n} " for n in unique]
    groups = _Groups(distinct)
    for short in shorts:
        container = _sole_container(short, unique, padded, max_words, titles)
        if container is not None:
            groups.join(container, short)
    return groups.nodes(node)


def _sole_container(
    short: str, unique: list[str], padded: list[str], max_words: int, titles: frozenset[str]
) -> str | None:
    """The one minimal name (containing no other candidate) among the names that contain ``short`` as
    whole words and may take a merge (at most ``max_words`` words, or a title); None when there are
    none or several."""
    needle, size = f" {short} ", len(short)
    cands = [
        n
        for n, p in zip(unique, padded)
        if len(n) > size and needle in p and (n.count(" ") < max_words or n in titles)
    ]
    if len(cands) == 1:
        return cands[0]
    minimal = [
        c for c in cands if not any(o != c and len(o) < len(c) and f" {o} " in f" {c} " for o in cands)
    ]
    return minimal[0] if len(minimal) == 1 else None


class _Groups:
    """Union-find over names whose root is the group's canonical name; a join that would put a
    ``distinct`` pair into one group is refused."""

    def __init__(self, distinct: Iterable[tuple[str, str]]):
        self._distinct = distinct
        self._apart: set[tuple[str, str]] | None = None  # built on the first candidate merge only
        self.members: dict[str, set[str]] = {}
        self.parent: dict[str, str] = {}  # merged names only: child -> parent

    def find(self, x: str) -> str:
        while x in self.parent:
            x = self.parent[x]
        return x

    def join(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self._apart is None:
            self._apart = set(self._distinct)
        apart = self._apart
        group_a, group_b = self.members.get(ra) or {ra}, self.members.get(rb) or {rb}
        if any((x, y) in apart or (y, x) in apart for x in group_a for y in group_b):
            return
        root, child = _canonical_first(ra, rb)
        self.parent[child] = root
        self.members[root] = group_a | group_b

    def nodes(self, node: dict[str, str]) -> dict[str, str]:
        """``node`` (name -> itself) with every merged name mapped to its group's canonical name."""
        for n in self.parent:
            node[n] = self.find(n)
        return node
