"""reports/audit.html: one self-contained page to decide whether to trust the labels, by looking.

For a seeded sample of correct trajectories per dataset (``report.audit_trajectories``, over every
round of every chain, identical trajectories once) a section shows: the question, the gold answer and
the model's; each step with kept / dropped marked (the default backtrace mode x target mode, the labels
the supervision sets are built from); the graph G drawn as inline SVG, S_q's triplets, the
answer-entity control's and the gold-grounded ones told apart by colour, dash and a marker, each edge
with its source passage on hover; a table of the triplets with their source passages beside them; and
the counterfactual outcomes (the final answer re-asked with each graph). No script, no network, no
external file: the page opens anywhere. Same inputs, same bytes.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from html import escape

from factory.relevance.check import Source, content_key
from factory.relevance.grounded import answer_entity_triplets, gold_support, ground_for_relevance
from factory.text import normalize_answer

SQ, ANSWER, GOLD = "#0072B2", "#E69F00", "#009E73"
CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
section{border:1px solid #ccc;border-radius:6px;padding:1em;margin:1.5em 0}
.kept{border-left:6px solid #0072B2;background:#eef5fb}.dropped{border-left:6px solid #bbb;color:#777}
.step{padding:.3em .6em;margin:.3em 0;white-space:pre-wrap;font-family:monospace;font-size:12px}
.tag{font-weight:bold;font-family:system-ui,sans-serif}table{border-collapse:collapse;font-size:12px}
td,th{border:1px solid #ddd;padding:3px 6px;vertical-align:top}.ok{color:#009E73}.bad{color:#D55E00}
.legend span{margin-right:1.2em}
"""


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


def graph_svg(
    triplets: Sequence[Mapping], sq: set[str], answer: set[str], gold: set[str], passage_of: Mapping[str, str]
) -> str:
    """G as inline SVG: S_q edges thick blue, others grey; answer-entity edges dashed orange outline;
    gold-grounded edges with a green dot at the middle; hover shows the triplet and its source passage."""
    if not triplets:
        return "<p><em>The graph is empty: no triplet was completed.</em></p>"
    nodes: list[str] = []
    for t in triplets:
        for name in (t["subject"], t["object"]):
            if normalize_answer(name) not in [normalize_answer(x) for x in nodes]:
                nodes.append(name)
    width, height = 760, max(360, 48 * len(nodes))
    pos = _layout(nodes, width, height)
    index = {normalize_answer(n): n for n in nodes}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    for t in triplets:
        (x1, y1), (x2, y2) = (
            pos[index[normalize_answer(t["subject"])]],
            pos[index[normalize_answer(t["object"])]],
        )
        tid = t["triplet_id"]
        title = escape(
            f"({t['subject']} ; {t['relation']} ; {t['object']}) — source: "
            f"{passage_of.get(tid, 'ungrounded')}"
        )
        classes = " ".join(c for c, s in (("sq", sq), ("answer-entity", answer), ("gold", gold)) if tid in s)
        parts.append(f'<g class="edge {classes}" data-triplet="{escape(tid)}"><title>{title}</title>')
        if tid in answer:
            parts.append(
                f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{ANSWER}" '
                'stroke-width="9" stroke-dasharray="8 5" opacity="0.6"/>'
            )
        colour, w = (SQ, 4) if tid in sq else ("#999", 1.5)
        parts.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}" '
            f'stroke-width="{w}"/>'
        )
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        if tid in gold:
            parts.append(f'<circle cx="{mx:.1f}" cy="{my:.1f}" r="6" fill="{GOLD}"/>')
        parts.append(
            f'<text x="{mx:.1f}" y="{my - 8:.1f}" font-size="10" text-anchor="middle" fill="#444">'
            f"{escape(_short(t['relation'], 24))}</text></g>"
        )
    for name, (x, y) in pos.items():
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="#333"/><text x="{x:.1f}" y="{y + 17:.1f}" '
            f'font-size="11" text-anchor="middle">{escape(_short(name))}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _steps_html(trajectory: Mapping, kept_steps: set[int], kept_pairs: set[str]) -> str:
    out = []
    for s in trajectory.get("steps") or []:
        kept = s["index"] in kept_steps
        pairs = ""
        if s.get("pairs"):
            pairs = "\n" + "\n".join(
                f"  [{'kept' if p['pair_id'] in kept_pairs else 'dropped'}] {p['entity']} | {p['relation']}"
                for p in s["pairs"]
            )
        out.append(
            f'<div class="step {"kept" if kept else "dropped"}"><span class="tag">step {s["index"]} '
            f"{escape(s['kind'])}: {'KEPT' if kept else 'DROPPED'}</span>\n{escape(s.get('output') or '')}"
            f"{escape(pairs)}</div>"
        )
    return "".join(out)


def _counterfactual_html(rows: Sequence[Mapping]) -> str:
    if not rows:
        return "<p><em>Not re-asked by the counterfactual stage (outside its sample, or not run).</em></p>"
    body = "".join(
        f"<tr><td>{escape(r['condition'])}</td><td>{'' if r.get('random_seed') is None else r['random_seed']}"
        f"</td><td>{len(r.get('shown_triplet_ids') or [])} of {r.get('graph_size', '')}</td>"
        f"<td>{escape(str(r.get('answer') or ''))}</td>"
        f'<td class="{"ok" if r.get("correct") else "bad"}">'
        f'{"correct" if r.get("correct") else "wrong"}</td></tr>'
        for r in rows
    )
    return (
        "<table><tr><th>graph</th><th>random draw</th><th>triplets shown</th><th>answer</th><th>outcome</th>"
        f"</tr>{body}</table>"
    )


def trajectory_section(
    src: Source,
    t: Mapping,
    labels: Mapping | None,
    question: Mapping,
    passages_by_pid: Mapping[str, Mapping],
    counterfactual: Sequence[Mapping],
    threshold: float,
) -> str:
    grounding = ground_for_relevance(t, passages_by_pid, threshold)
    gold_pids, _ = gold_support(question)
    sq = set((labels or {}).get("kept_triplet_ids") or [])
    answer = set(answer_entity_triplets(t))
    gold = {tid for tid, (pid, _) in grounding.items() if pid in gold_pids}
    passage_of = {}
    for tid, (pid, sent) in grounding.items():
        if pid is not None:
            p = passages_by_pid.get(pid) or {}
            text = (p.get("sentences") or [""])[sent] if sent is not None and p.get("sentences") else ""
            passage_of[tid] = f"{p.get('title', pid)}: {text}".strip()
    rows = "".join(
        f"<tr><td>{escape(x['subject'])} ; {escape(x['relation'])} ; {escape(x['object'])}</td>"
        f"<td>{'S_q' if x['triplet_id'] in sq else ''}</td>"
        f"<td>{'yes' if x['triplet_id'] in answer else ''}</td>"
        f"<td>{'gold' if x['triplet_id'] in gold else ''}</td>"
        f"<td>{escape(passage_of.get(x['triplet_id'], 'ungrounded'))}</td></tr>"
        for x in t.get("triplets") or []
    )
    kept_steps = set((labels or {}).get("kept_step_indices") or [])
    kept_pairs = set((labels or {}).get("kept_pair_ids") or [])
    gold_answer = (t.get("answers") or ["?"])[0]
    return (
        f'<section class="trajectory" id="{escape(t["trajectory_id"])}">'
        f"<h2>{escape(t['dataset'])}: {escape(t['question'])}</h2>"
        f"<p>Gold answer <b>{escape(gold_answer)}</b>; the model answered "
        f"<b>{escape(t.get('answer') or '')}</b>. "
        f"<code>{escape(t['trajectory_id'])}</code> from <code>{escape(src.name)}</code>"
        f"{'' if labels else ' (no labels of the default mode)'}."
        + (
            " <b>Rationalized</b>: generated with the gold answer as a hint (STaR); the hint is never in "
            "the supervision."
            if t.get("rationalized")
            else ""
        )
        + "</p>"
        f"<h3>Steps</h3>{_steps_html(t, kept_steps, kept_pairs)}"
        f'<h3>Graph G</h3><p class="legend"><span style="color:{SQ}">&#9644; S_q (kept)</span>'
        f'<span style="color:{ANSWER}">- - answer-entity control</span><span style="color:{GOLD}">&#9679; '
        "grounded in a gold supporting paragraph</span>"
        "<span>grey: neither; hover an edge for its source</span></p>"
        f"{graph_svg(t.get('triplets') or [], sq, answer, gold, passage_of)}"
        "<table><tr><th>triplet</th><th>S_q</th><th>answer entity</th><th>gold-grounded</th>"
        f"<th>source passage</th></tr>{rows}</table>"
        f"<h3>Counterfactual outcomes</h3>{_counterfactual_html(counterfactual)}</section>"
    )


def render_audit(
    sources: Sequence[Source],
    counterfactual_rows: Mapping[str, Sequence[Mapping]],
    questions_by_id: Mapping[str, Mapping],
    passages_by_pid: Mapping[str, Mapping],
    *,
    default_combo: tuple[str, str],
    per_dataset: int,
    seed: int,
    threshold: float,
) -> str:
    """The whole page (a complete HTML document as a string)."""
    picked = sample(sources, per_dataset, seed)
    sections = []
    for src, t in picked:
        labels = next(
            (
                r
                for r in src.labels
                if r["trajectory_id"] == t["trajectory_id"]
                and (r["mode"], r["target_mode"]) == tuple(default_combo)
            ),
            None,
        )
        cf = [
            r
            for r in counterfactual_rows.get(src.name, [])
            if r["trajectory_id"] == t["trajectory_id"]
            and (r["mode"], r["target_mode"]) == tuple(default_combo)
        ]
        sections.append(
            trajectory_section(
                src, t, labels, questions_by_id.get(t["question_id"], {}), passages_by_pid, cf, threshold
            )
        )
    intro = (
        f"<p>{len(picked)} correct trajector{'y' if len(picked) == 1 else 'ies'} ({per_dataset} per dataset "
        f"at most, seed {seed}) from {len(sources)} round(s). S_q = "
        f"<code>{escape('/'.join(default_combo))}</code>."
        "</p>"
    )
    if not picked:
        why = "report.audit_trajectories is 0" if per_dataset == 0 else "no correct trajectory in any round"
        intro += f"<p><b>Nothing to audit: {why}.</b></p>"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>TraceFactory label audit</title>'
        f"<style>{CSS}</style></head><body><h1>Label audit: which generations backtracing keeps</h1>{intro}"
        + "".join(sections)
        + "</body></html>\n"
    )
