"""Backtraced relevance labels checked against the corpora's gold supporting facts (DESIGN §4).

For every evaluated trajectory (correct ones only: they are what gets trained on):

- every triplet is grounded (its recorded ``source_pid``/``source_sentence`` when present, else
  ``ground_triplet`` against its step's retrieved passages); ungrounded triplets are never relevant;
- gold relevance: paragraph level = the grounding passage is a gold supporting paragraph
  (``question.supporting[].pid``); sentence level = the grounding (passage, sentence) is a supporting
  fact (HotpotQA / 2Wiki; MuSiQue only has paragraph-level support, so it has no sentence level);
- kept sets compared with the gold-relevant set: S_q for every mode x target mode in the labels, and
  the controls ``keep_all``, ``answer_entity`` (triplets whose normalised subject or object contains a
  normalised gold or predicted answer as whole words) and ``random_matched`` (|S_q| triplets of the
  default mode/target drawn uniformly, averaged over ``random_seeds`` seeds);
- precision, recall, F1: micro over triplets (sums) and macro over trajectories (mean of per-trajectory
  values; a trajectory's precision is undefined when it keeps nothing, its recall when nothing of it is
  relevant, its F1 = 2tp / (kept + relevant) when either is non-zero; undefined values are left out of
  the mean), with 95% percentile bootstrap CIs over resampled trajectories (the same resamples for every
  method of a group, so differences are paired);
- extras per method: supporting-paragraph recall (gold paragraphs grounding >= 1 kept triplet),
  ungrounded rate of the kept triplets, mean kept size; per S_q the share of trajectories with no path.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from factory.agent.grounding import best_sentence, ground_triplet
from factory.errors import FactoryError
from factory.relevance.stats import (
    bootstrap_rng,
    bootstrap_weights,
    mean_over_seeds,
    paired_difference,
    ratio,
    score,
)
from factory.text import normalize_answer

LEVELS = ("paragraph", "sentence")
# the review's definition: the grounding passage is a gold supporting paragraph AND the entailment judge
# says the passage states the triplet (factory.relevance.entailment); scored when verdicts are given
ENTAILED = "paragraph_entailed"
KEEP_ALL, ANSWER_ENTITY, RANDOM = "keep_all", "answer_entity", "random_matched"


def sq_method(mode: str, target_mode: str) -> str:
    return f"sq/{mode}/{target_mode}"


# ---------------------------------------------------------------- per trajectory


def ground_for_relevance(
    trajectory: Mapping, passages_by_pid: Mapping[str, Mapping], threshold: float
) -> dict[str, tuple[str | None, int | None]]:
    """triplet_id -> (grounding pid, sentence): the recorded grounding when present, else computed."""
    tid = trajectory.get("trajectory_id", "?")
    steps = {s["index"]: s for s in trajectory.get("steps") or []}
    out: dict[str, tuple[str | None, int | None]] = {}
    for t in trajectory.get("triplets") or []:
        pid, sentence = t.get("source_pid"), t.get("source_sentence")
        if pid is not None:
            if sentence is None and pid in passages_by_pid:
                sentence = best_sentence(t["subject"], t["object"], passages_by_pid[pid])
            out[t["triplet_id"]] = (pid, sentence)
            continue
        step = steps.get(t["step_index"]) or {}
        pool = []
        for p in step.get("retrieved") or []:
            if p not in passages_by_pid:
                raise FactoryError(
                    f"trajectory {tid!r}: step {t['step_index']} retrieved passage {p!r}, which is not "
                    "in passages.parquet"
                )
            pool.append(passages_by_pid[p])
        g = ground_triplet(t["subject"], t["relation"], t["object"], pool, threshold)
        out[t["triplet_id"]] = (g.pid, g.sentence)
    return out


def gold_support(question: Mapping) -> tuple[set[str], set[tuple[str, int]] | None]:
    """(gold paragraph pids, gold (pid, sentence) facts or None when the corpus has paragraph level only)."""
    pids = {s["pid"] for s in question.get("supporting") or []}
    facts = {
        (s["pid"], int(s["sent_idx"]))
        for s in question.get("supporting") or []
        if s["sent_idx"] is not None and s["sent_idx"] >= 0
    }
    return pids, (facts or None)


def _contains_words(text: str, phrase: str) -> bool:
    return bool(phrase) and f" {phrase} " in f" {text} "


def answer_entity_triplets(trajectory: Mapping) -> list[str]:
    """Triplets that mention an answer entity: a normalised gold or predicted answer, as whole words, in
    subject or object."""
    answers = {
        normalize_answer(a) for a in list(trajectory.get("answers") or []) + [trajectory.get("answer") or ""]
    }
    answers.discard("")
    out = []
    for t in trajectory.get("triplets") or []:
        s, o = normalize_answer(t["subject"]), normalize_answer(t["object"])
        if any(_contains_words(s, a) or _contains_words(o, a) for a in answers):
            out.append(t["triplet_id"])
    return out


def random_matched(triplet_ids: Sequence[str], size: int, seed: int, trajectory_id: str) -> set[str]:
    """``size`` triplets drawn uniformly with a stable per-(seed, trajectory) RNG."""
    digest = hashlib.blake2b(f"relevance-random:{seed}:{trajectory_id}".encode(), digest_size=8).digest()
    return set(
        random.Random(int.from_bytes(digest, "big")).sample(list(triplet_ids), min(size, len(triplet_ids)))
    )


@dataclass
class Evaluated:
    """One trajectory ready for scoring."""

    trajectory_id: str
    dataset: str
    qtype: str
    route: str
    source: str
    triplets: list[str]
    grounding: dict[str, tuple[str | None, int | None]]
    gold_pids: set[str]
    gold_facts: set[tuple[str, int]] | None
    kept: dict[str, list[set[str]]] = field(default_factory=dict)  # method -> kept set per seed
    no_path: dict[str, bool] = field(default_factory=dict)  # S_q method -> no path found
    entailed: dict[str, bool | None] | None = None  # triplet id -> the judge's verdict (None: not judged)

    def relevant(self, level: str) -> set[str]:
        if level == "paragraph":
            return {t for t in self.triplets if self.grounding[t][0] in self.gold_pids}
        if level == ENTAILED:
            verdicts = self.entailed or {}
            return {t for t in self.relevant("paragraph") if verdicts.get(t) is True}
        facts = self.gold_facts or set()
        return {t for t in self.triplets if self.grounding[t] in facts}


def prepare(
    trajectory: Mapping,
    label_rows: Sequence[Mapping],
    question: Mapping,
    passages_by_pid: Mapping[str, Mapping],
    *,
    threshold: float,
    combos: Sequence[tuple[str, str]],
    default: tuple[str, str],
    random_seeds: Sequence[int],
    source: str = "",
    entailed: dict[str, bool | None] | None = None,
) -> Evaluated:
    """Ground a trajectory and compute every method's kept set (labels: its rows, one per mode x target
    mode). ``entailed``: the entailment judge's verdicts by triplet id, when judged."""
    tid = trajectory["trajectory_id"]
    by_combo = {(r["mode"], r["target_mode"]): r for r in label_rows}
    gold_pids, gold_facts = gold_support(question)
    triplets = [t["triplet_id"] for t in trajectory.get("triplets") or []]
    ev = Evaluated(
        tid,
        trajectory["dataset"],
        trajectory["qtype"],
        trajectory["route"],
        source,
        triplets,
        ground_for_relevance(trajectory, passages_by_pid, threshold),
        gold_pids,
        gold_facts,
        entailed=entailed,
    )
    known = set(triplets)
    for combo in combos:
        row = by_combo.get(combo)
        if row is None:
            raise FactoryError(f"trajectory {tid!r}: no labels for {combo[0]} x {combo[1]}")
        kept = set(row["kept_triplet_ids"])
        if not kept <= known:
            raise FactoryError(
                f"trajectory {tid!r}: labels ({combo[0]} x {combo[1]}) keep triplets it does not have: "
                f"{sorted(kept - known)[:3]}"
            )
        ev.kept[sq_method(*combo)] = [kept]
        ev.no_path[sq_method(*combo)] = not row["path_found"]
    ev.kept[KEEP_ALL] = [known]
    ev.kept[ANSWER_ENTITY] = [set(answer_entity_triplets(trajectory))]
    size = len(ev.kept[sq_method(*default)][0])
    ev.kept[RANDOM] = [random_matched(triplets, size, s, tid) for s in random_seeds]
    return ev


# ---------------------------------------------------------------- per-trajectory counts


def level_counts(
    items: Sequence[Evaluated], level: str, methods: Sequence[str]
) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """relevant (trajectories) and, per method, (tp, kept) as seeds x trajectories."""
    relevant = [e.relevant(level) for e in items]
    rel = np.array([len(r) for r in relevant], dtype=float)
    counts = {}
    for m in methods:
        seeds = range(len(items[0].kept[m])) if items else range(1)
        kept = np.array([[len(e.kept[m][s]) for e in items] for s in seeds], dtype=float).reshape(
            len(seeds), len(items)
        )
        tp = np.array(
            [[len(e.kept[m][s] & r) for e, r in zip(items, relevant)] for s in seeds], dtype=float
        ).reshape(len(seeds), len(items))
        counts[m] = (tp, kept)
    return rel, counts


def extra_counts(items: Sequence[Evaluated], methods: Sequence[str]) -> dict[str, dict[str, np.ndarray]]:
    """Per method, seeds x trajectories: gold paragraphs covered by kept triplets, kept ungrounded, kept;
    plus gold paragraphs per trajectory and, for S_q, whether no path was found."""
    gold = np.array([len(e.gold_pids) for e in items], dtype=float)
    out = {}
    for m in methods:
        covered, ungrounded, kept = [], [], []
        for s in range(len(items[0].kept[m])):
            covered.append([len({e.grounding[t][0] for t in e.kept[m][s]} & e.gold_pids) for e in items])
            ungrounded.append([sum(e.grounding[t][0] is None for t in e.kept[m][s]) for e in items])
            kept.append([len(e.kept[m][s]) for e in items])
        out[m] = {
            "covered": np.array(covered, dtype=float),
            "ungrounded": np.array(ungrounded, dtype=float),
            "kept": np.array(kept, dtype=float),
            "gold": gold,
        }
        if m.startswith("sq/"):
            out[m]["no_path"] = np.array([e.no_path[m] for e in items], dtype=float)
    return out


def group_extras(counts: Mapping[str, dict[str, np.ndarray]], members: np.ndarray) -> dict[str, dict]:
    """Supporting-paragraph recall (micro, macro), ungrounded rate, mean kept size, no-path share (means over
    seeds)."""
    out = {}
    for m, c in counts.items():
        cov, ung, kept, gold = (
            c["covered"][:, members],
            c["ungrounded"][:, members],
            c["kept"][:, members],
            c["gold"][members],
        )
        with_gold = gold > 0
        out[m] = {
            "support_recall_micro": mean_over_seeds(ratio(cov.sum(-1), gold.sum())),
            "support_recall_macro": mean_over_seeds(
                [np.mean(row[with_gold] / gold[with_gold]) if with_gold.any() else np.nan for row in cov]
            ),
            "ungrounded_rate": mean_over_seeds(ratio(ung.sum(-1), kept.sum(-1))),
            "mean_kept": mean_over_seeds(kept.mean(-1)) if len(members) else None,
        }
        if "no_path" in c:
            out[m]["no_path_share"] = float(c["no_path"][members].mean())
    return out


def groups_of(items: Sequence[Evaluated]) -> dict[str, list[int]]:
    """all; dataset=d; dataset=d/qtype=q; dataset=d/route=r; route=r; source=s (when several sources)."""
    groups: dict[str, list[int]] = {"all": list(range(len(items)))}
    keys = []
    for i, e in enumerate(items):
        keys.append(
            (
                i,
                [
                    f"dataset={e.dataset}",
                    f"dataset={e.dataset}/qtype={e.qtype}",
                    f"dataset={e.dataset}/route={e.route}",
                    f"route={e.route}",
                ]
                + ([f"source={e.source}"] if e.source else []),
            )
        )
    for i, names in keys:
        for name in names:
            groups.setdefault(name, []).append(i)
    if len({e.source for e in items}) < 2:
        groups = {k: v for k, v in groups.items() if not k.startswith("source=")}
    return dict(sorted(groups.items(), key=lambda kv: (kv[0] != "all", kv[0])))


def evaluate(
    items: Sequence[Evaluated],
    methods: Sequence[str],
    default_method: str,
    *,
    bootstrap_samples: int,
    seed: int,
) -> dict[str, dict]:
    """Scores of every group and level; paired bootstrap differences S_q(default) - control."""
    judged = np.array([e.entailed is not None for e in items], dtype=bool)
    levels = LEVELS + ((ENTAILED,) if judged.any() else ())
    per_level = {level: level_counts(items, level, methods) for level in levels}
    extra = extra_counts(items, methods)
    has_facts = np.array([e.gold_facts is not None for e in items], dtype=bool)
    results: dict[str, dict] = {}
    for name, member_list in groups_of(items).items():
        members = np.array(member_list, dtype=int)
        group = {"trajectories": len(members), "levels": {}}
        for level in levels:
            subset = (
                members
                if level == "paragraph"
                else members[(judged if level == ENTAILED else has_facts)[members]]
            )
            if not len(subset):
                continue
            weights = bootstrap_weights(len(subset), bootstrap_samples, bootstrap_rng(seed, name, level))
            rel, counts = per_level[level]
            scores, boots = score(counts, rel, subset, weights)
            diffs = {
                control: {
                    metric: paired_difference(scores, boots, default_method, control, metric)
                    for metric in ("micro_f1", "micro_precision", "macro_f1")
                }
                for control in (ANSWER_ENTITY, KEEP_ALL, RANDOM)
            }
            group["levels"][level] = {
                "trajectories": len(subset),
                "methods": scores,
                "sq_minus_control": diffs,
            }
        group["extras"] = group_extras(extra, members)
        results[name] = group
    return results


def verdicts(results: Mapping[str, dict], default_method: str, bar: float) -> dict[str, dict]:
    """One plain verdict per dataset: does S_q beat answer-entity beyond the CI; does it reach the bar."""
    out = {}
    for name, group in results.items():
        if not name.startswith("dataset=") or "/" in name:
            continue
        dataset = name.split("=", 1)[1]
        para = group["levels"]["paragraph"]
        sq, ae = para["methods"][default_method], para["methods"][ANSWER_ENTITY]
        diff = para["sq_minus_control"][ANSWER_ENTITY]["micro_f1"]
        p, r, f = (
            sq["micro"]["precision"]["value"],
            sq["micro"]["recall"]["value"],
            sq["micro"]["f1"]["value"],
        )
        lo = diff["ci"][0]
        beats = lo is not None and lo > 0
        reaches = p is not None and r is not None and p >= bar and r >= bar

        def fmt(x):
            return "n/a" if x is None else f"{x:.2f}"

        def ci(c):
            return "[n/a]" if c[0] is None else f"[{c[0]:.2f}, {c[1]:.2f}]"

        line = (
            f"{dataset}: S_q ({default_method[3:]}) micro F1 {fmt(f)} {ci(sq['micro']['f1']['ci'])} vs "
            "answer-entity "
            f"{fmt(ae['micro']['f1']['value'])} {ci(ae['micro']['f1']['ci'])} -> "
            f"{'BEATS' if beats else 'does NOT beat'} the answer-entity control beyond the 95% CI "
            f"(paired difference {fmt(diff['value'])} {ci(diff['ci'])}); precision {fmt(p)} and recall "
            f"{fmt(r)} "
            f"{'REACH' if reaches else 'do NOT reach'} the {bar:g} bar (paragraph level, "
            f"{para['trajectories']} correct trajectories)."
        )
        out[dataset] = {
            "beats_answer_entity": beats,
            "reaches_bar": reaches,
            "precision": p,
            "recall": r,
            "f1": f,
            "difference": diff,
            "line": line,
        }
    return out


def summarize_counts(items: Sequence[Evaluated]) -> dict:
    grounded = sum(e.grounding[t][0] is not None for e in items for t in e.triplets)
    total = sum(len(e.triplets) for e in items)
    return {
        "evaluated": len(items),
        "by_dataset": dict(sorted(Counter(e.dataset for e in items).items())),
        "triplets": total,
        "grounded_triplets": grounded,
        "ungrounded_rate_all_triplets": (total - grounded) / total if total else None,
        "sentence_level_trajectories": sum(e.gold_facts is not None for e in items),
    }


# ---------------------------------------------------------------- the whole check


@dataclass
class Source:
    """One round of one chain: its trajectories and backtrace labels."""

    name: str  # e.g. backtrace/seed_0/round_1
    trajectories: list[dict]
    labels: list[dict]


def _content_key(t: Mapping) -> tuple:
    """Identical trajectories (e.g. every variant's round 1 from the same base policy) count once."""
    return (
        t["question_id"],
        t.get("answer"),
        tuple(s.get("output") for s in t.get("steps") or []),
        tuple((x["subject"], x["relation"], x["object"]) for x in t.get("triplets") or []),
    )


def check_relevance(
    sources: Sequence[Source],
    questions_by_id: Mapping[str, Mapping],
    passages_by_pid: Mapping[str, Mapping],
    *,
    default_combo: tuple[str, str],
    threshold: float = 0.5,
    bootstrap_samples: int = 1000,
    random_seeds: int = 5,
    seed: int = 23,
    bar: float = 0.8,
    entailment: Mapping[tuple[str, str], bool | None] | None = None,
) -> dict:
    """Relevance of the backtraced labels vs gold supporting facts over all sources (see module doc).
    ``entailment``: the judge's verdicts by (trajectory id, triplet id); with it the review's definition
    (``ENTAILED`` level: gold paragraph and entailed) is scored too.

    Only correct trajectories are scored; identical trajectories from several sources count once; a
    trajectory without labels for every mode x target mode (those common to all sources) is left out and
    counted. S_q methods: those common combos; random control matched to ``default_combo`` (or the first
    common combo when the labels lack it).
    """
    counts: Counter = Counter()
    combo_sets = []
    for src in sources:
        combo_sets.append({(r["mode"], r["target_mode"]) for r in src.labels})
    combos = sorted(set.intersection(*combo_sets)) if combo_sets else []
    head = {
        "sources": [s.name for s in sources],
        "params": {
            "threshold": threshold,
            "bootstrap_samples": bootstrap_samples,
            "random_seeds": random_seeds,
            "seed": seed,
            "bar": bar,
        },
    }
    if not combos:
        total = sum(len(s.trajectories) for s in sources)
        return {
            **head,
            "status": "no_labels" if total else "no_trajectories",
            "counts": {"trajectories": total},
            "groups": {},
            "verdicts": {},
        }
    default = default_combo if default_combo in combos else combos[0]
    seeds = [seed + k for k in range(random_seeds)]
    items: list[Evaluated] = []
    seen: set[tuple] = set()
    for src in sources:
        rows_by_tid: dict[str, list[Mapping]] = {}
        for r in src.labels:
            if (r["mode"], r["target_mode"]) in combos:
                rows_by_tid.setdefault(r["trajectory_id"], []).append(r)
        for t in src.trajectories:
            counts["trajectories"] += 1
            if not t.get("correct"):
                continue
            counts["correct"] += 1
            key = _content_key(t)
            if key in seen:
                counts["duplicates_dropped"] += 1
                continue
            seen.add(key)
            rows = rows_by_tid.get(t["trajectory_id"], [])
            if {(r["mode"], r["target_mode"]) for r in rows} != set(combos):
                counts["missing_labels"] += 1
                continue
            question = questions_by_id.get(t["question_id"])
            if question is None:
                raise FactoryError(
                    f"trajectory {t['trajectory_id']!r}: question {t['question_id']!r} is not in "
                    "questions.parquet"
                )
            items.append(
                prepare(
                    t,
                    rows,
                    question,
                    passages_by_pid,
                    threshold=threshold,
                    combos=combos,
                    default=default,
                    random_seeds=seeds,
                    source=src.name,
                    entailed=None
                    if entailment is None
                    else {
                        x["triplet_id"]: entailment.get((t["trajectory_id"], x["triplet_id"]))
                        for x in t.get("triplets") or []
                    },
                )
            )
    head.update(
        combos=[list(c) for c in combos],
        default=list(default),
        counts={
            **{k: counts[k] for k in ("trajectories", "correct", "duplicates_dropped", "missing_labels")},
            **summarize_counts(items),
        },
    )
    if not items:
        return {
            **head,
            "status": "no_correct_trajectories" if counts["trajectories"] else "no_trajectories",
            "groups": {},
            "verdicts": {},
        }
    methods = [sq_method(*c) for c in combos] + [KEEP_ALL, ANSWER_ENTITY, RANDOM]
    default_method = sq_method(*default)
    results = evaluate(items, methods, default_method, bootstrap_samples=bootstrap_samples, seed=seed)
    return {
        **head,
        "status": "ok",
        "methods": methods,
        "default_method": default_method,
        "groups": results,
        "verdicts": verdicts(results, default_method, bar),
    }
