"""A tiny grammar language for the agent's output formats, printed as a regex or as llama.cpp GBNF.

The step formats (``factory.agent.format`` for text, ``factory.agent.format_json`` for JSON) build
their grammar from these nodes, next to their renderer and parser. Every format here is a regular
language (bounded lengths, no recursion), so one tree prints as:

- a regex: what llguidance (the local backend's grammar engine) and vLLM's ``structured_outputs``
  ``regex`` take; Python's ``re`` reads it too, which is how the tests check that the renderer's
  outputs are in the grammar;
- GBNF: what llama.cpp's server takes in its ``grammar`` field (one ``root`` rule, ``{m,n}``
  repetition).

A character class is written once in the syntax both share (``^\\n|`` = anything but a newline or
a bar; ``\\x00-\\x1f`` ranges; ``\\\\`` and ``\\"`` escapes).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

_REGEX_META = set("\\.^$|?*+()[]{}")


class Node(ABC):
    """A grammar tree node: each kind prints itself in both notations."""

    @abstractmethod
    def regex(self) -> str: ...

    @abstractmethod
    def gbnf(self) -> str: ...


@dataclass(frozen=True)
class Lit(Node):
    """A literal string."""

    text: str

    def regex(self) -> str:
        out = []
        for ch in self.text:
            if ch == "\n":
                out.append("\\n")
            elif ch == "\t":
                out.append("\\t")
            elif ch in _REGEX_META:
                out.append("\\" + ch)
            else:
                out.append(ch)
        return "".join(out)

    def gbnf(self) -> str:
        body = self.text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
        return f'"{body}"'


@dataclass(frozen=True)
class Chars(Node):
    """``lo`` to ``hi`` characters of the class ``[cls]``."""

    cls: str
    lo: int
    hi: int

    def _count(self) -> str:
        if (self.lo, self.hi) == (1, 1):
            return ""
        return f"{{{self.lo},{self.hi}}}" if self.lo != self.hi else f"{{{self.lo}}}"

    def regex(self) -> str:
        return f"[{self.cls}]{self._count()}"

    def gbnf(self) -> str:
        return f"[{self.cls}]{self._count()}"


@dataclass(frozen=True)
class Seq(Node):
    items: tuple[Node, ...]

    def regex(self) -> str:
        return "".join(_group_regex(i) if isinstance(i, Alt) else i.regex() for i in self.items)

    def gbnf(self) -> str:
        return " ".join(f"({i.gbnf()})" if isinstance(i, Alt) else i.gbnf() for i in self.items)


@dataclass(frozen=True)
class Alt(Node):
    items: tuple[Node, ...]

    def regex(self) -> str:
        return "|".join(i.regex() for i in self.items)

    def gbnf(self) -> str:
        return " | ".join(i.gbnf() for i in self.items)


@dataclass(frozen=True)
class Rep(Node):
    """``lo`` to ``hi`` repetitions of ``item``."""

    item: Node
    lo: int
    hi: int

    def regex(self) -> str:
        return f"{_group_regex(self.item)}{{{self.lo},{self.hi}}}"

    def gbnf(self) -> str:
        return f"({self.item.gbnf()}){{{self.lo},{self.hi}}}"


def _group_regex(node: Node) -> str:
    return f"(?:{node.regex()})"


def seq(*items: Node | str) -> Seq:
    """A sequence; plain strings are literals."""
    return Seq(tuple(Lit(i) if isinstance(i, str) else i for i in items))


def alt(*items: Node | str) -> Alt:
    return Alt(tuple(Lit(i) if isinstance(i, str) else i for i in items))


def text_field(max_chars: int, exclude: str = "") -> Seq:
    """One line of 1..``max_chars`` characters that starts with a non-space (no newline, nothing in
    ``exclude``)."""
    return seq(Chars(f"^\\n {exclude}", 1, 1), Chars(f"^\\n{exclude}", 0, max_chars - 1))


def name_field(max_chars: int, exclude: str, qualifier_chars: int) -> Seq:
    """A name on one line: a ``text_field`` without the characters of ``exclude`` (brackets among them),
    optionally followed by one bracketed qualifier of up to ``qualifier_chars`` characters:
    "Kiss and Tell (1945 film)". Brackets therefore always balance, and nothing nests."""
    qualifier = seq(" (", text_field(qualifier_chars, exclude), ")")
    return seq(text_field(max_chars, exclude), Rep(qualifier, 0, 1))


def json_string(max_chars: int, exclude: str = "") -> Seq:
    """A JSON string literal of 1..``max_chars`` characters (an escape counts as one), without the
    characters of ``exclude``."""
    return seq('"', _json_chars(max_chars, exclude), '"')


def json_name(max_chars: int, exclude: str, qualifier_chars: int) -> Seq:
    """``name_field`` as a JSON string literal."""
    qualifier = seq(" (", _json_chars(qualifier_chars, exclude), ")")
    return seq('"', _json_chars(max_chars, exclude), Rep(qualifier, 0, 1), '"')


def _json_chars(max_chars: int, exclude: str) -> Seq:
    char = alt(Chars(f'^"\\\\\\x00-\\x1f{exclude}', 1, 1), seq(Lit("\\"), Chars('"\\\\/bfnrt', 1, 1)))
    first = alt(Chars(f'^"\\\\\\x00-\\x20{exclude}', 1, 1), seq(Lit("\\"), Chars('"\\\\/bfnrt', 1, 1)))
    return seq(first, Rep(char, 0, max_chars - 1))


def gbnf(root: Node) -> str:
    """The grammar as llama.cpp GBNF: a single ``root`` rule."""
    return f"root ::= {root.gbnf()}\n"
