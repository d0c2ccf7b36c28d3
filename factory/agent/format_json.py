"""The JSON syntax of the agent's step outputs (prompt versions ``knowtrace-json-*``).

The same content as the text syntax (``factory.agent.format``), one JSON object per reply, so a
server can constrain it with the JSON schema it accepts in ``response_format``::

    explore  {"thought": "...", "sufficient": false, "look_up": [{"entity": "...", "relation": "..."}]}
             {"thought": "...", "sufficient": true, "answer": "..."}
    complete {"triplets": [{"subject": "...", "relation": "...", "object": "..."}]}   ([] = none found)
    final    {"thought": "...", "answer": "..."}

Renderer, parser, JSON schema and grammar of each kind are defined here together, from the field
bounds of ``factory.agent.fields``. The grammar is the canonical rendering (``json.dumps`` with its
default separators, keys in this order); the schema admits any JSON layout of the same content.
The parser reads the first JSON object of the reply (code fences and trailing text are ignored),
accepts key variants (case, spaces, ``lookup``/``pairs``) and items written as ``"e | r"`` strings or
lists, and refuses chatter in a field as the text parser does. OpenAI's strict mode wants an object
at the schema's root, which the explore schema (two alternatives) is not: against OpenAI itself send
it without ``strict`` (what this module does) or use another field.
"""

from __future__ import annotations

import json
import re
from typing import Any

from factory.agent.fields import (
    ANSWER_CHARS,
    ENTITY_CHARS,
    MAX_TRIPLETS,
    NAME_EXCLUDE,
    PART_CHARS,
    QUALIFIER_CHARS,
    RELATION_CHARS,
    RELATION_EXCLUDE,
    THOUGHT_CHARS,
    ExploreOutput,
    FinalOutput,
    ParseError,
    StepFormat,
    Triplets,
    _check_part,
    check_triplet,
)
from factory.agent.format import parse_pair, parse_triplet

_FENCE = re.compile(r"```(?:json)?", re.I)
_ALIASES = {
    "reasoning": "thought",
    "thoughts": "thought",
    "lookup": "look_up",
    "look_ups": "look_up",
    "lookups": "look_up",
    "pairs": "look_up",
    "queries": "look_up",
    "final_answer": "answer",
    "enough": "sufficient",
    "facts": "triplets",
    "triples": "triplets",
}


def _dump(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False)


# ---------------------------------------------------------------- render (canonical)


def render_explore(
    thought: str, pairs: list[tuple[str, str]], sufficient: bool = False, answer: str | None = None
) -> str:
    if sufficient:
        return _dump({"thought": thought, "sufficient": True, "answer": answer or ""})
    look_up = [{"entity": e, "relation": r} for e, r in pairs]
    return _dump({"thought": thought, "sufficient": False, "look_up": look_up})


def render_complete(triplets: list[tuple[str, str, str]]) -> str:
    return _dump({"triplets": [{"subject": s, "relation": r, "object": o} for s, r, o in triplets]})


def render_final(thought: str, answer: str) -> str:
    return _dump({"thought": thought, "answer": answer})


# ---------------------------------------------------------------- parse (tolerant)


def _key(name: str) -> str:
    k = re.sub(r"[\s-]+", "_", str(name).strip().lower())
    return _ALIASES.get(k, k)


def _object(text: str) -> dict:
    """The first JSON object of ``text`` with normalised keys."""
    if not text or not text.strip():
        raise ParseError("the output is empty")
    body = _FENCE.sub("", text)
    start = body.find("{")
    if start < 0:
        raise ParseError(f"no JSON object in the reply {text.strip()[:80]!r}")
    try:
        obj, _ = json.JSONDecoder().raw_decode(body[start:])
    except ValueError as exc:
        raise ParseError(f"the reply is not valid JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(obj, dict):
        raise ParseError("the reply is not a JSON object")
    return {_key(k): v for k, v in obj.items()}


def _text(value: Any, field: str) -> str:
    if value is None:
        return ""
    if isinstance(value, (bool, list, dict)):
        raise ParseError(f"'{field}' must be a string")
    return " ".join(str(value).split())  # JSON quotes its strings: quotes inside are content


def _yes_no(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    v = str(value).strip().lower()
    return True if v in ("yes", "true", "y") else False if v in ("no", "false", "n") else None


def _pair(item: Any) -> tuple[str, str]:
    if isinstance(item, str):
        return parse_pair(item)
    if isinstance(item, dict):
        d = {_key(k): v for k, v in item.items()}
        entity, relation = d.get("entity"), d.get("relation")
    elif isinstance(item, list) and len(item) == 2:
        entity, relation = item
    else:
        raise ParseError(f"cannot read an entity-relation pair from {json.dumps(item)[:80]}")
    entity, relation = _text(entity, "entity"), _text(relation, "relation")
    if not entity or not relation:
        raise ParseError("a look_up item needs both 'entity' and 'relation'")
    _check_part(entity, f"{entity} | {relation}", "an entity")
    _check_part(relation, f"{entity} | {relation}", "a relation")
    return entity, relation


def _triplet(item: Any) -> tuple[str, str, str]:
    if isinstance(item, str):
        return parse_triplet(item)
    if isinstance(item, dict):
        d = {_key(k): v for k, v in item.items()}
        parts = [d.get("subject"), d.get("relation"), d.get("object")]
    elif isinstance(item, list) and len(item) == 3:
        parts = list(item)
    else:
        raise ParseError(f"cannot read a triplet from {json.dumps(item)[:80]}")
    s, r, o = (_text(p, name) for p, name in zip(parts, ("subject", "relation", "object")))
    if not (s and r and o):
        raise ParseError("a triplet needs 'subject', 'relation' and 'object'")
    check_triplet(s, r, o, json.dumps({"subject": s, "relation": r, "object": o}, ensure_ascii=False))
    return s, r, o


def parse_explore(text: str, max_pairs: int | None = None) -> ExploreOutput:
    obj = _object(text)
    thought = _text(obj.get("thought", ""), "thought")
    answer = _text(obj["answer"], "answer") if obj.get("answer") not in (None, "") else None
    sufficient = _yes_no(obj["sufficient"]) if "sufficient" in obj else None
    if sufficient is None:
        sufficient = answer is not None and not obj.get("look_up")
    if sufficient:
        if not answer:
            raise ParseError("'sufficient': true needs an 'answer'")
        return ExploreOutput(thought=thought, sufficient=True, answer=answer)
    items = obj.get("look_up")
    if not isinstance(items, list) or not items:
        raise ParseError("'sufficient': false needs a non-empty 'look_up' list of {entity, relation}")
    pairs: list[tuple[str, str]] = []
    for item in items:
        pair = _pair(item)
        if pair not in pairs:
            pairs.append(pair)
    return ExploreOutput(thought=thought, sufficient=False, pairs=pairs[:max_pairs] if max_pairs else pairs)


def parse_complete(text: str) -> Triplets:
    """Every readable triplet, de-duplicated in order ([] for an empty list); unreadable items are
    skipped (listed in ``rejected`` with their reasons) when at least one was read. A field must be a
    name or a short phrase (``factory.agent.fields.triplet_problem``)."""
    obj = _object(text)
    items = obj.get("triplets")
    if not isinstance(items, list):
        raise ParseError("no 'triplets' list")
    triplets = Triplets.read(items, _triplet)
    if triplets.rejected and not triplets:
        raise ParseError(triplets.rejected[0])
    return triplets


def parse_final(text: str) -> FinalOutput:
    obj = _object(text)
    answer = _text(obj["answer"], "answer") if obj.get("answer") not in (None, "") else ""
    if not answer:
        raise ParseError("no 'answer'")
    return FinalOutput(thought=_text(obj.get("thought", ""), "thought"), answer=answer)


# ---------------------------------------------------------------- schema and grammar


def _string(max_chars: int) -> dict:
    return {"type": "string", "minLength": 1, "maxLength": max_chars}


def _field(exclude: str, max_chars: int, qualifier_chars: int = 0) -> dict:
    """A triplet field's schema: the grammar's field as a ``pattern`` (``NAME_EXCLUDE``: no separator,
    bracket or sentence mark; a name may end with one bracketed qualifier)."""
    chars = f"[^{exclude}\\x00-\\x1f]"
    pattern = f"^[^ {exclude}\\x00-\\x1f]{chars}{{0,{max_chars - 1}}}"
    if qualifier_chars:
        pattern += f"( \\([^ {exclude}\\x00-\\x1f]{chars}{{0,{qualifier_chars - 1}}}\\))?"
    return {"type": "string", "pattern": pattern + "$"}


def _obj(properties: dict) -> dict:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


class JsonFormat(StepFormat, functions=globals()):
    """The JSON syntax: renderer, parser, JSON schema and grammar of each step kind."""

    syntax = "json"

    def json_schema(self, kind: str, max_pairs: int) -> dict:
        thought, answer = _string(THOUGHT_CHARS), _string(ANSWER_CHARS)
        if kind == "explore":
            pair = _obj({"entity": _string(ENTITY_CHARS), "relation": _string(RELATION_CHARS)})
            look_up = {"type": "array", "items": pair, "minItems": 1, "maxItems": max_pairs}
            return {
                "anyOf": [
                    _obj({"thought": thought, "sufficient": {"const": False}, "look_up": look_up}),
                    _obj({"thought": thought, "sufficient": {"const": True}, "answer": answer}),
                ]
            }
        if kind == "complete":
            name = _field(NAME_EXCLUDE, PART_CHARS, QUALIFIER_CHARS)
            relation = _field(RELATION_EXCLUDE, RELATION_CHARS)
            triplet = _obj({"subject": name, "relation": relation, "object": name})
            return _obj({"triplets": {"type": "array", "items": triplet, "maxItems": MAX_TRIPLETS}})
        if kind == "final":
            return _obj({"thought": thought, "answer": answer})
        raise ValueError(f"unknown step kind {kind!r}")

    def grammar(self, kind: str, max_pairs: int):
        """The canonical rendering as a grammar tree (the layout ``render_*`` writes)."""
        from factory.agent import grammar as g

        def items(item, lo: int, hi: int):
            if hi == 0:
                return g.seq("[]")
            rest = g.Rep(g.seq(", ", item), 0, hi - 1)
            one_or_more = g.seq("[", item, rest, "]")
            return one_or_more if lo >= 1 else g.alt("[]", one_or_more)

        thought = g.seq('{"thought": ', g.json_string(THOUGHT_CHARS))
        if kind == "explore":
            pair = g.seq(
                '{"entity": ',
                g.json_string(ENTITY_CHARS),
                ', "relation": ',
                g.json_string(RELATION_CHARS),
                "}",
            )
            return g.seq(
                thought,
                g.alt(
                    g.seq(', "sufficient": false, "look_up": ', items(pair, 1, max_pairs), "}"),
                    g.seq(', "sufficient": true, "answer": ', g.json_string(ANSWER_CHARS), "}"),
                ),
            )
        if kind == "complete":
            name = g.json_name(PART_CHARS, NAME_EXCLUDE, QUALIFIER_CHARS)
            triplet = g.seq(
                '{"subject": ',
                name,
                ', "relation": ',
                g.json_string(RELATION_CHARS, RELATION_EXCLUDE),
                ', "object": ',
                name,
                "}",
            )
            return g.seq('{"triplets": ', items(triplet, 0, MAX_TRIPLETS), "}")
        if kind == "final":
            return g.seq(thought, ', "answer": ', g.json_string(ANSWER_CHARS), "}")
        raise ValueError(f"unknown step kind {kind!r}")


JSON = JsonFormat()
