"""reports/audit.html: one self-contained page to decide whether to trust the labels, by looking.

For a seeded sample of correct trajectories per dataset (``report.audit_trajectories``, over every
round of every chain, identical trajectories once) a section shows: the question, the gold answer and
the model's; each step with kept / dropped marked (the default backtrace mode x target mode, the labels
the supervision sets are built from); the graph G drawn as inline SVG, S_q's triplets, the
answer-entity control's and the gold-grounded ones told apart by colour, dash and a marker, each edge
with its source passage on hover; a table of the triplets with their source passages beside them; and
the counterfactual outcomes (the final answer re-asked with each graph). No script, no network, no
external file: the page opens anywhere. Same inputs, same bytes.

The markup is in templates/ (package data, loaded by factory.utils.templates: every value escaped, the
page one line): audit.html.j2 (the page), audit_section.html.j2 (one trajectory) and audit.css; this
module picks the trajectories and computes what they show.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from functools import cache

from jinja2 import Environment
from markupsafe import Markup

from factory.params.label_sections import ReportParams
from factory.relevance.check import Source, content_key
from factory.relevance.grounded import answer_entity_triplets, gold_support, ground_for_relevance
from factory.utils.templates import environment
from factory.utils.text import normalize_answer


@cache
def _templates() -> Environment:
    env = environment("factory.relevance")
    env.filters.update(
        short=_short, coord=lambda x: f"{x:.1f}", score=lambda x: "n/a" if x is None else f"{x:.2f}"
    )
    return env


def sample(sources: Sequence[Source], per_dataset: int, seed: int) -> list[tuple[Source, dict]]:
    """Up to ``per_dataset`` correct trajectories of each dataset, seeded, identical ones once."""
    seen: set[tuple] = set()
    by_dataset: dict[str, list[tuple[Source, dict]]] = {}
    for src in sources:
        for t in src.trajectories:
            key = content_key(t)
            if t.get("correct") and key not in seen:
                seen.add(key)
                by_dataset.setdefault(t["dataset"], []).append((src, t))
    out = []
    for dataset in sorted(by_dataset):
        items = sorted(by_dataset[dataset], key=lambda st: (st[0].name, st[1]["trajectory_id"]))
        rng = random.Random(f"audit:{seed}:{dataset}")
        out += sorted(rng.sample(items, min(per_dataset, len(items))), key=lambda st: st[1]["trajectory_id"])
    return out


def _short(text: str, n: int = 28) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _layout(nodes: Sequence[str], width: int, height: int) -> dict[str, tuple[float, float]]:
    """Nodes on a circle, in order of first appearance (deterministic)."""
    cx, cy, r = width / 2, height / 2, min(width, height) / 2 - 60
    n = max(1, len(nodes))
    return {
        name: (
            cx + r * math.cos(2 * math.pi * i / n - math.pi / 2),
            cy + r * math.sin(2 * math.pi * i / n - math.pi / 2),
        )
        for i, name in enumerate(nodes)
    }


def _layers(
    nodes: Sequence[str], triplets: Sequence[Mapping], start: set[str]
) -> dict[str, tuple[float, float]]:
    """Nodes in columns by their distance (in triplets, either way) from the ``start`` names, the
    unreached in a last column; in order of first appearance within a column (deterministic)."""
    adjacent: dict[str, set[str]] = {}
    for t in triplets:
        s, o = normalize_answer(t["subject"]), normalize_answer(t["object"])
        adjacent.setdefault(s, set()).add(o)
        adjacent.setdefault(o, set()).add(s)
    depth = {n: 0 for n in (normalize_answer(x) for x in nodes) if n in start}
    frontier = list(depth)
    while frontier:
        frontier = [m for n in frontier for m in sorted(adjacent.get(n, ())) if m not in depth]
        for m in frontier:
            depth.setdefault(m, 1 + min(depth[k] for k in adjacent[m] if k in depth))
    last = max(depth.values(), default=0) + 1
    columns: dict[int, list[str]] = {}
    for name in nodes:
        columns.setdefault(depth.get(normalize_answer(name), last), []).append(name)
    order = sorted(columns)
    return {
        name: (90 + COLUMN * order.index(c), 40 + ROW * i) for c in order for i, name in enumerate(columns[c])
    }


COLUMN, ROW = 190, 34  # a layered drawing's column width and row height


def graph_drawing(triplets: Sequence[Mapping], start: set[str] | None = None) -> dict | None:
    """Where the graph G is drawn: its size, each triplet's edge between its entities' places, and the
    entities (one node per normalized name); None for an empty graph. The entities sit on a circle, or,
    given ``start`` (normalized names: where paths begin), in columns by their distance from it."""
    if not triplets:
        return None
    nodes: list[str] = []
    for t in triplets:
        for name in (t["subject"], t["object"]):
            if normalize_answer(name) not in [normalize_answer(x) for x in nodes]:
                nodes.append(name)
    if start:
        pos = _layers(nodes, triplets, start)
        width = max(x for x, _ in pos.values()) + 110
        height = max(y for _, y in pos.values()) + 40
    else:
        width, height = 760, max(360, 48 * len(nodes))
        pos = _layout(nodes, width, height)
    place = {normalize_answer(n): pos[n] for n in nodes}
    edges = []
    for t in triplets:
        (x1, y1), (x2, y2) = place[normalize_answer(t["subject"])], place[normalize_answer(t["object"])]
        edges.append({"triplet": t, "x1": x1, "y1": y1, "x2": x2, "y2": y2})
    nodes_at = [{"name": name, "x": x, "y": y} for name, (x, y) in pos.items()]
    return {"width": width, "height": height, "edges": edges, "nodes": nodes_at}


def trajectory_section(
    src: Source,
    t: Mapping,
    labels: Mapping | None,
    question: Mapping,
    passages_by_pid: Mapping[str, Mapping],
    counterfactual: Sequence[Mapping],
    threshold: float,
) -> str:
    """One trajectory's section of the page (HTML, from audit_section.html.j2)."""
    grounding = ground_for_relevance(t, passages_by_pid, threshold)
    gold_pids, _ = gold_support(question)
    passage_of = {}
    for tid, (pid, sent) in grounding.items():
        if pid is not None:
            p = passages_by_pid.get(pid) or {}
            text = (p.get("sentences") or [""])[sent] if sent is not None and p.get("sentences") else ""
            passage_of[tid] = f"{p.get('title', pid)}: {text}".strip()
    section = {
        "trajectory": t,
        "source": src.name,
        "labelled": bool(labels),
        "gold_answer": (t.get("answers") or ["?"])[0],
        "kept_steps": set((labels or {}).get("kept_step_indices") or []),
        "kept_pairs": set((labels or {}).get("kept_pair_ids") or []),
        "sq": set((labels or {}).get("kept_triplet_ids") or []),
        "answer": set(answer_entity_triplets(t)),
        "gold": {tid for tid, (pid, _) in grounding.items() if pid in gold_pids},
        "passage_of": passage_of,
        "graph": graph_drawing(t.get("triplets") or []),
        "counterfactual": counterfactual,
    }
    return _templates().get_template("audit_section.html.j2").render(section=section)


def card_html(card: Mapping) -> Markup:
    """A real-graph card (values: factory.calibration.cards) in the page's markup (audit_card.html.j2)."""
    return Markup(_templates().get_template("audit_card.html.j2").render(card=card))


def _row_of(row: Mapping, t: Mapping, combo: tuple) -> bool:
    """Is ``row`` (labels, counterfactual) one of trajectory ``t`` under the mode x target mode ``combo``?"""
    return row["trajectory_id"] == t["trajectory_id"] and (row["mode"], row["target_mode"]) == combo


def render_audit(
    sources: Sequence[Source],
    counterfactual_rows: Mapping[str, Sequence[Mapping]],
    questions_by_id: Mapping[str, Mapping],
    passages_by_pid: Mapping[str, Mapping],
    report: ReportParams,
    *,
    default_combo: tuple[str, str],
    threshold: float,
    cards: Sequence[Markup] = (),
) -> str:
    """The whole page (a complete HTML document as a string): ``cards`` (real-graph cards,
    factory.calibration.cards) first, then ``report.audit_trajectories`` sampled trajectories per
    dataset, drawn with ``report.audit_seed``."""
    combo = tuple(default_combo)
    per_dataset, seed = report.audit_trajectories, report.audit_seed
    sections = []
    for src, t in sample(sources, per_dataset, seed):
        labels = next((r for r in src.labels if _row_of(r, t, combo)), None)
        cf = [r for r in counterfactual_rows.get(src.name, []) if _row_of(r, t, combo)]
        question = questions_by_id.get(t["question_id"], {})
        section = trajectory_section(src, t, labels, question, passages_by_pid, cf, threshold)
        sections.append(Markup(section))  # markup its own template rendered and escaped
    return (
        _templates()
        .get_template("audit.html.j2")
        .render(
            sections=sections,
            cards=list(cards),
            per_dataset=per_dataset,
            seed=seed,
            rounds=len(sources),
            sq_name="/".join(default_combo),
        )
    )
