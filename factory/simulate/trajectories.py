"""Simulated trajectories with known contributive triplets, to measure backtracing (docs/design.md §2).

For a real question the gold facts are known; the simulator writes the trajectory an agent would
produce if it looked those facts up, then adds noise at a level x in [0, 1]. The true contributive
set is the gold triplets that made it into the trajectory. Records follow ``schemas.TRAJECTORY``
with ``policy="simulated"`` (never trainable).

Gold facts and hop levels come from ``factory.simulate.facts`` (rules there). The agent explores
level 0 in its first step (all parallel entities at once), level 1 next, and so on.

Noise at level x (each kind scales with x; constants below):

- distractor triplets from non-gold passages of the question's own pool (title; relation; salient
  phrase), ``round(6x)`` of them: half as extra pairs the agent looked up (whole steps to drop), half
  as extra triplets inside true completions (steps kept, re-rendered shorter);
- spurious edges: ``round(3x)`` triplets between a true entity and a distractor entity (drawn from
  two distractor entities, so two spurious edges can form a shortcut between true entities);
- reversed relations: each true triplet is written object -> subject ("<relation> of") with
  probability x/2 (still true: the same fact);
- missing edges: each true hop except the first is dropped with probability x/4;
- surface variants: each entity slot of a true triplet is rewritten with probability x/2 (upper or
  lower case, punctuation, or a partial name: leading or trailing tokens dropped);
- unfaithful final thought with probability x: it names 1-2 distractor entities and leaves out the
  intermediate (bridge) entities.

An explore step asks at most ``max_pairs`` pairs (the agent's ``params.agent.max_pairs``); a level
with more pairs (distractor pairs included, in a shuffled order when x > 0) continues in the next
explore steps.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from factory.backtrace.nodes import node_key
from factory.params.agent_sections import AgentParams
from factory.simulate.assemble import POLICY, SimPair, assemble_trajectory
from factory.simulate.facts import Fact, distractor_facts, gold_facts
from factory.utils.splits import unit_hash

N_DISTRACTORS = 6
N_SPURIOUS = 3
P_REVERSE = 0.5
P_MISSING = 0.25
P_VARIANT = 0.5


# ---------------------------------------------------------------------- noise


def surface_variant(name: str, rng: random.Random) -> str:
    """Another way to write a name: case, punctuation, or a partial name (never empty)."""
    tokens = name.split()
    kinds = ["upper", "lower", "punct"] + (["partial"] if len(tokens) >= 2 else [])
    kind = rng.choice(kinds)
    if kind == "upper":
        return name.upper()
    if kind == "lower":
        return name.lower()
    if kind == "punct":
        return rng.choice(
            [
                f'"{name}"',
                name.replace(",", "") + ".",
                name.replace(" ", " -", 1) if len(tokens) > 1 else f"{name}.",
            ]
        )
    keep = tokens[1:] if rng.random() < 0.5 else tokens[-2:] if len(tokens) > 2 else tokens[-1:]
    variant = " ".join(keep).strip(",")
    return variant if node_key(variant) else name


@dataclass
class Simulated:
    trajectory: dict
    truth: dict


def _rng(seed: int, *parts: object) -> random.Random:
    return random.Random(int(unit_hash("simulate", seed, *parts) * 2**53))


def _cap_pairs(
    iterations: list[list[SimPair]], max_pairs: int, rng: random.Random | None
) -> list[list[SimPair]]:
    """At most ``max_pairs`` pairs per explore step, as the agent asks (params.agent.max_pairs): a
    longer iteration continues in the next explore steps, its pairs in a shuffled order when noisy."""
    out = []
    for pairs in iterations:
        pairs = list(pairs)
        if rng is not None and len(pairs) > 1:
            rng.shuffle(pairs)
        out.extend(pairs[k : k + max_pairs] for k in range(0, len(pairs), max_pairs))
    return out


def simulate_trajectory(
    question: dict, noise: float, seed: int, total_triplets: int | None = None, max_pairs: int | None = None
) -> Simulated | None:
    """One simulated trajectory for a real question at a noise level (None when it has no gold
    facts). ``total_triplets`` pads with distractor triplets (or trims them) to that many triplets;
    ``max_pairs`` caps the pairs of one explore step (the agent's limit, agent.max_pairs; None: its
    default)."""
    if max_pairs is None:
        max_pairs = AgentParams().max_pairs
    facts = gold_facts(question)
    if not facts:
        return None
    qid = question["question_id"]
    rng = _rng(seed, qid, f"{noise:.4f}")
    x = max(0.0, min(1.0, float(noise)))
    answer = (question.get("answers") or [""])[0]
    # missing edges: drop hops after the first (never all of them)
    kept_facts = [f for n, f in enumerate(facts) if n == 0 or rng.random() >= P_MISSING * x]
    n_distract = round(N_DISTRACTORS * x)
    n_spurious = round(N_SPURIOUS * x)
    pool = distractor_facts(question, max(n_distract, 2 if n_spurious else 0), rng)
    distractors = pool[:n_distract]
    distractor_entities = [d.subject for d in pool[:2]]
    true_entities = sorted({f.subject for f in kept_facts} | {f.object for f in kept_facts})

    def slot(name: str) -> str:
        return surface_variant(name, rng) if rng.random() < P_VARIANT * x else name

    levels = sorted({f.level for f in kept_facts})
    iterations: list[list[SimPair]] = []
    true_pairs: list[SimPair] = []
    for level in levels:
        pairs: dict[str, SimPair] = {}
        for f in (f for f in kept_facts if f.level == level):
            key = node_key(f.subject)
            if key not in pairs:
                pairs[key] = SimPair(f.subject, f.relation, [], f.pid)
            s, o = slot(f.subject), slot(f.object)
            if rng.random() < P_REVERSE * x:
                pairs[key].triplets.append((o, f"{f.relation} of", s, "true", f.pid))
            else:
                pairs[key].triplets.append((s, f.relation, o, "true", f.pid))
        iterations.append(list(pairs.values()))
        true_pairs.extend(pairs.values())
    if total_triplets is not None:
        n_true = sum(len(p.triplets) for p in true_pairs)
        need = max(0, total_triplets - n_true - n_spurious)
        extra = distractor_facts(question, need, _rng(seed, qid, "pad"))
        while extra and len(extra) < need:  # small pools: reuse passages with other relations
            extra = extra + [
                Fact(d.subject, f"{d.relation} ({len(extra)})", d.object, pid=d.pid)
                for d in extra[: need - len(extra)]
            ]
        distractors = extra[:need]
    for n, d in enumerate(distractors):
        spec = (d.subject, d.relation, d.object, "distractor", d.pid)
        if n % 2 == 0:  # an extra pair the agent looked up
            iterations[rng.randrange(len(iterations))].append(SimPair(d.subject, d.relation, [spec], d.pid))
        else:  # an irrelevant extra triplet inside a true completion
            rng.choice(true_pairs).triplets.append(spec)
    for _ in range(n_spurious if distractor_entities else 0):
        t, d = rng.choice(true_entities), rng.choice(distractor_entities)
        spec = (
            (t, "associated with", d, "spurious", None)
            if rng.random() < 0.5
            else (d, "associated with", t, "spurious", None)
        )
        rng.choice(true_pairs).triplets.append(spec)
    iterations = _cap_pairs(iterations, max_pairs, rng if x > 0 else None)
    unfaithful = rng.random() < x
    final_thought = _thought(question, kept_facts, answer, distractor_entities if unfaithful else None, rng)
    final_kind = "final" if unit_hash("final-kind", qid) < 0.25 else "explore"
    tid = f"{POLICY}/{qid}/x{x:.2f}"
    trajectory, tags = assemble_trajectory(
        question, iterations, final_thought, answer, trajectory_id=tid, final_kind=final_kind, seed=seed
    )
    truth = true_labels(trajectory, tags)
    truth.update(
        {
            "noise": x,
            "unfaithful": unfaithful,
            "dropped_hops": len(facts) - len(kept_facts),
            "gold_facts": len(facts),
        }
    )
    return Simulated(trajectory, truth)


def _thought(
    question: dict, facts: list[Fact], answer: str, distractors: list[str] | None, rng: random.Random
) -> str:
    if distractors:
        named = distractors[: rng.choice([1, 2])] if len(distractors) > 1 else distractors
        return f"Going by what I found about {' and '.join(named)}, the answer is {answer}."
    parts = [f"{f.subject} {f.relation} {f.object}." for f in sorted(facts, key=lambda f: f.level)]
    return " ".join(parts) + f" So the answer is {answer}."


def true_labels(trajectory: dict, tags: dict[str, str]) -> dict:
    """The true contributive triplets, pairs and steps of a simulated trajectory (same step rules as
    backtracing, applied to the known truth)."""
    true_ids = [t["triplet_id"] for t in trajectory["triplets"] if tags.get(t["triplet_id"]) == "true"]
    true_steps = {t["step_index"] for t in trajectory["triplets"] if t["triplet_id"] in set(true_ids)}
    by_index = {s["index"]: s for s in trajectory["steps"]}
    true_pairs = {by_index[i]["pair_id"] for i in true_steps}
    steps = set(true_steps)
    for s in trajectory["steps"]:
        if s["kind"] == "explore" and any(p["pair_id"] in true_pairs for p in s["pairs"]):
            steps.add(s["index"])
        if s["kind"] == "final" or (s["kind"] == "explore" and s.get("sufficient")):
            steps.add(s["index"])
    return {
        "trajectory_id": trajectory["trajectory_id"],
        "question_id": trajectory["question_id"],
        "dataset": trajectory["dataset"],
        "route": trajectory["route"],
        "qtype": trajectory["qtype"],
        "true_triplet_ids": true_ids,
        "true_pair_ids": sorted(true_pairs),
        "true_step_indices": sorted(steps),
        "n_triplets": len(trajectory["triplets"]),
    }


def sample_questions(questions: list[dict], n_per_dataset: int, seed: int) -> list[dict]:
    """Up to n questions per dataset that have gold facts, chosen with a seeded RNG (sorted by id)."""
    usable: dict[str, list[str]] = {}
    for q in questions:
        if gold_facts(q):
            usable.setdefault(q["dataset"], []).append(q["question_id"])
    by_id = {q["question_id"]: q for q in questions}
    return [by_id[i] for i in sample_ids(usable, n_per_dataset, seed)]


def sample_ids(usable: dict[str, list[str]], n_per_dataset: int, seed: int) -> list[str]:
    """``sample_questions`` over the ids of the usable questions of each dataset (a stage collects
    them streaming the questions file, then reads the chosen ones)."""
    chosen = []
    for dataset in sorted(usable):
        ids = sorted(usable[dataset])
        rng = _rng(seed, "sample", dataset)
        chosen.extend(sorted(rng.sample(ids, min(n_per_dataset, len(ids)))))
    return chosen


def simulate(
    questions: list[dict], noise_levels: list[float], seed: int, max_pairs: int | None = None
) -> list[Simulated]:
    """Every question at every noise level (questions without gold facts are skipped); ``max_pairs`` as
    in ``simulate_trajectory``."""
    out = []
    for q in questions:
        for x in noise_levels:
            sim = simulate_trajectory(q, x, seed, max_pairs=max_pairs)
            if sim is not None:
                out.append(sim)
    return out
