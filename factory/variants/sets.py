"""A round's supervision set of one variant: chat-format SFT examples, built a batch at a time.

``SetBuilder`` turns the CORRECT trajectories of a round into one example per kept step: the step's
prompt messages as recorded (hint-free for rationalized trajectories), then the kept output as the
assistant turn — explore and complete outputs re-rendered with only the kept pairs/triplets (in every
variant, so formatting never differs between variants), final and sufficient outputs as generated.
Trajectories are added in batches (the stage streams them from the round's file), and the counts,
units and tokens of the set accumulate as they come; ``build_set`` is the same on a list.
``earlier_examples`` streams the sets of earlier rounds when sets accumulate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from factory.agent.policy import assert_trainable
from factory.agent.prompts import output_format
from factory.backtrace.rows import labels_index
from factory.params.label_sections import BacktraceParams
from factory.utils import paths
from factory.utils.errors import FactoryError
from factory.utils.text import normalize_question
from factory.variants import registry
from factory.variants.kept import Selection, all_units, is_answer_step, keep_unfiltered, whitespace_tokens
from factory.variants.registry import select_units


def _assistant_turn(
    step: Mapping, triplets_by_id: Mapping[str, Mapping], kept: Selection, fmt
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
    kept: dict[str, Selection] = field(default_factory=dict)  # per correct trajectory


class SetBuilder:
    """The examples of ``variant`` from a round's trajectories, added in batches (see module doc).
    ``labels_by_tid``: the labels rows of one mode x target mode (``labels_index``); ``exclude``:
    trajectory ids left out (counted), the same for every variant (e.g. parametric); ``mode`` x
    ``target_mode``: those of the labels (backtrace.mode and backtrace.target_mode)."""

    def __init__(
        self,
        variant: str,
        round_: int,
        seed: int,
        labels_by_tid: Mapping[str, Mapping],
        mode: str,
        target_mode: str,
        exclude: Collection[str] = (),
    ):
        self.rule = registry.variant(variant)  # an unknown name raises, naming the registered ones
        self.variant, self.round, self.seed = variant, round_, seed
        self.mode, self.target_mode = mode, target_mode
        self.by_tid, self.exclude = labels_by_tid, exclude
        self.kept: dict[str, Selection] = {}
        self.kinds: Counter = Counter()
        self.datasets: Counter = Counter()
        self.units: Counter = Counter()
        self.tokens: Counter = Counter()
        self.correct = self.failed_steps = self.ok_steps = self.excluded = self.examples = 0

    def add(self, trajectories: Iterable[Mapping]) -> list[dict]:
        """The examples of these trajectories (only correct ones give any), in order."""
        out: list[dict] = []
        for traj in trajectories:
            if traj.get("correct"):
                out += self._examples(traj)
        self.examples += len(out)
        return out

    def _examples(self, traj: Mapping) -> list[dict]:
        variant, seed = self.variant, self.seed
        self.correct += 1
        tid = str(traj.get("trajectory_id", "?"))
        if tid in self.exclude:
            self.excluded += 1
            return []
        row = self.by_tid.get(tid)
        if row is None and self.rule.needs_labels:
            raise FactoryError(
                f"trajectory {tid!r} is correct but has no backtrace labels for {self.mode} x "
                f"{self.target_mode}: run `factory backtrace` for this round"
            )
        kept = select_units(traj, row, variant, seed)
        whole = keep_unfiltered(traj, None, seed)
        self.kept[tid] = kept
        pairs, triplets = all_units(traj)
        self.units.update(
            pairs_total=len(pairs),
            triplets_total=len(triplets),
            pairs_kept=len(kept.pair_ids),
            triplets_kept=len(kept.triplet_ids),
        )
        triplets_by_id = {t["triplet_id"]: t for t in traj.get("triplets") or []}
        keep_steps = set(kept.step_indices)
        fmt = output_format(traj.get("prompt_version"))
        qnorm = normalize_question(traj.get("question") or "")
        examples = []
        for step in traj.get("steps") or []:
            if step.get("status") != "ok":
                self.failed_steps += 1
                continue
            self.ok_steps += 1
            full, _, _ = _assistant_turn(step, triplets_by_id, whole, fmt)
            self.tokens["assistant_all"] += whitespace_tokens(full)
            if step["index"] not in keep_steps:
                continue
            content, total, n_kept = _assistant_turn(step, triplets_by_id, kept, fmt)
            prompt = [{"role": m["role"], "content": m["content"]} for m in step.get("messages") or []]
            if not prompt:
                raise FactoryError(f"trajectory {tid!r}, step {step['index']}: no prompt messages recorded")
            self.tokens["assistant_kept"] += whitespace_tokens(content)
            self.tokens["prompt"] += sum(whitespace_tokens(m["content"]) for m in prompt)
            kind = "answer" if is_answer_step(step) else step["kind"]
            self.kinds[kind] += 1
            self.datasets[traj.get("dataset")] += 1
            examples.append(
                {
                    "example_id": f"{variant}/r{self.round}/{tid}/{step['index']}",
                    "variant": variant,
                    "round": self.round,
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
        return examples

    def stats(self, trajectories: int, policies: Mapping[str, int]) -> dict:
        """The set's accounting; ``trajectories`` and ``policies``: the round's count and policies (all
        trajectories, correct or not)."""
        units, tokens = self.units, self.tokens
        fa_labels = [self.by_tid[t] for t in self.kept if t in self.by_tid]
        labels_total = sum(r["total_tokens"] for r in fa_labels)
        return {
            "variant": self.variant,
            "round": self.round,
            "seed": self.seed,
            "mode": self.mode,
            "target_mode": self.target_mode,
            "trajectories": trajectories,
            "correct": self.correct,
            "incorrect": trajectories - self.correct,
            # correct trajectories left out by ``exclude`` (variants.exclude_parametric)
            "excluded": self.excluded,
            "examples": self.examples,
            # steps of the correct trajectories: every one is an example, dropped by the variant, or failed
            # (not ok)
            "steps": {
                "ok": self.ok_steps,
                "kept": self.examples,
                "dropped": self.ok_steps - self.examples,
                "failed_excluded": self.failed_steps,
            },
            "examples_by_step_kind": dict(sorted(self.kinds.items())),
            "examples_by_dataset": dict(sorted(self.datasets.items())),
            "failed_steps_excluded": self.failed_steps,
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
            # generated tokens this variant removes / all generated tokens of the correct trajectories' ok
            # steps
            "fa_ratio": 1 - tokens["assistant_kept"] / tokens["assistant_all"]
            if tokens["assistant_all"]
            else 0.0,
            "backtrace_labels_fa_ratio": (sum(r["filtered_tokens"] for r in fa_labels) / labels_total)
            if labels_total
            else None,
            "backtrace_labels_tokenizer": sorted({r["tokenizer"] for r in fa_labels}),
            "policies": dict(sorted(policies.items())),
        }


def build_set(
    trajectories: Sequence[Mapping],
    labels: Iterable[Mapping],
    variant: str,
    round_: int,
    seed: int,
    params: BacktraceParams | None = None,
    exclude: Collection[str] = (),
) -> SupervisionSet:
    """``SetBuilder`` over a list of trajectories: examples, counts, units and tokens, from the labels of
    ``params.mode`` x ``params.target_mode`` (None: the defaults of
    ``factory.params.label_sections.BacktraceParams``)."""
    assert_trainable(trajectories)
    params = params or BacktraceParams()
    mode, target_mode = params.mode, params.target_mode
    builder = SetBuilder(
        variant, round_, seed, labels_index(labels, mode, target_mode), mode, target_mode, exclude
    )
    examples = builder.add(trajectories)
    stats = builder.stats(len(trajectories), Counter(t["policy"] for t in trajectories))
    return SupervisionSet(examples, stats, builder.kept)


def earlier_examples(
    variant: str, round_: int, protocol_seed: int = 0, root: Path | str = "."
) -> Iterator[tuple[int, list[dict]]]:
    """(round, a batch of its own examples) of rounds 0..r-1 of the chain, read a row group at a time
    from their sets (each set holds the rounds before it too; only a round's own rows are taken)."""
    from schemas import iter_batches

    for r in range(round_):  # rounds are numbered from 0 (round 0: the base model's trajectories)
        path = Path(root) / paths.supervision_dir(variant, r, protocol_seed) / "train.parquet"
        if not path.exists():
            raise FactoryError(
                f"{path} is missing: build round {r} of {variant} (seed {protocol_seed}) before round "
                f"{round_}"
            )
        for batch in iter_batches(path, where={"round": [r]}):
            yield r, batch.to_pylist()


def accumulated(
    examples: list[dict], variant: str, round_: int, protocol_seed: int = 0, root: Path | str = "."
) -> tuple[list[dict], list[int]]:
    """Round r's training set when sets accumulate: the examples of rounds 0..r-1 followed by
    ``examples``. Returns (examples, rounds included)."""
    out: list[dict] = []
    for _, batch in earlier_examples(variant, round_, protocol_seed, root):
        out.extend(batch)
    check_new_ids(examples, {row["example_id"] for row in out}, variant, round_)
    return out + list(examples), list(range(round_)) + [round_]


def check_new_ids(examples: Iterable[Mapping], seen: Collection[str], variant: str, round_: int) -> None:
    """A round's example ids must not be used by an earlier round of the chain."""
    clash = [e["example_id"] for e in examples if e["example_id"] in seen]
    if clash:
        raise FactoryError(
            f"round {round_} of {variant}: example ids already used by an earlier round: {clash[:3]}"
        )
