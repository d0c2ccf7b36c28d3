"""Per trajectory: every triplet grounded, the gold-relevant set, and each method's kept set.

The methods are S_q of every mode x target mode (``backtrace/<mode>/<target mode>``) and the controls
(``control_sets``: unfiltered, answer entity, random at matched size, the KnowTrace authors' rule),
named as in ``factory.utils.selection``; the rules are in ``factory.relevance.check``'s docstring.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from factory.agent.grounding import best_sentence, ground_triplet, retrieved_passages
from factory.backtrace.authors_rule import authors_rule
from factory.utils.errors import FactoryError
from factory.utils.seeds import stream_random
from factory.utils.selection import ANSWER_ENTITY, AUTHORS_RULE, RANDOM, UNFILTERED, backtrace_method
from factory.utils.text import normalize_answer

LEVELS = ("paragraph", "sentence")
# the review's definition: the grounding passage is a gold supporting paragraph AND the entailment judge
# says the passage states the triplet (factory.relevance.entailment); scored when verdicts are given
ENTAILED = "paragraph_entailed"
CONTROLS = (AUTHORS_RULE, ANSWER_ENTITY, RANDOM, UNFILTERED)  # the order of the reports' tables


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
        pool = retrieved_passages(tid, steps.get(t["step_index"]) or {}, passages_by_pid)
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


def random_selection(triplet_ids: Sequence[str], size: int, seed: int, trajectory_id: str) -> set[str]:
    """``size`` triplets drawn uniformly with a stable per-(seed, trajectory) RNG."""
    rng = stream_random("relevance-random", seed, trajectory_id)
    return set(rng.sample(list(triplet_ids), min(size, len(triplet_ids))))


def control_sets(
    trajectory: Mapping, size: int, random_seeds: Sequence[int], first_line_only: bool = True
) -> dict[str, list[set[str]]]:
    """The controls' kept triplet ids (method -> one set, or one per seed for the random control of
    ``size`` = |S_q|): what the relevance check and the calibration score beside S_q.
    ``first_line_only``: the authors' rule reads each completion's first triplet (False for graphs that
    were not generated one completion at a time)."""
    triplets = [t["triplet_id"] for t in trajectory.get("triplets") or []]
    authors = authors_rule(trajectory, first_line_only=first_line_only)["kept_triplet_ids"]
    return {
        UNFILTERED: [set(triplets)],
        ANSWER_ENTITY: [set(answer_entity_triplets(trajectory))],
        AUTHORS_RULE: [set(authors)],
        RANDOM: [random_selection(triplets, size, s, trajectory["trajectory_id"]) for s in random_seeds],
    }


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
        ev.kept[backtrace_method(*combo)] = [kept]
        ev.no_path[backtrace_method(*combo)] = not row["path_found"]
    ev.kept.update(control_sets(trajectory, len(ev.kept[backtrace_method(*default)][0]), random_seeds))
    return ev
