"""The labeller on real LLM noise as the relevance report's first section (templates/calibration.md.j2):
this module picks the rows and formats the numbers."""

from __future__ import annotations

from collections.abc import Mapping

from factory.calibration.calibrate import ALL
from factory.relevance.report import method_label
from factory.utils.selection import BACKTRACE, backtrace_setting
from factory.utils.templates import fixed, render


def label(method: str, mode: str) -> str:
    """S_q's rows by their mode, ``S_q (undirected_shortest)``; a control by its name in the reports."""
    if method == BACKTRACE or backtrace_setting(method):
        return f"S_q ({backtrace_setting(method) or mode})"
    return method_label(method)


def _cell(score: Mapping, key: str) -> str:
    lo, hi = score["ci"][key]
    return fixed(score[key]) + ("" if lo is None else f" [{lo:.2f}, {hi:.2f}]")


def _difference(cell: Mapping | None) -> str:
    if cell is None:
        return ""
    lo, hi = cell["ci"]
    value = "n/a" if cell["value"] is None else f"{cell['value']:+.2f}"
    return value + ("" if lo is None else f" [{lo:+.2f}, {hi:+.2f}]")


def _table(result: Mapping, group: str) -> dict:
    scores, differences = result[group], result["differences"][group]
    mode = result["params"]["mode"]
    return {
        "group": group,
        "n": scores[BACKTRACE]["n"],
        "rows": [
            {
                "method": label(m, mode),
                **{k: _cell(scores[m], k) for k in ("precision", "recall", "f1", "coverage")},
                "difference": _difference((differences.get(m) or {}).get("f1")),
            }
            for m in result["methods"]
        ],
    }


def render_calibration(result: Mapping | None) -> str:
    """The section; ``result`` None: calibrate-labels has not run."""
    if result is None:
        return render("factory.calibration", "calibration.md.j2", status="missing")
    if result["status"] != "ok":
        missing = ", ".join(result["missing"]) or "calibration.graphs is empty"
        return render("factory.calibration", "calibration.md.j2", status=result["status"], missing=missing)
    groups = [ALL, *(g for g in result["verdicts"] if g != ALL)]
    return render(
        "factory.calibration",
        "calibration.md.j2",
        status="ok",
        verdicts=[result["verdicts"][g]["line"] for g in groups],
        records=result["records"],
        extractors="; ".join(result["extractors"]),
        left_out=len(result["left_out"]),
        samples=result["params"]["bootstrap_samples"],
        seed=result["params"]["seed"],
        bar=f"{result['params']['bar']:g}",
        tables=[_table(result, g) for g in groups],
    )
