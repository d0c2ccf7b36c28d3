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

from factory.relevance.grounded import ANSWER_ENTITY, AUTHORS, ENTAILED, KEEP_ALL, RANDOM

DEFINITIONS = {"paragraph": "lexical (relation-blind)", ENTAILED: "review: gold paragraph AND entailed"}
RELATION_BLIND = (
    "Lexical grounding is relation-blind: it attributes a triplet to the passage in which its subject's and "
    "object's tokens occur and never reads the relation, so `(Scott Derrickson ; married to ; 1966)` "
    "grounds in Scott Derrickson's passage with score 1.0."
)


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
            controls = {
                m: (_micro(group, level, m) or {}).get("f1")
                for m in (AUTHORS, ANSWER_ENTITY, RANDOM, KEEP_ALL)
            }
            row[level] = {"sq": sq, "controls_f1": controls}
        if ENTAILED in row:
            p, r = row[ENTAILED]["sq"]["precision"], row[ENTAILED]["sq"]["recall"]
            # None: precision or recall undefined (nothing kept, or nothing relevant), so no verdict
            row["review_reaches_bar"] = None if p is None or r is None else (p >= bar and r >= bar)
        by_group[name] = row
    out["by_definition"] = by_group
    return out


def _v(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def render_entailment_markdown(result: Mapping) -> str:
    """The report section on the two definitions and the judge."""
    e = result.get("entailment") or {}
    lines = ["", "## Gold relevance with entailment-checked grounding", "", RELATION_BLIND, ""]
    if e.get("judge") != "llm":
        lines += [
            "Judge: `lexical` (`grounding.judge`). The review's definition (the grounding passage is a gold "
            "supporting paragraph *and* the passage entails the triplet) needs the entailment judge "
            "(`grounding.judge: llm`); it was not measured in this run.",
            "",
        ]
        return "\n".join(lines)
    agree = e.get("agreement_with_lexical", {})
    lines += [
        f"Judge: `{e.get('judge_model')}`, prompt `{e.get('prompt_version')}`: one call per lexically "
        "grounded triplet of the correct trajectories (does its passage state it?).",
        "",
        "| triplets | judged | entailed | not entailed | no verdict | agreement with lexical grounding |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for key, label in (("all", "all grounded"), ("gold_paragraph", "grounded in a gold paragraph")):
        a = agree.get(key) or {}
        lines.append(
            f"| {label} | {a.get('judged', 0)} | {a.get('entailed', 0)} | {a.get('not_entailed', 0)} | "
            f"{a.get('no_verdict', 0)} | {_v(a.get('agreement'))} |"
        )
    lines += [
        "",
        "Agreement = the share of lexically grounded triplets that the judge says their passage states "
        "(over verdicts). A triplet without a verdict is not relevant under the review's definition.",
        "",
    ]
    groups = e.get("by_definition") or {}
    if not groups:
        lines += ["No scores: " + str(result.get("status")) + ".", ""]
        return "\n".join(lines)
    default = result["default_method"][3:]
    lines += [
        f"S_q (`{default}`) and the controls under both definitions (paragraph level, micro):",
        "",
        "| group | definition | S_q P | S_q R | S_q F1 | authors' rule F1 | answer-entity F1 | random F1 "
        "| keep-all F1 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, row in groups.items():
        for level, label in DEFINITIONS.items():
            if level not in row:
                continue
            sq, c = row[level]["sq"], row[level]["controls_f1"]
            lines.append(
                f"| {name} | {label} | {_v(sq['precision'])} | {_v(sq['recall'])} | {_v(sq['f1'])} | "
                f"{_v(c.get(AUTHORS))} | {_v(c[ANSWER_ENTITY])} | {_v(c[RANDOM])} | {_v(c[KEEP_ALL])} |"
            )
    bar = result["params"]["bar"]
    lines.append("")
    for name, row in groups.items():
        if "review_reaches_bar" in row:
            reaches = row["review_reaches_bar"]
            verdict = (
                f"cannot be compared with the {bar:g} bar (one of them is undefined: nothing kept or nothing "
                "relevant)"
                if reaches is None
                else f"{'REACH' if reaches else 'do NOT reach'} the {bar:g} bar"
            )
            lines.append(f"- {name}: under the review's definition S_q precision and recall {verdict}.")
    lines.append("")
    return "\n".join(lines)
