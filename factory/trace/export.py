"""Export a round's correct trajectories in the TRACE protocol: SFT targets and RL prompts.

Per correct trajectory of a variant's round (docs/design.md §6):

- the prompt: a system message stating the protocol and a user message with the question and the
  passages the trajectory retrieved (de-duplicated, in first-retrieval order, numbered [1]..[n],
  capped at ``trace.max_passages``);
- **SFT target**: ``<relevance>[i, ...]</relevance><analysis>...</analysis><answer>...</answer>``
  where the relevance lists the numbered passages that ground the variant's kept triplets, the
  analysis states those triplets as a chain from the question's initial entities to the answer,
  each citing its passage, and the answer is the trajectory's answer. What a variant keeps is what
  its supervision set kept: the variants stage's ``kept.parquet`` (``schemas.KEPT``), read, never
  drawn again, so the export of the random control is the draw that was trained on;
- **RL record**: the same prompt plus reference columns for ``factory.trace.rewards``: gold answers,
  the numbered passages that are gold supporting paragraphs, and whether those cover all, some or
  none of the gold paragraphs.

Every trajectory leaves with a status (counts add up); each SFT target is scored with the reward
functions it is meant to train for, which is a direct quality figure of the labels.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from factory.backtrace.rows import labels_index
from factory.params.round_sections import TraceParams
from factory.trace.protocol import (
    build_prompt,
    chain_order,
    gold_reference,
    numbered_passages,
    render_statement,
    render_target,
)
from factory.trace.rewards import score_completion
from factory.utils.errors import FactoryError

PROTOCOL_VERSION = "trace-v1"
REWARD_COMPONENTS = ("format", "accuracy", "relevance", "bonus")

# Statuses of a trajectory in the export (every input trajectory gets exactly one).
EXPORTED = "exported"  # SFT + RL record
RL_ONLY = "no_cited_triplet"  # no kept triplet is grounded in a numbered passage: RL record only
NO_PASSAGES = "no_passages"  # nothing retrieved: no prompt to build
NOT_IN_SET = "not_in_set"  # correct, but the variant's set holds nothing of it (e.g. left out as parametric)
INCORRECT = "incorrect"  # not a correct trajectory: not exported
STATUSES = (EXPORTED, RL_ONLY, NO_PASSAGES, NOT_IN_SET, INCORRECT)


@dataclass
class TraceExport:
    """Result of exporting one round: SFT rows, RL rows, one status per trajectory, counts."""

    sft: list[dict] = field(default_factory=list)
    rl: list[dict] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)  # trajectory_id -> status
    counts: Counter = field(default_factory=Counter)


def assert_exportable(trajectories: Iterable[Mapping[str, Any]], allow_synthetic: bool = False) -> None:
    """Refuse trajectories of the scripted/simulated policies (test fixtures, not model behaviour)
    unless ``allow_synthetic`` (tests and demos only)."""
    from factory.agent.policy import is_untrainable

    if allow_synthetic:
        return
    for t in trajectories:
        if is_untrainable(str(t.get("policy") or "")):
            raise FactoryError(
                f"trajectory {t.get('trajectory_id')!r}: policy {t['policy']!r} is synthetic (gold "
                "facts, not a model); "
                "it cannot be exported for training"
            )


def export_trajectory(
    trajectory: Mapping[str, Any],
    labels_row: Mapping[str, Any] | None,
    kept_row: Mapping[str, Any] | None,
    question_row: Mapping[str, Any],
    passages_by_pid: Mapping[str, Mapping[str, Any]],
    params: TraceParams,
    *,
    variant: str,
    round_: int,
    seed: int,
    passage_chars: int = 0,
) -> tuple[str, dict | None, dict | None, dict]:
    """(status, SFT row or None, RL row or None, per-trajectory counts) for one trajectory
    (``kept_row``: what the variant's set kept of it, a ``schemas.KEPT`` row, None when the set holds
    nothing of it; ``labels_row``: its backtrace labels, for the chain's initial entities, may be None;
    ``params``: the passage cap and the bonus weight; ``passage_chars``: 0 = passages uncut)."""
    tid = trajectory["trajectory_id"]
    counts: Counter = Counter()
    if not trajectory.get("correct"):
        return INCORRECT, None, None, counts
    if kept_row is None:
        return NOT_IN_SET, None, None, counts
    pids, retrieved = numbered_passages(trajectory, params.max_passages)
    if not pids:
        return NO_PASSAGES, None, None, counts
    counts["passages_numbered"] += len(pids)
    counts["passages_cut"] += retrieved - len(pids)
    prompt = build_prompt(
        trajectory["question"], pids, passages_by_pid, passage_chars, where=f"trajectory {tid!r}"
    )
    gold_indices, coverage = gold_reference(question_row, pids)
    answers = list(question_row.get("answers") or trajectory["answers"])
    base = {
        "record_id": f"{variant}/seed_{seed}/round_{round_}/{tid}",
        "variant": variant,
        "round": round_,
        "seed": seed,
        "trajectory_id": tid,
        **{key: trajectory[key] for key in ("question_id", "dataset", "qtype", "route", "policy")},
    }
    gold = {
        "passage_ids": pids,
        "gold_answers": answers,
        "gold_relevant_indices": gold_indices,
        "gold_coverage": coverage,
    }
    rl = {**base, "prompt": prompt, **gold}

    index_of = {pid: i for i, pid in enumerate(pids, start=1)}
    cited = _cited(trajectory, kept_row["kept_triplet_ids"], index_of, counts)
    if not cited:
        return RL_ONLY, None, rl, counts

    initial = (labels_row or {}).get("initial_entities") or []
    ordered = chain_order(cited, initial, trajectory["question"])
    relevance = sorted({index_of[t["source_pid"]] for t in ordered})
    answer = " ".join((trajectory.get("answer") or "").split())
    target = render_target(
        relevance, [render_statement(t, index_of[t["source_pid"]]) for t in ordered], answer
    )
    rewards = score_completion(target, answers, gold_indices, params.bonus_weight)
    sft = {
        **base,
        "messages": [*prompt, {"role": "assistant", "content": target}],
        "relevance": relevance,
        "triplet_ids": [t["triplet_id"] for t in ordered],
        "answer": answer,
        **gold,
        **{f"reward_{k}": v for k, v in rewards.items()},
    }
    return EXPORTED, sft, rl, counts


def _cited(
    trajectory: Mapping[str, Any],
    kept_triplet_ids: Iterable[str],
    index_of: Mapping[str, int],
    counts: Counter,
) -> list:
    """The kept triplets whose source passage is numbered in the prompt (the rest counted by why)."""
    kept_ids = set(kept_triplet_ids)
    kept_triplets = [t for t in trajectory.get("triplets") or [] if t["triplet_id"] in kept_ids]
    cited = [t for t in kept_triplets if t.get("source_pid") in index_of]
    counts["triplets_kept"] += len(kept_triplets)
    counts["triplets_cited"] += len(cited)
    counts["triplets_ungrounded"] += sum(1 for t in kept_triplets if not t.get("source_pid"))
    counts["triplets_beyond_cap"] += sum(
        1 for t in kept_triplets if t.get("source_pid") and t["source_pid"] not in index_of
    )
    return cited


# ---------------------------------------------------------------- a round


def export_trace(
    trajectories: Sequence[Mapping[str, Any]],
    labels: Sequence[Mapping[str, Any]],
    kept: Sequence[Mapping[str, Any]],
    questions_by_id: Mapping[str, Mapping[str, Any]],
    passages_by_pid: Mapping[str, Mapping[str, Any]],
    params: TraceParams | None = None,
    *,
    variant: str,
    round_: int,
    seed: int = 0,
    mode: str,
    target_mode: str,
    passage_chars: int = 0,
    allow_synthetic: bool = False,
) -> TraceExport:
    """Export one round of one variant (rows sorted by trajectory id). ``params``: ``trace`` in
    params.yaml (None: the defaults of ``factory.params.round_sections.TraceParams``); ``labels``: backtrace
    labels rows (only those of ``mode`` x ``target_mode`` are read); ``kept``: the variant's kept.parquet rows
    of the round (one per trajectory in its set)."""
    assert_exportable(trajectories, allow_synthetic)
    params = params or TraceParams()
    by_tid = labels_index(labels, mode, target_mode)
    kept_by_tid: dict[str, Mapping[str, Any]] = {}
    for row in kept:
        if row["trajectory_id"] in kept_by_tid:
            raise FactoryError(f"kept.parquet of {variant}: two rows for trajectory {row['trajectory_id']!r}")
        kept_by_tid[row["trajectory_id"]] = row
    out = TraceExport()
    seen: set[str] = set()
    for t in sorted(trajectories, key=lambda r: r["trajectory_id"]):
        tid = t["trajectory_id"]
        if tid in seen:
            raise FactoryError(f"trajectories: {tid!r} appears twice")
        seen.add(tid)
        question = questions_by_id.get(t["question_id"])
        if question is None:
            raise FactoryError(
                f"trajectory {tid!r}: question {t['question_id']!r} is not in data/interim/questions.parquet"
            )
        status, sft, rl, counts = export_trajectory(
            t,
            by_tid.get(tid),
            kept_by_tid.get(tid),
            question,
            passages_by_pid,
            params,
            variant=variant,
            round_=round_,
            seed=seed,
            passage_chars=passage_chars,
        )
        out.statuses[tid] = status
        out.counts.update(counts)
        if sft is not None:
            out.sft.append(sft)
        if rl is not None:
            out.rl.append(rl)
    return out


def _mean(rows: Sequence[Mapping[str, Any]], key: str) -> float | None:
    return sum(r[key] for r in rows) / len(rows) if rows else None


def _reward_means(rows: Sequence[Mapping[str, Any]]) -> dict:
    return {"records": len(rows), **{c: _mean(rows, f"reward_{c}") for c in REWARD_COMPONENTS}}


def _group(rows: Sequence[Mapping[str, Any]], key: str) -> dict[str, list]:
    groups: dict[str, list] = defaultdict(list)
    for r in rows:
        groups[r[key]].append(r)
    return dict(sorted(groups.items()))


def export_stats(result: TraceExport, trajectories: int) -> dict:
    """Counts (by status; records; triplets; coverage) and the rewards the SFT targets earn
    themselves, overall, per dataset, per route and per dataset x route."""
    statuses = Counter(result.statuses.values())
    return {
        "trajectories": trajectories,
        "correct": trajectories - statuses.get(INCORRECT, 0),
        "by_status": {s: statuses.get(s, 0) for s in STATUSES},
        "sft_records": len(result.sft),
        "rl_records": len(result.rl),
        "triplets": {
            k: result.counts.get(k, 0)
            for k in ("triplets_kept", "triplets_cited", "triplets_ungrounded", "triplets_beyond_cap")
        },
        "passages": {
            "numbered_mean": result.counts.get("passages_numbered", 0) / len(result.rl)
            if result.rl
            else None,
            "cut_by_cap": result.counts.get("passages_cut", 0),
        },
        "gold_coverage": {
            c: sum(1 for r in result.rl if r["gold_coverage"] == c) for c in ("full", "partial", "none")
        },
        "sft_rewards": {
            "overall": _reward_means(result.sft),
            "by_dataset": {k: _reward_means(v) for k, v in _group(result.sft, "dataset").items()},
            "by_route": {k: _reward_means(v) for k, v in _group(result.sft, "route").items()},
            "by_dataset_route": {
                f"{d}/{r}": _reward_means(v)
                for d, rows in _group(result.sft, "dataset").items()
                for r, v in _group(rows, "route").items()
            },
        },
    }
