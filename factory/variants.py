"""The three supervision variants (DESIGN §3): what each keeps, and the chat-format SFT examples.

``kept_units`` is the ONE place that decides what a variant keeps of a trajectory; the supervision
sets, the TRACE export and the gates all call it, so the variants stay comparable:

- ``backtrace``: the labels' kept sets (S_q, its pairs and steps);
- ``unfiltered``: every pair, every triplet, every step (STaR-style);
- ``random``: per trajectory exactly as many pairs AND as many triplets removed as backtracing removed,
  chosen uniformly at random with ``random.Random(hash(seed, trajectory_id))`` — matched in size and in
  the mix of unit kinds; steps then follow the backtracing rule (an explore step with no pair left is
  dropped, a complete step with no triplet left is dropped, the final answer step is always kept).

Steps whose status is not ``ok`` (unparseable or failed calls) are never kept by any variant: their
output cannot be re-rendered and would teach the model a broken format. They hold no units (the agent
records no pairs/triplets for a failed step), so the unit counts of the variants are unaffected.

``build_examples`` turns the CORRECT trajectories of a round into one example per kept step: the step's
prompt messages as recorded (hint-free for rationalized trajectories), then the kept output as the
assistant turn — explore and complete outputs re-rendered with only the kept pairs/triplets (in every
variant, so formatting never differs between variants), final and sufficient outputs as generated.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from factory import paths
from factory.agent.policy import assert_trainable
from factory.agent.prompts import output_format
from factory.config import VARIANTS
from factory.errors import FactoryError
from factory.text import normalize_question


@dataclass(frozen=True)
class Kept:
    """What a variant keeps of one trajectory (ids in trajectory order) and how many units it removed."""

    triplet_ids: tuple[str, ...]
    pair_ids: tuple[str, ...]
    step_indices: tuple[int, ...]
    removed_units: int  # removed_pairs + removed_triplets
    removed_pairs: int = 0
    removed_triplets: int = 0


def _tid(trajectory: Mapping) -> str:
    return str(trajectory.get("trajectory_id", "?"))


def all_units(trajectory: Mapping) -> tuple[list[str], list[str]]:
    """(pair ids of the explore steps, triplet ids of G), in trajectory order; duplicates are an error."""
    pairs = [
        p["pair_id"]
        for s in trajectory.get("steps") or []
        if s.get("kind") == "explore"
        for p in s.get("pairs") or []
    ]
    triplets = [t["triplet_id"] for t in trajectory.get("triplets") or []]
    for kind, ids in (("pair", pairs), ("triplet", triplets)):
        dup = [i for i, n in Counter(ids).items() if n > 1]
        if dup:
            raise FactoryError(
                f"trajectory {_tid(trajectory)!r}: {kind} ids are not unique ({sorted(dup)[:3]})"
            )
    return pairs, triplets


def is_answer_step(step: Mapping) -> bool:
    """The final answer step: a ``final`` step, or an explore step that said 'sufficient' and answered."""
    return step.get("kind") == "final" or (step.get("kind") == "explore" and bool(step.get("sufficient")))


def steps_by_rule(
    trajectory: Mapping, pair_ids: Iterable[str], triplet_ids: Iterable[str]
) -> tuple[int, ...]:
    """Steps kept given kept pairs/triplets, by the backtracing rule (ok steps only)."""
    kp, kt = set(pair_ids), set(triplet_ids)
    kept = []
    for step in trajectory.get("steps") or []:
        if step.get("status") != "ok":
            continue
        has_pair = step.get("kind") == "explore" and any(p["pair_id"] in kp for p in step.get("pairs") or [])
        has_triplet = step.get("kind") == "complete" and any(t in kt for t in step.get("triplet_ids") or [])
        if is_answer_step(step) or has_pair or has_triplet:
            kept.append(step["index"])
    return tuple(kept)


def control_rng(seed: int, trajectory_id: str) -> random.Random:
    """The random control's RNG for one trajectory: a stable hash of (seed, trajectory id)."""
    digest = hashlib.blake2b(f"random-control:{seed}:{trajectory_id}".encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def _check_labels(trajectory: Mapping, labels_row: Mapping, pairs: list[str], triplets: list[str]) -> None:
    tid = _tid(trajectory)
    if labels_row.get("trajectory_id") != tid:
        raise FactoryError(
            f"trajectory {tid!r}: labels row belongs to trajectory {labels_row.get('trajectory_id')!r}"
        )
    steps = {s["index"] for s in trajectory.get("steps") or []}
    for name, known in (
        ("kept_pair_ids", set(pairs)),
        ("kept_triplet_ids", set(triplets)),
        ("kept_step_indices", steps),
    ):
        unknown = [x for x in labels_row.get(name) or [] if x not in known]
        if unknown:
            raise FactoryError(
                f"trajectory {tid!r}: labels field {name!r} refers to ids not in the trajectory: "
                f"{unknown[:3]}"
            )


def kept_units(trajectory: Mapping, labels_row: Mapping | None, variant: str, seed: int) -> Kept:
    """What ``variant`` keeps of ``trajectory`` (labels_row: its backtrace labels; may be None for
    unfiltered)."""
    if variant not in VARIANTS:
        raise FactoryError(f"unknown variant {variant!r} (expected one of {', '.join(VARIANTS)})")
    pairs, triplets = all_units(trajectory)
    ok_steps = tuple(s["index"] for s in trajectory.get("steps") or [] if s.get("status") == "ok")
    if variant == "unfiltered":
        return Kept(tuple(triplets), tuple(pairs), ok_steps, 0, 0, 0)
    if labels_row is None:
        raise FactoryError(
            f"trajectory {_tid(trajectory)!r}: the {variant} variant needs the trajectory's backtrace labels"
        )
    _check_labels(trajectory, labels_row, pairs, triplets)
    lp, lt = set(labels_row["kept_pair_ids"]), set(labels_row["kept_triplet_ids"])
    bt_pairs = [p for p in pairs if p in lp]
    bt_triplets = [t for t in triplets if t in lt]
    removed_pairs, removed_triplets = len(pairs) - len(bt_pairs), len(triplets) - len(bt_triplets)
    if variant == "backtrace":
        ls = set(labels_row["kept_step_indices"])
        steps = tuple(i for i in ok_steps if i in ls)
        return Kept(
            tuple(bt_triplets),
            tuple(bt_pairs),
            steps,
            removed_pairs + removed_triplets,
            removed_pairs,
            removed_triplets,
        )
    rng = control_rng(seed, _tid(trajectory))
    drop_pairs = set(rng.sample(pairs, removed_pairs))
    drop_triplets = set(rng.sample(triplets, removed_triplets))
    kp = tuple(p for p in pairs if p not in drop_pairs)
    kt = tuple(t for t in triplets if t not in drop_triplets)
    return Kept(
        kt,
        kp,
        steps_by_rule(trajectory, kp, kt),
        removed_pairs + removed_triplets,
        removed_pairs,
        removed_triplets,
    )


def whitespace_tokens(text: str) -> int:
    return len((text or "").split())


def _assistant_turn(
    step: Mapping, triplets_by_id: Mapping[str, Mapping], kept: Kept, fmt
) -> tuple[str, int, int]:
    """(assistant content, units the step generated, units kept) for a kept step, re-rendered in ``fmt``
    (``output_format`` of the trajectory's prompt version: the syntax the policy was prompted in)."""
    kind = step.get("kind")
    if is_answer_step(step):
        return step.get("output") or "", 0, 0
    if kind == "explore":
        kp = set(kept.pair_ids)
        pairs = step.get("pairs") or []
        chosen = [(p["entity"], p["relation"]) for p in pairs if p["pair_id"] in kp]
        return fmt.render_explore(step.get("thought") or "", chosen), len(pairs), len(chosen)
    if kind == "complete":
        kt = set(kept.triplet_ids)
        ids = step.get("triplet_ids") or []
        chosen = [triplets_by_id[i] for i in ids if i in kt]
        return (
            fmt.render_complete([(t["subject"], t["relation"], t["object"]) for t in chosen]),
            len(ids),
            len(chosen),
        )
    raise FactoryError(f"step kind {kind!r} is not explore, complete or final")


@dataclass
class SupervisionSet:
    """A round's examples for one variant and the accounting behind them."""

    examples: list[dict]
    stats: dict = field(default_factory=dict)
    kept: dict[str, Kept] = field(default_factory=dict)  # per correct trajectory


def labels_index(labels: Iterable[Mapping], mode: str, target_mode: str) -> dict[str, Mapping]:
    """Labels rows of one mode x target mode by trajectory id (a second row for a trajectory is an error)."""
    out: dict[str, Mapping] = {}
    for row in labels:
        if row["mode"] != mode or row["target_mode"] != target_mode:
            continue
        if row["trajectory_id"] in out:
            raise FactoryError(
                f"labels: two rows for trajectory {row['trajectory_id']!r} under {mode} x {target_mode}"
            )
        out[row["trajectory_id"]] = row
    return out


def build_set(
    trajectories: Sequence[Mapping],
    labels: Iterable[Mapping],
    variant: str,
    round_: int,
    seed: int,
    mode: str = "undirected_shortest",
    target_mode: str = "thought_and_answer",
    exclude: Collection[str] = (),
) -> SupervisionSet:
    """Examples of ``variant`` from the correct trajectories, with counts, units and tokens (see module
    doc). ``exclude``: trajectory ids left out (counted), the same for every variant (e.g. parametric)."""
    if variant not in VARIANTS:
        raise FactoryError(f"unknown variant {variant!r} (expected one of {', '.join(VARIANTS)})")
    assert_trainable(trajectories)
    by_tid = labels_index(labels, mode, target_mode)
    examples: list[dict] = []
    kept_by_tid: dict[str, Kept] = {}
    kinds: Counter = Counter()
    datasets: Counter = Counter()
    units = Counter()
    tokens = Counter()
    correct = failed_steps = ok_steps = excluded = 0
    for traj in trajectories:
        if not traj.get("correct"):
            continue
        correct += 1
        tid = _tid(traj)
        if tid in exclude:
            excluded += 1
            continue
        row = by_tid.get(tid)
        if row is None and variant != "unfiltered":
            raise FactoryError(
                f"trajectory {tid!r} is correct but has no backtrace labels for {mode} x {target_mode}: "
                "run `factory backtrace` for this round"
            )
        kept = kept_units(traj, row, variant, seed)
        everything = kept_units(traj, None, "unfiltered", seed)
        kept_by_tid[tid] = kept
        pairs, triplets = all_units(traj)
        units.update(
            pairs_total=len(pairs),
            triplets_total=len(triplets),
            pairs_kept=len(kept.pair_ids),
            triplets_kept=len(kept.triplet_ids),
        )
        triplets_by_id = {t["triplet_id"]: t for t in traj.get("triplets") or []}
        keep_steps = set(kept.step_indices)
        fmt = output_format(traj.get("prompt_version"))
        qnorm = normalize_question(traj.get("question") or "")
        for step in traj.get("steps") or []:
            if step.get("status") != "ok":
                failed_steps += 1
                continue
            ok_steps += 1
            full, _, _ = _assistant_turn(step, triplets_by_id, everything, fmt)
            tokens["assistant_all"] += whitespace_tokens(full)
            if step["index"] not in keep_steps:
                continue
            content, total, n_kept = _assistant_turn(step, triplets_by_id, kept, fmt)
            prompt = [{"role": m["role"], "content": m["content"]} for m in step.get("messages") or []]
            if not prompt:
                raise FactoryError(f"trajectory {tid!r}, step {step['index']}: no prompt messages recorded")
            tokens["assistant_kept"] += whitespace_tokens(content)
            tokens["prompt"] += sum(whitespace_tokens(m["content"]) for m in prompt)
            kind = "answer" if is_answer_step(step) else step["kind"]
            kinds[kind] += 1
            datasets[traj.get("dataset")] += 1
            examples.append(
                {
                    "example_id": f"{variant}/r{round_}/{tid}/{step['index']}",
                    "variant": variant,
                    "round": round_,
                    "trajectory_id": tid,
                    "question_id": traj["question_id"],
                    "dataset": traj["dataset"],
                    "question_norm": qnorm,
                    "step_index": step["index"],
                    "step_kind": step["kind"],
                    "messages": prompt + [{"role": "assistant", "content": content}],
                    "units_total": total,
                    "units_kept": n_kept,
                    "seed": seed,
                    "policy": traj["policy"],
                }
            )
    fa_labels = [by_tid[t] for t in kept_by_tid if t in by_tid]
    labels_total = sum(r["total_tokens"] for r in fa_labels)
    stats = {
        "variant": variant,
        "round": round_,
        "seed": seed,
        "mode": mode,
        "target_mode": target_mode,
        "trajectories": len(trajectories),
        "correct": correct,
        "incorrect": len(trajectories) - correct,
        "excluded": excluded,  # correct trajectories left out by ``exclude`` (variants.exclude_parametric)
        "examples": len(examples),
        # steps of the correct trajectories: every one is an example, dropped by the variant, or failed (not
        # ok)
        "steps": {
            "ok": ok_steps,
            "kept": len(examples),
            "dropped": ok_steps - len(examples),
            "failed_excluded": failed_steps,
        },
        "examples_by_step_kind": dict(sorted(kinds.items())),
        "examples_by_dataset": dict(sorted(datasets.items())),
        "failed_steps_excluded": failed_steps,
        "units": {
            "total": units["pairs_total"] + units["triplets_total"],
            "kept": units["pairs_kept"] + units["triplets_kept"],
            "removed": units["pairs_total"]
            + units["triplets_total"]
            - units["pairs_kept"]
            - units["triplets_kept"],
            **{k: units[k] for k in ("pairs_total", "pairs_kept", "triplets_total", "triplets_kept")},
        },
        "tokens": {
            "tokenizer": "whitespace",
            "prompt": tokens["prompt"],
            "assistant_kept": tokens["assistant_kept"],
            "assistant_all": tokens["assistant_all"],
        },
        # generated tokens this variant removes / all generated tokens of the correct trajectories' ok steps
        "fa_ratio": 1 - tokens["assistant_kept"] / tokens["assistant_all"]
        if tokens["assistant_all"]
        else 0.0,
        "backtrace_labels_fa_ratio": (sum(r["filtered_tokens"] for r in fa_labels) / labels_total)
        if labels_total
        else None,
        "backtrace_labels_tokenizer": sorted({r["tokenizer"] for r in fa_labels}),
        "policies": dict(sorted(Counter(t["policy"] for t in trajectories).items())),
    }
    return SupervisionSet(examples, stats, kept_by_tid)


def build_examples(
    trajectories: Sequence[Mapping],
    labels: Iterable[Mapping],
    variant: str,
    round_: int,
    seed: int,
    mode: str = "undirected_shortest",
    target_mode: str = "thought_and_answer",
) -> list[dict]:
    """schemas.SUPERVISION rows of ``variant``: one per kept step of every correct trajectory."""
    return build_set(trajectories, labels, variant, round_, seed, mode, target_mode).examples


def accumulated(
    examples: list[dict], variant: str, round_: int, protocol_seed: int = 0, root: Path | str = "."
) -> tuple[list[dict], list[int]]:
    """Round r's training set when sets accumulate: the examples of rounds 0..r-1 (read from their files,
    each round's own rows only) followed by ``examples``. Returns (examples, rounds included)."""
    from schemas import read_rows

    out: list[dict] = []
    rounds: list[int] = []
    for r in range(round_):  # rounds are numbered from 0 (round 0: the base model's trajectories)
        path = Path(root) / paths.supervision_dir(variant, r, protocol_seed) / "train.parquet"
        if not path.exists():
            raise FactoryError(
                f"{path} is missing: build round {r} of {variant} (seed {protocol_seed}) before round "
                f"{round_}"
            )
        own = [row for row in read_rows(path) if row["round"] == r]
        out.extend(own)
        rounds.append(r)
    seen = {row["example_id"] for row in out}
    clash = [e["example_id"] for e in examples if e["example_id"] in seen]
    if clash:
        raise FactoryError(
            f"round {round_} of {variant}: example ids already used by an earlier round: {clash[:3]}"
        )
    return out + list(examples), rounds + [round_]
