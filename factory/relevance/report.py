"""reports/relevance.md from the result of ``factory.relevance.check.check_relevance`` (its figures:
factory.relevance.figures): this module picks the rows and formats the numbers, templates/relevance.md.j2
lays them out."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from factory.relevance.grounded import CONTROLS
from factory.utils.selection import ANSWER_ENTITY, AUTHORS_RULE, RANDOM, UNFILTERED, backtrace_setting
from factory.utils.templates import fixed, render

log = logging.getLogger(__name__)
LABELS = {
    UNFILTERED: "unfiltered (keep all)",
    ANSWER_ENTITY: "answer-entity only",
    RANDOM: "random at matched size",
    AUTHORS_RULE: "KnowTrace authors' rule",
}


def method_label(method: str) -> str:
    setting = backtrace_setting(method)
    return f"S_q {setting}" if setting else LABELS.get(method, method)


def _vci(cell: Mapping) -> str:
    lo, hi = cell["ci"]
    return fixed(cell["value"]) + ("" if lo is None else f" [{lo:.2f}, {hi:.2f}]")


def _level_rows(level: Mapping, extras: Mapping | None, methods: list[str]) -> list[dict]:
    """A level's table: per method micro and macro P/R/F1 with CIs and the kept triplets; with ``extras``
    (paragraph level) also support recall, ungrounded rate, no-path share."""
    rows = []
    for m in methods:
        s = level["methods"][m]
        row = {
            "method": method_label(m),
            "scores": [
                _vci(s[scope][k]) for scope in ("micro", "macro") for k in ("precision", "recall", "f1")
            ],
            "kept": f"{s['kept']:.1f}",
        }
        if extras is not None:
            x = extras[m]
            no_path = x.get("no_path_share")
            row |= {
                "support_micro": fixed(x["support_recall_micro"]),
                "support_macro": fixed(x["support_recall_macro"]),
                "ungrounded": fixed(x["ungrounded_rate"]),
                "no_path": "" if no_path is None else fixed(no_path),
            }
        rows.append(row)
    return rows


def _ordered_methods(result: Mapping) -> list[str]:
    default = result["default_method"]
    others = [m for m in result["methods"] if backtrace_setting(m) and m != default]
    return [default, *others, *CONTROLS]


def _is_breakdown(name: str) -> bool:
    """A group of the breakdown table (question type, route, source), not ``all`` or a whole dataset."""
    return name != "all" and not (name.startswith("dataset=") and "/" not in name)


def _groups(result: Mapping) -> list[dict]:
    """All trajectories, then each dataset: its tables per level."""
    methods, groups = _ordered_methods(result), result["groups"]
    out = []
    for name in ["all"] + sorted(g for g in groups if g.startswith("dataset=") and "/" not in g):
        group = groups[name]
        levels = [
            {
                "name": level,
                "trajectories": table["trajectories"],
                "paragraph": level == "paragraph",
                "rows": _level_rows(table, group["extras"] if level == "paragraph" else None, methods),
            }
            for level, table in group["levels"].items()
        ]
        out.append({"name": name, "trajectories": group["trajectories"], "levels": levels})
    return out


def _breakdown(result: Mapping) -> list[dict]:
    """Paragraph-level micro F1 of S_q and the controls, and S_q's differences, per breakdown group."""
    rows = []
    for name, group in result["groups"].items():
        if _is_breakdown(name):
            para = group["levels"]["paragraph"]
            rows.append(
                {
                    "group": name,
                    "trajectories": group["trajectories"],
                    "f1": [
                        _vci(para["methods"][m]["micro"]["f1"]) for m in [result["default_method"], *CONTROLS]
                    ],
                    "minus_answer_entity": _vci(para["backtrace_minus_control"][ANSWER_ENTITY]["micro_f1"]),
                    "minus_authors": _vci(para["backtrace_minus_control"][AUTHORS_RULE]["micro_f1"]),
                }
            )
    return rows


def render_markdown(result: Mapping, calibration: str) -> str:
    """The relevance report (templates/relevance.md.j2): ``calibration`` (the rendered section on real
    graphs) first, then this run's counts, verdicts, tables per dataset and level, breakdowns; or why
    there is nothing to score."""
    status, counts = result.get("status"), result.get("counts", {})
    calibration = calibration.strip()
    if status != "ok":
        values = {"status": status, "counts": dict(counts), "calibration": calibration}
        return render("factory.relevance", "relevance.md.j2", **values)
    return render(
        "factory.relevance",
        "relevance.md.j2",
        calibration=calibration,
        status=status,
        counts=counts,
        ungrounded_rate=fixed(counts["ungrounded_rate_all_triplets"]),
        sources=result["sources"],
        params=result["params"],
        sq_name=backtrace_setting(result["default_method"]),
        verdicts=[v["line"] for v in result["verdicts"].values()],
        groups=_groups(result),
        breakdown_methods=[method_label(m) for m in [result["default_method"], *CONTROLS]],
        breakdown=_breakdown(result),
    )


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
