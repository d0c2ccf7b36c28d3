"""reports/relevance.md from the result of ``factory.relevance.check.check_relevance`` (its figures:
factory.relevance.figures)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from factory.relevance.grounded import ANSWER_ENTITY, AUTHORS, KEEP_ALL, RANDOM

CONTROLS = (AUTHORS, ANSWER_ENTITY, RANDOM, KEEP_ALL)
log = logging.getLogger(__name__)
LABELS = {
    KEEP_ALL: "keep all",
    ANSWER_ENTITY: "answer-entity only",
    RANDOM: "random at matched size",
    AUTHORS: "KnowTrace authors' rule",
}


def method_label(method: str) -> str:
    return f"S_q {method[3:]}" if method.startswith("sq/") else LABELS.get(method, method)


def _v(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _vci(cell: Mapping) -> str:
    lo, hi = cell["ci"]
    return _v(cell["value"]) + ("" if lo is None else f" [{lo:.2f}, {hi:.2f}]")


def _level_table(level: Mapping, extras: Mapping | None, methods: list[str]) -> list[str]:
    """P/R/F1 per method; with ``extras`` (paragraph level) also support recall, ungrounded rate, no-path
    share."""
    head = "| method | micro P | micro R | micro F1 | macro P | macro R | macro F1 | kept triplets |"
    if extras is not None:
        head += " supp. para. recall (micro / macro) | ungrounded | no path |"
    out = [head, "|" + " --- |" * (head.count("|") - 1)]
    for m in methods:
        s = level["methods"][m]
        row = f"| {method_label(m)} | " + " | ".join(
            _vci(s[scope][k]) for scope in ("micro", "macro") for k in ("precision", "recall", "f1")
        )
        row += f" | {s['kept']:.1f} |"
        if extras is not None:
            x = extras[m]
            no_path = x.get("no_path_share")
            row += (
                f" {_v(x['support_recall_micro'])} / {_v(x['support_recall_macro'])} | "
                f"{_v(x['ungrounded_rate'])} |"
                f" {'' if no_path is None else _v(no_path)} |"
            )
        out.append(row)
    return out


def _ordered_methods(result: Mapping) -> list[str]:
    default = result["default_method"]
    return [default] + [m for m in result["methods"] if m.startswith("sq/") and m != default] + list(CONTROLS)


def render_markdown(result: Mapping) -> str:
    """The relevance report: counts, verdicts, tables per dataset and level, breakdowns."""
    lines = ["# Backtraced relevance labels vs gold supporting facts", ""]
    counts = result.get("counts", {})
    if result.get("status") != "ok":
        why = {
            "no_trajectories": "No trajectories were found (data/trajectories/*/seed_*/round_*.parquet "
            "are missing or empty).",
            "no_labels": "Trajectories exist but none has backtrace labels (run `factory backtrace`).",
            "no_correct_trajectories": "No correct, labelled trajectory was found: nothing to score.",
        }
        lines += [
            why.get(result.get("status"), f"Status: {result.get('status')}."),
            "",
            f"Counts: {dict(counts)}",
            "",
        ]
        return "\n".join(lines)
    p = result["params"]
    default = result["default_method"]
    lines += [
        f"Sources: {', '.join(result['sources'])}.",
        (
            f"Trajectories {counts['trajectories']}, correct {counts['correct']}, identical duplicates "
            f"dropped {counts['duplicates_dropped']}, "
            f"without complete labels {counts['missing_labels']}, scored {counts['evaluated']} "
            f"({counts['by_dataset']}); "
            f"{counts['triplets']} triplets, ungrounded rate {_v(counts['ungrounded_rate_all_triplets'])}."
        ),
        "",
        (
            "Only correct trajectories are scored (they are what gets trained on). Default S_q: "
            f"`{default[3:]}`. "
            "Gold relevance: a triplet is relevant when the passage (sentence) it grounds to (lexical "
            "grounding, relation-blind: subject and object tokens only; threshold "
            f"{p['threshold']}) is a gold "
            "supporting paragraph (fact); MuSiQue has paragraph-level support only. Micro = over "
            "triplets, macro = mean over "
            f"trajectories; 95% percentile bootstrap CIs over trajectories ({p['bootstrap_samples']} "
            f"resamples, seed {p['seed']}). "
            "Random control: |S_q| triplets drawn uniformly per trajectory, mean over "
            f"{p['random_seeds']} seeds. "
            "KnowTrace authors' rule: the published method's backtracing on the same trajectory (each "
            "completion's first triplet only, raw names, entities found as substrings of the first lookup "
            "and of the final thought and answer; `factory/backtrace/authors_rule.py`). "
            "'Beyond the CI' = the 95% CI of the paired bootstrap difference S_q - control (micro F1) "
            "excludes 0."
        ),
        "",
        "## Verdicts",
        "",
    ]
    lines += [f"- {v['line']}" for v in result["verdicts"].values()] + [""]
    lines += [
        "![Paragraph-level micro precision, recall and F1 of S_q and the controls per dataset, 95% CIs]"
        "(relevance.png)",
        "",
    ]
    methods = _ordered_methods(result)
    groups = result["groups"]
    for name in ["all"] + sorted(g for g in groups if g.startswith("dataset=") and "/" not in g):
        group = groups[name]
        lines += [f"## {name} ({group['trajectories']} trajectories)", ""]
        for level, table in group["levels"].items():
            lines += [f"### {level} level ({table['trajectories']} trajectories)", ""]
            lines += _level_table(table, group["extras"] if level == "paragraph" else None, methods) + [""]
    lines += [
        "## Breakdown by question type, route and source (paragraph level, micro F1)",
        "",
        "| group | trajectories | "
        + " | ".join(method_label(m) for m in [default, *CONTROLS])
        + " | S_q - answer-entity | S_q - authors' rule |",
        "| --- | --- |" + " --- |" * (len(CONTROLS) + 3),
    ]
    for name, group in groups.items():
        if name == "all" or (name.startswith("dataset=") and "/" not in name):
            continue
        para = group["levels"]["paragraph"]
        cells = [_vci(para["methods"][m]["micro"]["f1"]) for m in [default, *CONTROLS]]
        lines.append(
            f"| {name} | {group['trajectories']} | "
            + " | ".join(cells)
            + f" | {_vci(para['sq_minus_control'][ANSWER_ENTITY]['micro_f1'])}"
            + f" | {_vci(para['sq_minus_control'][AUTHORS]['micro_f1'])} |"
        )
    lines.append("")
    return "\n".join(lines)


def log_verdicts(result: Mapping, sources: int, left_out: int, report: Path) -> None:
    """A warning when the check could not run in full (its status), then every verdict line: the
    labels against gold facts, then the causal check's."""
    if result["status"] != "ok":
        log.warning(
            "validate-labels: %s (%d sources, %d left out); wrote %s",
            result["status"],
            sources,
            left_out,
            report,
        )
    for verdict in result["verdicts"].values():
        log.info("%s", verdict["line"])
    for verdict in result["causal"].get("verdicts", {}).values():
        log.info("causal check: %s", verdict["line"])
