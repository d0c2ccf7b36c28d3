"""The entailment part of metrics/relevance.json and reports/relevance.md: gold relevance both ways.

Two definitions of a gold-relevant triplet, side by side for S_q (the default mode) and the controls:

- *lexical* (``paragraph`` level of ``factory.relevance.check``): its lexical grounding passage is a gold
  supporting paragraph. Lexical grounding is relation-blind: it finds the subject's and the object's
  tokens in a passage and never reads the relation;
- *review* (``paragraph_entailed``): the grounding passage is a gold supporting paragraph AND the
  entailment judge says the passage states the triplet (the KnowTrace review's definition).

Plus the judge's agreement with lexical grounding (``factory.relevance.entailment.agreement``).
"""

from __future__ import annotations

from collections.abc import Mapping

from factory.relevance.grounded import CONTROLS, ENTAILED
from factory.utils.selection import (
    ANSWER_ENTITY,
    AUTHORS_RULE,
    BACKTRACE,
    RANDOM,
    UNFILTERED,
    backtrace_setting,
)
from factory.utils.templates import fixed, render

DEFINITIONS = {"paragraph": "lexical (relation-blind)", ENTAILED: "review: gold paragraph AND entailed"}


def _micro(group: Mapping, level: str, method: str) -> dict | None:
    table = group.get("levels", {}).get(level)
    if table is None or method not in table["methods"]:
        return None
    micro = table["methods"][method]["micro"]
    return {k: micro[k]["value"] for k in ("precision", "recall", "f1")}


def entailment_result(result: Mapping, summary: Mapping) -> dict:
    """The judge's summary plus, per group (all, each dataset) and definition, micro P/R/F1 of the default
    S_q and micro F1 of the controls; ``reaches_bar`` under the review's definition."""
    out = dict(summary)
    if result.get("status") != "ok":
        return out
    default, bar = result["default_method"], result["params"]["bar"]
    by_group = {}
    for name, group in result["groups"].items():
        if name != "all" and (not name.startswith("dataset=") or "/" in name):
            continue
        row = {}
        for level in DEFINITIONS:
            sq = _micro(group, level, default)
            if sq is None:
                continue
            controls = {m: (_micro(group, level, m) or {}).get("f1") for m in CONTROLS}
            row[level] = {BACKTRACE: sq, "controls_f1": controls}
        if ENTAILED in row:
            p, r = row[ENTAILED][BACKTRACE]["precision"], row[ENTAILED][BACKTRACE]["recall"]
            # None: precision or recall undefined (nothing kept, or nothing relevant), so no verdict
            row["review_reaches_bar"] = None if p is None or r is None else (p >= bar and r >= bar)
        by_group[name] = row
    out["by_definition"] = by_group
    return out


def _agreement(e: Mapping) -> dict:
    """The judge's counts and agreement with lexical grounding, for all grounded triplets and for those
    grounded in a gold paragraph (0 / n/a where not recorded)."""
    agree = e.get("agreement_with_lexical", {})
    out = {}
    for key in ("all", "gold_paragraph"):
        a = agree.get(key) or {}
        out[key] = {k: a.get(k, 0) for k in ("judged", "entailed", "not_entailed", "no_verdict")}
        out[key]["agreement"] = fixed(a.get("agreement"))
    return out


def _scores(groups: Mapping) -> list[dict]:
    """One row per group and definition: S_q's micro P/R/F1 and the controls' micro F1."""
    rows = []
    for name, row in groups.items():
        for level, label in DEFINITIONS.items():
            if level in row:
                sq, c = row[level][BACKTRACE], row[level]["controls_f1"]
                scores = [sq["precision"], sq["recall"], sq["f1"]]
                controls = [c.get(AUTHORS_RULE), c[ANSWER_ENTITY], c[RANDOM], c[UNFILTERED]]
                rows.append(
                    {"group": name, "definition": label, "cells": [fixed(x) for x in scores + controls]}
                )
    return rows


def render_entailment_markdown(result: Mapping) -> str:
    """The report section on the two definitions and the judge (templates/entailment.md.j2)."""
    e = result.get("entailment") or {}
    if e.get("judge") != "llm":
        return render("factory.relevance", "entailment.md.j2", judge=e.get("judge"))
    groups = e.get("by_definition") or {}
    judge = {
        "judge": "llm",
        "judge_model": e.get("judge_model"),
        "prompt_version": e.get("prompt_version"),
        "agreement": _agreement(e),
        "scored": bool(groups),
    }
    if not groups:
        return render("factory.relevance", "entailment.md.j2", **judge, status=result.get("status"))
    return render(
        "factory.relevance",
        "entailment.md.j2",
        **judge,
        sq_name=backtrace_setting(result["default_method"]),
        scores=_scores(groups),
        reaches_bar=[
            (name, row["review_reaches_bar"]) for name, row in groups.items() if "review_reaches_bar" in row
        ],
        bar=f"{result['params']['bar']:g}",
    )
