"""Real-graph cards for the audit page: what the labeller keeps of a real LLM-made graph, and what it misses.

For a seeded sample of calibration questions per dataset (``calibration.audit_questions``, seed
``report.audit_seed``) a card shows the question and its gold answer; every paragraph that is gold or
picked, marked gold / picked by S_q / picked by the KnowTrace authors' rule; why S_q picked what it did
(the question's entities as linked, where its paths start, and the answer's nodes, where they end); and
the part of the graph that matters drawn (``factory.relevance.audit.graph_drawing``): S_q's triplets,
the authors' rule's and the gold paragraphs' triplets, told apart by colour, dash and a marker. The
values come from calibrate-labels' per-question rows and the graph files; the markup is the audit
page's (``factory/relevance/templates/audit_card.html.j2``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from markupsafe import Markup

from factory.calibration.graphs import passage_pid, read_graph_files, to_trajectory
from factory.params.label_sections import CalibrationParams, ReportParams
from factory.relevance.audit import card_html, graph_drawing
from factory.utils import paths
from factory.utils.io import read_jsonl
from factory.utils.selection import AUTHORS_RULE, BACKTRACE
from factory.utils.text import normalize_answer

MAX_EDGES = 40  # a real graph has ~180 triplets: the card draws the ones that matter, at most this many


def sample_rows(rows: Sequence[Mapping], per_dataset: int, seed: int) -> list[Mapping]:
    """Up to ``per_dataset`` questions of each dataset, seeded (the audit page's seed), in id order."""
    out: list[Mapping] = []
    for dataset in sorted({r["dataset"] for r in rows}):
        mine = sorted((r for r in rows if r["dataset"] == dataset), key=lambda r: r["question_id"])
        rng = random.Random(f"calibration-audit:{seed}:{dataset}")
        out += sorted(rng.sample(mine, min(per_dataset, len(mine))), key=lambda r: r["question_id"])
    return out


def card(record: Mapping, row: Mapping, mode: str) -> Markup:
    """One question's card (module docstring); ``row``: its calibrate-labels row."""
    trajectory = to_trajectory(record)
    sq, authors, gold = set(row["kept"][BACKTRACE]), set(row["kept"][AUTHORS_RULE]), set(row["gold"])
    picked_sq, picked_authors = set(row["predicted"][BACKTRACE]), set(row["predicted"][AUTHORS_RULE])
    triplets = trajectory["triplets"]
    counts: dict[str, int] = {}
    for t in triplets:
        counts[t["source_pid"]] = counts.get(t["source_pid"], 0) + 1
    paragraphs = [
        {
            "title": p["title"],
            "gold": pid in gold,
            "sq": pid in picked_sq,
            "authors": pid in picked_authors,
            "triplets": counts.get(pid, 0),
        }
        for p in record["passages"]
        for pid in [passage_pid(record, p["passage_index"])]
        if pid in gold | picked_sq | picked_authors
    ]
    drawn = [t for t in triplets if t["triplet_id"] in sq | authors]
    drawn += [t for t in triplets if t["source_pid"] in gold and t["triplet_id"] not in sq | authors]
    title_of = {passage_pid(record, p["passage_index"]): p["title"] for p in record["passages"]}
    values = {
        "record": record,
        "row": row,
        "mode": mode,
        "extractor": record.get("extractor") or "an LLM",
        "paragraphs": paragraphs,
        "others": len(record["passages"]) - len(paragraphs),
        "scores": {m: row["values"][m] for m in (BACKTRACE, AUTHORS_RULE)},
        "sq": sq,
        "authors": authors,
        "gold_triplets": {t["triplet_id"] for t in triplets if t["source_pid"] in gold},
        "title_of": {t["triplet_id"]: title_of[t["source_pid"]] for t in triplets},
        "drawn": drawn[:MAX_EDGES],
        "left_undrawn": max(0, len(drawn) - MAX_EDGES),
        "graph": graph_drawing(
            drawn[:MAX_EDGES], start={normalize_answer(e) for e in row["initial_entities"]}
        ),
        "triplets": len(triplets),
    }
    return card_html(values)


def cards(
    records: Sequence[Mapping], rows: Sequence[Mapping], per_dataset: int, seed: int, mode: str
) -> list:
    """The cards of the sampled questions whose graph ``records`` holds (Markup each, in sample order)."""
    by_id = {r["question_id"]: r for r in records}
    return [card(by_id[row["question_id"]], row, mode) for row in sample_rows(rows, per_dataset, seed)
            if row["question_id"] in by_id]  # fmt: skip


def run_cards(calibration: CalibrationParams, report: ReportParams, mode: str) -> list:
    """The audit page's cards after calibrate-labels (its rows file) from the files it read; none before."""
    if calibration.audit_questions == 0 or not paths.CALIBRATION_QUESTIONS.exists():
        return []
    rows = list(read_jsonl(paths.CALIBRATION_QUESTIONS))
    records = read_graph_files(calibration.graphs).records
    return cards(records, rows, calibration.audit_questions, report.audit_seed, mode)
